"""Patterns on one-minute quotes: SASE+ Query 3 at 1 and 1,000 subscriptions, any match by window.

Two measurements (issue 18's benchmarks), each checked against itself across
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
from cesar.examples import STOCKS_SAMPLE
from cesar.perf.quotes import minute_events
from cesar.perf.report import engine_figures, subscribed
from cesar.server.host.collector import tune_collector
from cesar.server.wire.eventfile import read_events

STOCK = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")


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
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.patternbench", description=__doc__)
    parser.add_argument("--data", type=Path, help="one-minute quotes CSV (default: the sample)")
    parser.add_argument("--events", type=int, default=20_000, help="quotes read from --data")
    parser.add_argument("--queries", type=int, default=1_000, help="Query 3 subscriptions")
    parser.add_argument(
        "--windows", type=int, nargs="*", default=[2, 4, 6, 8, 10], help="minutes (any match)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    parser.add_argument("--smoke", action="store_true", help="the sample, 20 queries (CI)")
    args = parser.parse_args(argv)
    tune_collector()  # as the server's shards run the engine
    if args.smoke:
        args.data, args.queries, args.windows = None, 20, [2, 4]
        args.events = min(args.events, 3_000)
    if args.data is None:
        with open(STOCKS_SAMPLE) as handle:
            events = read_events(handle, str(STOCKS_SAMPLE), {"Stock": STOCK}).events
        events = events[: args.events]
    else:
        events = minute_events(args.data, args.events)
    rng = random.Random(args.seed)
    family = [query3(rng, f"Q3_{number}") for number in range(args.queries)]
    records: list[dict[str, object]] = []
    summary: dict[str, object] = {"events": len(events), "records": records}
    for count in sorted({1, args.queries}):
        shared, alone = (run(name, family[:count], events) for name in ("engine", "nomerge"))
        for record in (shared, alone):
            record["benchmark"] = "query3"
            print(json.dumps(record), file=sys.stderr, flush=True)
        records += [shared, alone]
        summary[f"query3_{count}_outputs_agree"] = shared["digest"] == alone["digest"]
        fast, slow = shared["events_per_s"], alone["events_per_s"]
        if isinstance(fast, float) and isinstance(slow, float) and slow > 0:
            summary[f"query3_{count}_shared_vs_one_automaton_each"] = round(fast / slow, 2)
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
    agree = all(v for k, v in summary.items() if k.endswith("_outputs_agree")) and all(
        r.get("naive_agrees", True) for r in records
    )
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
