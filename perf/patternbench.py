"""Patterns on one-minute quotes: SASE+ Query 3 at 1 and 1,000 subscriptions, any match by window,
AND, and negations that look back.

Four measurements (issue 18's benchmarks), each checked against itself across
engine modes before a figure counts:

* ``query3``: SASE+ Query 3's shape — a Kleene closure of rising prices
  (each above the running average), skip till next match, ``[Name]``, then a
  quote whose volume falls below a share of the closure's last — with its
  constants drawn per subscription (the first volume's threshold, the share,
  the closure's least length), at 1 and ``--queries`` subscriptions; the
  shared DAG (``engine``) against one automaton per subscription
  (``nomerge``), in one run, with the same alerts::

      PATTERN SEQ(Stock+ a[], Stock b)
      WHERE skip_till_next_match(a[], b) {
          [Name] AND a[1].Volume > V AND a[i].Price > avg(a[..i-1].Price)
          AND a.LEN >= n AND b.Volume < p% * a[a.LEN].Volume }
      WITHIN 1 HOUR

* ``any_window``: skip till any match over a growing window — every rising
  subsequence of a stock's quotes within ``W`` minutes, then a lower quote:
  the partial matches (live instances) grow with the window, which the
  recomputation plan of the next issue is measured against::

      PATTERN SEQ(Stock+ a[], Stock b)
      WHERE skip_till_any_match(a[], b) {
          [Name] AND a[i].Price > a[i-1].Price AND b.Price < a[a.LEN].Price }
      WITHIN W MIN

* ``together``: AND of two busy quotes in one minute, each subscription its
  own volume thresholds, at 1 and ``--queries`` subscriptions, shared DAG
  against one automaton each (the join automaton's nodes are shared)::

      PATTERN AND(Stock a, Stock b)
      WHERE a.Name < b.Name AND a.Volume > V AND b.Volume > W WITHIN 0

* ``looking_back``: a rise of a stock with no busy quote of it in the ten
  minutes before (a negation before the first component: remembered events
  and an UNLESS edge), against the same rise without the negation, at
  ``--guarded`` subscriptions (``remembered_checked_per_event`` counts the
  remembered events tried)::

      PATTERN SEQ(!(Stock n), Stock a, Stock b)
      WHERE skip_till_next_match(a, b) {
          [Name] AND n.Volume > V AND b.Price > r * a.Price } WITHIN 10 MIN

Run::

    python -m cesar.perf.patternbench --data QUOTES.csv --events 20000 --json out.json
    python -m cesar.perf.patternbench --smoke      # the bundled sample, small (CI)

Output: JSON records with events/s beside the engine's deterministic counters
(instances touched and spawned per event, the peak and mean of live
instances), an output digest per record, and the ratios measured in one run.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from cesar.automata.schema import Event, epochs, parse_stream_spec
from cesar.perf.quotes import STOCK_SPEC, quote_events
from cesar.perf.report import engine_figures, subscribed
from cesar.server.host.collector import tune_collector

STOCK = parse_stream_spec(STOCK_SPEC)


def query3(rng: random.Random, name: str) -> str:
    """One member of the Query 3 family, its constants drawn from ``rng``."""
    volume = rng.choice([100_000, 200_000, 300_000, 500_000])
    share = rng.randint(30, 60)
    least = rng.randint(5, 10)
    return (
        "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_next_match(a[], b) { "
        f"[Name] AND a[1].Volume > {volume} AND a[i].Price > avg(a[..i-1].Price) "
        f"AND a.LEN >= {least} AND b.Volume < {share}% * a[a.LEN].Volume }} "
        f"WITHIN 1 HOUR PUBLISH {name}"
    )


def any_window(window: int) -> str:
    """Skip till any match of rising runs and a lower quote within ``window`` minutes."""
    return (
        "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_any_match(a[], b) { "
        "[Name] AND a[i].Price > a[i-1].Price AND b.Price < a[a.LEN].Price } "
        f"WITHIN {window} MIN PUBLISH AnyWindow"
    )


def together(rng: random.Random, name: str) -> str:
    """Two busy quotes of different stocks in one minute, the thresholds from ``rng``."""
    first, second = (rng.choice([100_000, 200_000, 300_000, 400_000]) for _ in range(2))
    return (
        "PATTERN AND(Stock a, Stock b) WHERE a.Name < b.Name "
        f"AND a.Volume > {first} AND b.Volume > {second} WITHIN 0 PUBLISH {name}"
    )


def rise(rng: random.Random, name: str, quiet: bool) -> str:
    """A rise by a drawn share within ten minutes; ``quiet``: with no quote of the stock over
    a drawn volume in the ten minutes before."""
    volume = rng.choice([200_000, 300_000, 500_000])
    ratio = 1 + rng.choice([1, 2, 3]) / 1000
    negation = "!(Stock n), " if quiet else ""
    busy = f" AND n.Volume > {volume}" if quiet else ""
    return (
        f"PATTERN SEQ({negation}Stock a, Stock b) WHERE skip_till_next_match(a, b) {{ "
        f"[Name]{busy} AND b.Price > {ratio} * a.Price }} WITHIN 10 MIN PUBLISH {name}"
    )


def run(engine_name: str, texts: Sequence[str], events: Sequence[Event]) -> dict[str, object]:
    """Subscribe ``texts`` to a fresh engine, run ``events`` epoch by epoch; figures."""
    engine = subscribed(engine_name, texts, STOCK)
    parts = epochs(events)
    live_peak = live_sum = 0
    outputs: list[Event] = []
    tick = time.perf_counter()
    for epoch in parts:
        outputs.extend(engine.process(epoch))
        live = len(engine.state.instances)
        live_peak = max(live_peak, live)
        live_sum += live
    seconds = time.perf_counter() - tick
    return {
        **engine_figures(engine_name, engine, len(texts), events, outputs, seconds),
        "live_instances_peak": live_peak,
        "live_instances_mean": round(live_sum / max(len(parts), 1), 1),
        "remembered_checked_per_event": round(
            engine.counters.remembered_checked / max(engine.counters.events, 1), 2
        ),
    }


def shared_vs_alone(
    benchmark: str, family: Sequence[str], counts: Sequence[int], events: Sequence[Event]
) -> tuple[list[dict[str, object]], dict[str, object]]:
    """The family's first ``count`` members, shared DAG and one automaton each, per count:
    the records and the summary lines (outputs agree, the ratio)."""
    records: list[dict[str, object]] = []
    summary: dict[str, object] = {}
    for count in counts:
        shared, alone = (run(name, family[:count], events) for name in ("engine", "nomerge"))
        for record in (shared, alone):
            record["benchmark"] = benchmark
            print(json.dumps(record), file=sys.stderr, flush=True)
        records += [shared, alone]
        summary[f"{benchmark}_{count}_outputs_agree"] = shared["digest"] == alone["digest"]
        fast, slow = shared["events_per_s"], alone["events_per_s"]
        if isinstance(fast, float) and isinstance(slow, float) and slow > 0:
            summary[f"{benchmark}_{count}_shared_vs_one_automaton_each"] = round(fast / slow, 2)
    return records, summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.patternbench", description=__doc__)
    parser.add_argument("--data", type=Path, help="one-minute quotes CSV (default: the sample)")
    parser.add_argument("--events", type=int, default=20_000, help="quotes read from --data")
    parser.add_argument("--queries", type=int, default=1_000, help="Query 3 and AND subscriptions")
    parser.add_argument(
        "--guarded", type=int, default=100, help="subscriptions with a negation looking back"
    )
    parser.add_argument(
        "--windows", type=int, nargs="*", default=[2, 4, 6, 8, 10], help="minutes (any match)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    parser.add_argument("--smoke", action="store_true", help="the sample, 20 queries (CI)")
    args = parser.parse_args(argv)
    tune_collector()  # as the server's shards run the engine
    if args.smoke:
        args.data, args.queries, args.guarded, args.windows = None, 20, 20, [2, 4]
        args.events = min(args.events, 3_000)
    events = quote_events(args.data, args.events)
    rng = random.Random(args.seed)
    counts = sorted({1, args.queries})
    records: list[dict[str, object]] = []
    summary: dict[str, object] = {"events": len(events), "records": records}
    for benchmark, make in (("query3", query3), ("together", together)):
        family = [make(rng, f"{benchmark}_{number}") for number in range(args.queries)]
        found, lines = shared_vs_alone(benchmark, family, counts, events)
        records += found
        summary.update(lines)
    seed = rng.random()
    quiet, plain = (
        [rise(random.Random(seed + n), f"rise_{n}", negated) for n in range(args.guarded)]
        for negated in (True, False)
    )
    guarded, bare = run("engine", quiet, events), run("engine", plain, events)
    naive = run("naive", quiet, events)
    for record, what in ((guarded, "with"), (bare, "without")):
        record.update(benchmark="looking_back", negation=what)
        print(json.dumps(record), file=sys.stderr, flush=True)
    records += [guarded, bare]
    summary["looking_back_naive_agrees"] = naive["digest"] == guarded["digest"]
    summary["looking_back_alerts_with_without"] = [guarded["alerts"], bare["alerts"]]
    fast, slow = bare["events_per_s"], guarded["events_per_s"]
    if isinstance(fast, float) and isinstance(slow, float) and slow > 0:
        summary["looking_back_cost"] = round(fast / slow, 2)
    for window in args.windows:
        record = {"benchmark": "any_window", "window_min": window}
        record.update(run("engine", [any_window(window)], events))
        naive = run("naive", [any_window(window)], events)
        record["naive_agrees"] = naive["digest"] == record["digest"]
        print(json.dumps(record), file=sys.stderr, flush=True)
        records.append(record)
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    agree = (
        all(v for k, v in summary.items() if k.endswith("_outputs_agree"))
        and all(r.get("naive_agrees", True) for r in records)
        and summary["looking_back_naive_agrees"] is True
    )
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
