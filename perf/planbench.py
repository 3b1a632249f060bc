"""Evaluation plans (issue 19): lazy vs eager with a rare type, recompute vs eager by window,
and the planner on a stream whose frequencies change midway.

Each figure comes from one run, the engine with and without plans on the same
events, and counts only if both give the same alerts:

* ``rare``: a synthetic stream of types ``A``, ``B``, ``C``, ``D`` whose rates
  span three orders of magnitude (``C`` 100× rarer than ``A``, ``D`` 1,000×),
  ``x`` in 0..99 and a key ``k`` of four values.  SEQ and AND patterns of 3–4
  types with one rare type, eager (the DAG) against the plan the planner picks
  and against the pinned lazy chain, rarest first: partial matches made,
  mean live partial matches and events/s::

      python -m cesar.perf.planbench --ticks 20000

* ``stocks_rare``: the same on one-minute quotes: ``SEQ(Stock a, Stock b, Stock c)``
  under ``[Name]``, a rise then a fall on a volume above the 99th percentile (``c``
  100× rarer than ``a`` and ``b``), eager against ``PLAN chain(c, b, a)`` and the planner;
* ``any_window``: skip-till-any-match Kleene closures of rising quotes then a
  lower one (the patterns benchmark's family) over growing windows on
  one-minute quotes, eager against ``PLAN recompute``: mean and peak memory
  (live partial matches against buffered events) and events/s;
* ``crowd``: the patterns benchmark's AND family (``--crowd`` subscriptions of one
  template, their own constants) on the quotes, planned or not: the planner keeps them on
  the DAG beside each other, at the DAG's speed;
* ``drift``: the ``rare`` SEQ where ``C`` is rare for the first half and ``A``
  for the second: every fixed plan against the planner left to itself.

``--smoke`` runs a small version once in CI.  Figures: perf/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, StreamSchema, Value, epochs, parse_stream_spec
from cesar.perf.patternbench import STOCK, any_window, together
from cesar.perf.plot import plans_figure
from cesar.perf.quotes import quote_events
from cesar.perf.report import engine_figures
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.host.collector import tune_collector

SAMPLE = 8
"""Memory (live partial matches, buffered events) is sampled every this many epochs."""
TYPES = {name: parse_stream_spec(f"{name}(k:string,x:int)") for name in "ABCD"}
RARE = {
    "seq3": "PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) { [k] AND "
    "b.x > a.x AND c.x > b.x } WITHIN 40 {plan} PUBLISH P",
    "seq3_rare_middle": "PATTERN SEQ(A a, C c, B b) WHERE skip_till_any_match(a, c, b) { [k] "
    "AND c.x > a.x AND b.x > c.x } WITHIN 40 {plan} PUBLISH P",
    "seq4": "PATTERN SEQ(A a, B b, A d, C c) WHERE skip_till_any_match(a, b, d, c) { [k] AND "
    "b.x > a.x AND d.x > b.x AND c.x > d.x } WITHIN 20 {plan} PUBLISH P",
    "and3": "PATTERN AND(A a, B b, C c) WHERE [k] AND b.x > a.x AND c.x > b.x WITHIN 20 "
    "{plan} PUBLISH P",
}
LAZY = {
    "seq3": "chain(c, b, a)",
    "seq3_rare_middle": "chain(c, a, b)",
    "seq4": "chain(c, d, b, a)",
    "and3": "chain(c, b, a)",
}


def synthetic(ticks: int, rates: dict[str, float], seed: int, start: int = 0) -> list[Event]:
    """Per tick, an event of each type with its probability."""
    rng = random.Random(seed)
    out = []
    for t in range(start, start + ticks):
        for name, rate in rates.items():
            if rng.random() < rate:
                values: dict[str, Value] = {"k": rng.choice("wxyz"), "x": rng.randrange(100)}
                out.append(Event.of(name, t, t, values))
    return out


def run(
    texts: Sequence[str], schemas: dict[str, StreamSchema], events: Sequence[Event], plans: bool
) -> dict[str, Any]:
    """Patterns on a fresh engine (``plans`` on or off) over ``events``: their figures (the
    plan and why: the first's)."""
    engine = Engine(EngineOptions(plans=plans))
    names = []
    for number, text in enumerate(texts):
        compiled = compile_query(text, schemas, f"q{number}")
        engine.subscribe(compiled.name, compiled.automata, None, compiled.pattern)
        names.append(compiled.name)
    parts = epochs(events)
    outputs: list[Event] = []
    live_sum = live_peak = held_sum = held_peak = 0
    tick = time.perf_counter()
    for number, epoch in enumerate(parts):
        outputs.extend(engine.process(epoch))
        if number % SAMPLE:
            continue
        live, held = len(engine.state.instances), 0
        for _, waiting, buffered in engine.planner.lazy_holdings():
            live += waiting
            held += buffered
        live_sum += live
        live_peak = max(live_peak, live)
        held_sum += held
        held_peak = max(held_peak, held)
    seconds = time.perf_counter() - tick
    record = engine_figures(
        "plans" if plans else "eager", engine, len(texts), events, outputs, seconds
    )
    planned = engine.planner.planned.values()
    record.update(
        plan=engine.planner.describe(names[0]) or "eager (not planned)",
        plans_now=dict(Counter(p.plan.kind.value for p in planned)),
        idle=sum(p.idle for p in planned),
        switches=engine.planner.switches,
        partial_matches_made=engine.counters.spawned
        + sum(r.counters.partials for p in planned for r in p.runs),
        live_partials_mean=round(live_sum / max(len(parts) // SAMPLE, 1), 1),
        live_partials_peak=live_peak,
        buffered_mean=round(held_sum / max(len(parts) // SAMPLE, 1), 1),
        buffered_peak=held_peak,
    )
    return record


def ratio(fast: Any, slow: Any) -> float | None:
    ok = isinstance(fast, (float, int)) and isinstance(slow, (float, int)) and slow
    return round(fast / slow, 2) if ok else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.planbench", description=__doc__)
    parser.add_argument("--ticks", type=int, default=20_000, help="synthetic stream length")
    parser.add_argument("--data", type=Path, help="one-minute quotes CSV (default: the sample)")
    parser.add_argument("--events", type=int, default=5_000, help="quotes read (any_window)")
    parser.add_argument("--windows", type=int, nargs="*", default=[2, 4, 6, 8])
    parser.add_argument(
        "--crowd", type=int, default=1_000, help="AND subscriptions of one template"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the summary here")
    parser.add_argument("--plot", type=Path, help="also draw the figures here (PNG)")
    parser.add_argument("--smoke", action="store_true", help="a small run (CI)")
    args = parser.parse_args(argv)
    tune_collector()
    if args.smoke:
        args.ticks, args.events, args.windows, args.data = 1_500, 1_000, [2, 4], None
        args.crowd = 20
    records: list[dict[str, Any]] = []
    summary: dict[str, Any] = {"records": records}
    agree = True

    def keep(record: dict[str, Any], **labels: Any) -> dict[str, Any]:
        record.update(labels)
        print(json.dumps(record), file=sys.stderr, flush=True)
        records.append(record)
        return record

    rates = {"A": 0.9, "B": 0.9, "C": 0.009, "D": 0.0009}
    stream = synthetic(args.ticks, rates, args.seed)
    for name, shape in RARE.items():
        eager = keep(
            run([shape.replace("{plan}", "")], TYPES, stream, False), benchmark="rare", shape=name
        )
        lazy = keep(
            run([shape.replace("{plan}", f"PLAN {LAZY[name]}")], TYPES, stream, True),
            benchmark="rare",
            shape=name,
        )
        auto = keep(
            run([shape.replace("{plan}", "")], TYPES, stream, True), benchmark="rare", shape=name
        )
        agree &= eager["digest"] == lazy["digest"] == auto["digest"]
        summary[f"rare_{name}_partials_eager_vs_lazy"] = ratio(
            eager["partial_matches_made"], lazy["partial_matches_made"]
        )
        summary[f"rare_{name}_events_per_s_lazy_vs_eager"] = ratio(
            lazy["events_per_s"], eager["events_per_s"]
        )
        summary[f"rare_{name}_events_per_s_planner_vs_eager"] = ratio(
            auto["events_per_s"], eager["events_per_s"]
        )
    quotes = quote_events(args.data, args.events)
    stocks = {"Stock": STOCK}
    volumes = sorted(int(e.attrs()["Volume"]) for e in quotes)
    loud = volumes[len(volumes) * 99 // 100]
    shape = (
        "PATTERN SEQ(Stock a, Stock b, Stock c) WHERE skip_till_any_match(a, b, c) { [Name] AND "
        f"b.Price > a.Price AND c.Price < b.Price AND c.Volume > {loud} }} WITHIN 20 MIN "
        "{plan} PUBLISH Loud"
    )
    eager = keep(run([shape.replace("{plan}", "")], stocks, quotes, False), benchmark="stocks_rare")
    lazy = keep(
        run([shape.replace("{plan}", "PLAN chain(c, b, a)")], stocks, quotes, True),
        benchmark="stocks_rare",
    )
    auto = keep(run([shape.replace("{plan}", "")], stocks, quotes, True), benchmark="stocks_rare")
    agree &= eager["digest"] == lazy["digest"] == auto["digest"]
    summary["stocks_rare_volume_over"] = loud
    summary["stocks_rare_partials_eager_vs_lazy"] = ratio(
        eager["partial_matches_made"], lazy["partial_matches_made"]
    )
    summary["stocks_rare_events_per_s_lazy_vs_eager"] = ratio(
        lazy["events_per_s"], eager["events_per_s"]
    )
    summary["stocks_rare_events_per_s_planner_vs_eager"] = ratio(
        auto["events_per_s"], eager["events_per_s"]
    )
    for window in args.windows:
        text = any_window(window)
        pinned = text.replace(" PUBLISH", " PLAN recompute PUBLISH")
        eager = keep(run([text], stocks, quotes, False), benchmark="any_window", window_min=window)
        again = keep(run([pinned], stocks, quotes, True), benchmark="any_window", window_min=window)
        agree &= eager["digest"] == again["digest"]
        summary[f"any_window_{window}_memory_eager_live_vs_recompute_buffered"] = [
            eager["live_partials_mean"],
            again["buffered_mean"],
        ]
        summary[f"any_window_{window}_events_per_s_recompute_vs_eager"] = ratio(
            again["events_per_s"], eager["events_per_s"]
        )
    rng = random.Random(args.seed)
    family = [together(rng, f"together_{n}") for n in range(args.crowd)]
    alone = keep(run(family, stocks, quotes, False), benchmark="crowd")
    crowded = keep(run(family, stocks, quotes, True), benchmark="crowd")
    agree &= alone["digest"] == crowded["digest"]
    summary["crowd_events_per_s_planned_vs_not"] = ratio(
        crowded["events_per_s"], alone["events_per_s"]
    )
    half = args.ticks // 2
    drift = synthetic(half, rates, args.seed) + synthetic(
        half, {"A": 0.009, "B": 0.9, "C": 0.9, "D": 0.0009}, args.seed + 1, start=half
    )
    shape = RARE["seq3"]
    fixed = {}
    for plan in ("", "PLAN chain(c, b, a)", "PLAN chain(a, b, c)", "PLAN recompute"):
        record = keep(
            run([shape.replace("{plan}", plan)], TYPES, drift, bool(plan)),
            benchmark="drift",
            fixed=plan or "eager",
        )
        fixed[plan or "eager"] = record
    planner = keep(
        run([shape.replace("{plan}", "")], TYPES, drift, True), benchmark="drift", fixed="auto"
    )
    agree &= len({r["digest"] for r in (*fixed.values(), planner)}) == 1
    best = max(fixed.values(), key=lambda r: r["events_per_s"] or 0)
    summary["drift_best_fixed"] = best["fixed"]
    summary["drift_best_fixed_vs_planner"] = ratio(best["events_per_s"], planner["events_per_s"])
    summary["drift_planner_switches"] = planner["switches"]
    summary["outputs_agree"] = agree
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    if args.plot:
        plans_figure(summary, args.plot)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
