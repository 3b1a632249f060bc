"""Realistic subscription populations (issue "Many patterns, one engine"): engine vs planned vs
nomerge, 100 vs 1,000 vs 10,000 subscriptions, side by side in one run.

A served population is neither one template nor all different.  Four populations, drawn
from ``--seed`` around the quotes' own tickers and prices:

* ``templates``: CEL queries of a few shapes with their own constants, the shapes in a Zipf
  mix (the first most common): a rise of one ticker, a rise within a window, a drop of the
  next quote of a stock, runs of rises, a quote over a volume, a stock that drops 1–3 % below
  an earlier quote of itself with no window, and runs that *wait for another ticker to pass a
  bound value* (``FILTER{Name = 'Sk' AND Price > c}(Stock) NEXT{$2.Name = 'Sm' AND $2.Price >
  $1.Price} Stock``);
* ``patterns``: SASE patterns of distinct shapes: 2–4 components under ``[Name]``, the first
  pinned to a ticker, each later component compared with the one before it by one of seven
  conditions, one of three strategies, a window of 5–50 minutes (3–10 under skip till any
  match, which keeps every combination in its window).  Shapes are drawn without
  repeats until they run out (2,394), then again with other constants;
* ``mixed``: half of each;
* ``pinned``: the skip-till-any-match shapes of ``patterns`` with every component of a
  ticker of its own (``a.Name = 'S3' AND b.Name = 'S17'``, no ``[Name]``), each pinned to
  its lazy chain (``PLAN chain(a, b, …)``): under ``planned`` every one is a lazy run, which
  an event reaches through the planner's own-condition index only if it names one of its
  tickers (``engine`` and ``nomerge`` run them without the pin, on the DAG);
* ``shared``: the skip-till-any-match shapes of ``patterns`` under ``[Name]``, each pinned to
  its lazy chain: the later components take every quote of the first one's ticker, so every
  subscription reads the same events there and the lazy runs share those buffers.

Streams: ``quotes`` (the shared one-minute bars, 6 tickers), ``walk`` (a random walk of
500 tickers, the original Cayuga engine's workload) and ``reach`` (a walk of one ticker per
``--starts`` subscriptions at each count: each event can start about that many of them at
100 as at 1,000, so the cost per event measures what unrelated subscriptions add).  Every
mode must give every subscription the same alerts (``digest``); a record carries events/s,
the subscriptions compiled per second, and the engine's deterministic counters per event.

* ``--growth``: the mixed population (on the quotes, or ``--growth-stream walk``), instances
  touched per event over the first 10,000 events and over all of ``--growth-events`` (the runs
  that wait must not make an event cost what the engine keeps).  On the walk a 50-minute
  window holds 25,000 events: its first 10,000 are the windows filling;
* ``--alone``: each template by itself at 10, 100 and 300 subscriptions, the cost per event
  and the functions where it goes (cProfile, by own time);
* ``--compile``: subscriptions compiled per second: distinct-shape patterns in full, pattern
  families and CEL templates through the server's shape cache (``QueryCache``).

Run::

    python -m cesar.perf.populations --data QUOTES.csv --events 20000 --json out.json
    python -m cesar.perf.populations --smoke          # small, once in CI

Figures: perf/RESULTS.md.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import pstats
import random
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, epochs, parse_stream_spec
from cesar.automata.shape import QueryCache, shape_of
from cesar.perf.quotes import STOCK_SPEC, first_prices, quote_events, walk_events
from cesar.perf.report import engine_figures, stamped, subscribed, write_json
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.matches import Match, expand
from cesar.server.engine.workload import ENGINE_MODES
from cesar.server.front import limits
from cesar.server.host.calibrate import calibrate
from cesar.server.host.collector import tune_collector

STOCK = parse_stream_spec(STOCK_SPEC)
MODES = ("engine", "planned", "budgeted", "nomerge")
"""``budgeted``: ``planned`` with the server's default budgets (work per subscription and
epoch, instances per subscription and per engine): what they cost, and that they lose no
alert on these populations."""
UNPINNED = re.compile(r" PLAN \w+(\([^)]*\))?")
"""A pattern's PLAN clause, which an engine without plans refuses."""
Modes = dict[str, EngineOptions]
"""Each mode's engine options (``planned`` with the plan constants measured on the host)."""

Template = Callable[[random.Random, str, str, float], str]
"""A template's member: (rng, its ticker, another ticker, the ticker's first price) → CEL."""


def _rise(rng: random.Random, ticker: str, other: str, price: float) -> str:
    c = round(price * rng.uniform(0.97, 1.03), 2)
    return (
        f"FILTER{{Name = '{ticker}' AND Price > {c}}}(Stock) "
        "NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock"
    )


def _rise_within(rng: random.Random, ticker: str, other: str, price: float) -> str:
    c, w = round(price * rng.uniform(0.97, 1.03), 2), rng.randint(2, 10)
    return (
        f"FILTER{{Name = '{ticker}' AND Price > {c}}} Stock "
        f"NEXT{{$1.Name = $2.Name AND $2.Price > $1.Price AND DUR <= {w}}} Stock"
    )


def _next_drop(rng: random.Random, ticker: str, other: str, price: float) -> str:
    k = round(1 - rng.uniform(0.001, 0.01), 4)
    return (
        f"FILTER{{After < {k} * Before}} "
        "(SELECT Name, Price_1 AS Before, Price AS After FROM Stock NEXT{$1.Name = $2.Name} Stock)"
    )


def _volume(rng: random.Random, ticker: str, other: str, price: float) -> str:
    return f"FILTER{{Name = '{ticker}' AND Volume > {rng.choice([1, 2, 5, 10]) * 10_000}}} Stock"


def _rises(rng: random.Random, ticker: str, other: str, price: float) -> str:
    n = rng.randint(2, 6)
    return (
        f"FILTER{{Quotes >= {n}}} ((SELECT *, 1 AS Quotes FROM FILTER{{Name = '{ticker}'}} Stock) "
        "FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Quotes + 1 AS Quotes} Stock)"
    )


def _falls_below(rng: random.Random, ticker: str, other: str, price: float) -> str:
    r = round(1 - rng.uniform(0.01, 0.03), 3)
    return (
        f"FILTER{{Name = '{ticker}'}}(Stock) "
        f"NEXT{{$1.Name = $2.Name AND $2.Price < {r} * $1.Price}} Stock"
    )


def _passes_other(rng: random.Random, ticker: str, other: str, price: float) -> str:
    c = round(price * rng.uniform(0.97, 1.03), 2)
    return (
        f"FILTER{{Name = '{ticker}' AND Price > {c}}}(Stock) "
        f"NEXT{{$2.Name = '{other}' AND $2.Price > $1.Price}} Stock"
    )


TEMPLATES: dict[str, Template] = {
    "rise": _rise,
    "passes_other": _passes_other,
    "volume": _volume,
    "rise_within": _rise_within,
    "next_drop": _next_drop,
    "falls_below": _falls_below,
    "rises": _rises,
}
"""The CEL shapes, most common first (the Zipf mix's order)."""

CONDITIONS = (
    "{x}.Price > {p}.Price",
    "{x}.Price < {p}.Price",
    "{x}.Volume > {p}.Volume",
    "{x}.Volume < {p}.Volume",
    "{x}.Price > {r} * {p}.Price",
    "{x}.Price < {r} * {p}.Price",
    "{x}.Volume > {v}",
)
STRATEGIES = ("skip_till_any_match", "skip_till_next_match", "partition_contiguity")
NAMES = "abcd"


Shape = tuple[int, tuple[int, ...], bool]
"""A pattern's shape: its strategy, a condition per later component, a volume test on ``a``."""


def pattern_shapes() -> list[Shape]:
    """Every pattern shape (2,394)."""
    return [
        (strategy, conditions, volume)
        for steps in (2, 3, 4)
        for conditions in itertools.product(range(len(CONDITIONS)), repeat=steps - 1)
        for strategy in range(len(STRATEGIES))
        for volume in (False, True)
    ]


def pattern(rng: random.Random, shape: Shape, ticker: str, others: Sequence[str] = ()) -> str:
    """A SASE pattern of ``shape``, its first component pinned to ``ticker``; under ``[Name]``,
    or with each later component pinned to one of ``others`` if given."""
    strategy, conditions, volume = shape
    names = NAMES[: len(conditions) + 1]
    where = [f"[Name] AND a.Name = '{ticker}'"]
    if others:
        where = [f"{name}.Name = '{t}'" for name, t in zip(names, (ticker, *others), strict=False)]
    if volume:
        where.append(f"a.Volume > {rng.choice([1, 2, 5]) * 10_000}")
    for position, condition in enumerate(conditions):
        where.append(
            CONDITIONS[condition].format(
                x=names[position + 1],
                p=names[position],
                r=round(1 + rng.uniform(-0.004, 0.004), 4),
                v=rng.choice([1, 2, 5]) * 10_000,
            )
        )
    components = ", ".join(f"Stock {name}" for name in names)
    # Skip till any match keeps every combination in the window: its windows are short.
    window = rng.randint(3, 10) if strategy == 0 else rng.randint(5, 50)
    return (
        f"PATTERN SEQ({components}) WHERE {STRATEGIES[strategy]}({', '.join(names)}) "
        f"{{ {' AND '.join(where)} }} WITHIN {window} MIN"
    )


def population(kind: str, count: int, events: Sequence[Event], seed: int) -> list[str]:
    """``count`` subscriptions of population ``kind`` (module docstring) for ``events``."""
    rng = random.Random(f"{kind}:{count}:{seed}")
    first = first_prices(events)
    tickers = sorted(first)
    if kind == "mixed":
        half = count // 2
        return population("templates", half, events, seed) + population(
            "patterns", count - half, events, seed
        )
    texts = []
    if kind == "templates":
        templates = list(TEMPLATES.values())
        weights = [1 / rank for rank in range(1, len(templates) + 1)]
        for _ in range(count):
            (template,) = rng.choices(templates, weights)
            ticker, other = rng.sample(tickers, 2)
            texts.append(template(rng, ticker, other, first[ticker]))
        return texts
    shapes = pattern_shapes()
    if kind in ("pinned", "shared"):
        shapes = [shape for shape in shapes if shape[0] == 0]
        drawn = itertools.islice(itertools.cycle(rng.sample(shapes, len(shapes))), count)
        texts = []
        for shape in drawn:
            others = rng.sample(tickers, 3) if kind == "pinned" else ()
            chain = ", ".join(NAMES[: len(shape[1]) + 1])
            texts.append(f"{pattern(rng, shape, rng.choice(tickers), others)} PLAN chain({chain})")
        return texts
    order: list[Shape] = []
    while len(order) < count:
        order += rng.sample(shapes, len(shapes))
    return [pattern(rng, shape, rng.choice(tickers)) for shape in order[:count]]


@dataclass
class Run:
    """One engine's run of a population: its compile and processing times, the engine, and
    the alerts as it gave them (a family's match is one reference)."""

    compiled: float
    seconds: float
    engine: Engine
    made: list[Event | Match]


def run(mode: str, texts: Sequence[str], events: Sequence[Event], options: Modes) -> Run:
    """Subscribe ``texts`` to a fresh engine of ``mode`` and run ``events`` (an engine without
    plans runs a pinned pattern on the DAG: its pin is left out)."""
    if not options[mode].plans:
        texts = [UNPINNED.sub("", text) for text in texts]
    tick = time.perf_counter()
    engine = subscribed(mode, texts, STOCK, options[mode])
    compiled = time.perf_counter() - tick
    made: list[Event | Match] = []
    tick = time.perf_counter()
    for epoch in epochs(events):
        made.extend(engine.process_matches(epoch))
    return Run(compiled, time.perf_counter() - tick, engine, made)


def figures(mode: str, texts: Sequence[str], events: Sequence[Event], best: Run) -> dict[str, Any]:
    """A run's figures; the alerts copied per subscription (after the clock) for the digest."""
    engine = best.engine
    out = engine_figures(mode, engine, len(texts), events, expand(best.made), best.seconds)
    out["subscribed_per_s"] = round(len(texts) / best.compiled, 1)
    out["live_instances"] = len(engine.state.instances)
    if engine.options.plans:
        out.update(engine.planner.figures())
    return out


def compare(
    stream: str,
    kind: str,
    counts: Sequence[int],
    events_for: Callable[[int], Sequence[Event]],
    seed: int,
    repeat: int,
    nomerge_max: int,
    options: Modes,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every mode at every count on one population (nomerge up to ``nomerge_max``
    subscriptions; ``events_for(count)`` the events), the modes taking turns ``repeat`` times
    and the fastest run of each kept (the machine is noisy): records, and the ratios of one
    run."""
    records: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for count in counts:
        events = events_for(count)
        tickers = len(first_prices(events))
        texts = population(kind, count, events, seed)
        modes = [m for m in MODES if m != "nomerge" or count <= nomerge_max]
        best: dict[str, Run] = {}
        for _ in range(repeat):
            for mode in modes:
                one = run(mode, texts, events, options)
                if mode not in best or one.seconds < best[mode].seconds:
                    best[mode] = one
        mine = {}
        for mode in modes:
            record = {
                "stream": stream,
                "population": kind,
                "tickers": tickers,
                **figures(mode, texts, events, best[mode]),
            }
            print(json.dumps(record), file=sys.stderr, flush=True)
            records.append(record)
            mine[mode] = record
        best.clear()
        label = f"{stream}_{kind}_{count}"
        summary[f"{label}_alerts_agree"] = len({r["digest"] for r in mine.values()}) == 1
        for mode in modes[1:]:
            summary[f"{label}_{mode}_vs_engine"] = round(
                mine[mode]["events_per_s"] / mine["engine"]["events_per_s"], 2
            )
        summary[f"{label}_budgeted_vs_planned"] = round(
            mine["budgeted"]["events_per_s"] / mine["planned"]["events_per_s"], 2
        )
    for mode in ("engine", "planned"):
        by_count = {r["queries"]: r for r in records if r["engine"] == mode}
        for low, high in itertools.pairwise(counts):
            key = f"{stream}_{kind}_{mode}_cost_per_event_{high}_vs_{low}"
            summary[key] = round(by_count[low]["events_per_s"] / by_count[high]["events_per_s"], 2)
    return records, summary


def growth(
    stream: str, count: int, events: Sequence[Event], seed: int, first: int, options: Modes
) -> dict[str, Any]:
    """Instances touched per event over the first ``first`` events, over all of them, and over
    the last ``first`` (after the windows filled: whether the cost still grows with time)."""
    texts = population("mixed", count, events, seed)
    engine = subscribed("planned", texts, STOCK, options["planned"])
    blocks: list[tuple[int, int]] = [(0, 0)]  # (events seen, instances touched) per block
    seen = 0
    for epoch in epochs(events):
        engine.process(epoch)
        seen += len(epoch)
        if seen >= blocks[-1][0] + first:
            blocks.append((seen, engine.counters.instances_touched))
    if blocks[-1][0] < seen:
        blocks.append((seen, engine.counters.instances_touched))

    def rate(start: tuple[int, int], end: tuple[int, int]) -> float:
        return round((end[1] - start[1]) / max(end[0] - start[0], 1), 2)

    head, last = rate(blocks[0], blocks[1]), rate(blocks[-2], blocks[-1])
    return {
        "benchmark": "growth",
        "stream": stream,
        "queries": count,
        "events": seen,
        f"instances_touched_per_event_first_{first}": head,
        "instances_touched_per_event_all": rate(blocks[0], blocks[-1]),
        f"instances_touched_per_event_last_{first}": last,
        "per_block": [rate(a, b) for a, b in itertools.pairwise(blocks)],
        "growth_all_vs_first": round(rate(blocks[0], blocks[-1]) / max(head, 1e-9), 2),
        "live_instances": len(engine.state.instances),
    }


def compiling(count: int, events: Sequence[Event], seed: int) -> dict[str, Any]:
    """Subscriptions compiled per second, ``count`` of each kind (module docstring); the
    pattern family is one distinct-shape pattern's shape with its ticker and constants drawn
    again."""
    schemas = {STOCK.name: STOCK}
    distinct = population("patterns", count, events, seed)
    rng = random.Random(seed)
    shape = pattern_shapes()[len(pattern_shapes()) // 2]
    tickers = sorted(first_prices(events))
    family = [pattern(rng, shape, rng.choice(tickers)) for _ in range(count)]
    family = [text.rsplit(" WITHIN", 1)[0] + " WITHIN 20 MIN" for text in family]
    templates = population("templates", count, events, seed)
    out: dict[str, Any] = {"benchmark": "compile", "count": count}
    tick = time.perf_counter()
    for number, text in enumerate(distinct):
        compile_query(text, schemas, f"q{number}")
    out["distinct_patterns_per_s"] = round(count / (time.perf_counter() - tick), 1)
    for kind, texts in (("pattern_family", family), ("cel_templates", templates)):
        cache = QueryCache()
        tick = time.perf_counter()
        for number, text in enumerate(texts):
            cache.compile(shape_of(text), schemas, f"q{number}")
        out[f"{kind}_per_s"] = round(count / (time.perf_counter() - tick), 1)
        out[f"{kind}_bound"] = cache.counters["bound"]
    return out


def alone(counts: Sequence[int], events: Sequence[Event], seed: int) -> list[dict[str, Any]]:
    """Each template by itself: µs per event and the five functions of most own time."""
    out = []
    first = first_prices(events)
    tickers = sorted(first)
    for name, template in TEMPLATES.items():
        for count in counts:
            rng = random.Random(f"{name}:{count}:{seed}")
            texts = []
            for _ in range(count):
                ticker, other = rng.sample(tickers, 2)
                texts.append(template(rng, ticker, other, first[ticker]))
            engine = subscribed("engine", texts, STOCK)
            profile = cProfile.Profile()
            parts = epochs(events)
            tick = time.perf_counter()
            profile.enable()
            for epoch in parts:
                engine.process(epoch)
            profile.disable()
            seconds = time.perf_counter() - tick
            stats = pstats.Stats(profile)
            rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])  # type: ignore[attr-defined]
            total = sum(row[2] for _, row in rows) or 1.0
            record = {
                "benchmark": "alone",
                "template": name,
                "queries": count,
                "us_per_event_profiled": round(seconds / len(events) * 1e6, 1),
                "instances_touched_per_event": round(
                    engine.counters.instances_touched / len(events), 2
                ),
                "own_time": [
                    f"{func[2]} ({Path(func[0]).name}:{func[1]}) {row[2] / total:.0%}"
                    for func, row in rows[:5]
                ],
            }
            print(json.dumps(record), file=sys.stderr, flush=True)
            out.append(record)
    return out


def stream_events(stream: str, args: argparse.Namespace) -> Callable[[int], Sequence[Event]]:
    """The events of ``stream`` for a count of subscriptions: the same quotes or walk at every
    count, or for ``reach`` a walk of one ticker per ``--starts`` subscriptions, so each event
    can start about that many of them and each ticker quotes once a minute at every count."""
    if stream == "reach":
        return lambda count: walk_events(
            args.events, names=max(2, count // args.starts), seed=args.seed
        )
    if stream == "quotes":
        events = quote_events(args.data, args.events)
    else:
        events = walk_events(args.events, names=500, seed=args.seed)
    return lambda count: events


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.populations", description=__doc__)
    parser.add_argument("--data", type=Path, help="one-minute quotes CSV (default: the sample)")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--counts", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument(
        "--populations", nargs="+", default=["templates", "patterns", "mixed", "pinned", "shared"]
    )
    parser.add_argument(
        "--streams", nargs="+", choices=["quotes", "walk", "reach"], default=["quotes", "walk"]
    )
    parser.add_argument(
        "--starts", type=int, default=2, help="reach: subscriptions per ticker (each event's)"
    )
    parser.add_argument("--growth", action="store_true", help="the growth run only")
    parser.add_argument("--growth-events", type=int, default=100_000)
    parser.add_argument("--growth-count", type=int, default=1_000, help="subscriptions")
    parser.add_argument("--growth-stream", choices=["quotes", "walk"], default="quotes")
    parser.add_argument("--alone", action="store_true", help="the templates alone only")
    parser.add_argument("--compile", action="store_true", help="the compile rates only")
    parser.add_argument("--compile-count", type=int, default=2_000, help="queries of each kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2, help="runs per figure; the fastest")
    parser.add_argument(
        "--nomerge-max", type=int, default=1_000, help="the largest count nomerge runs at"
    )
    parser.add_argument("--json", type=Path, help="write the records here")
    parser.add_argument("--smoke", action="store_true", help="a small run for CI")
    args = parser.parse_args(argv)
    tune_collector()
    if args.smoke:
        args.events, args.counts, args.repeat, args.compile_count = 600, [10, 20], 1, 50
        args.growth_events, args.growth_count = 3_000, 100
        args.streams = list(dict.fromkeys([*args.streams, "reach"]))
    records: list[dict[str, Any]] = []
    costs = calibrate()  # as a served shard does at start
    options = {
        mode: ENGINE_MODES[mode] or EngineOptions() for mode in MODES if mode in ENGINE_MODES
    }
    options["planned"] = replace(options["planned"], plan_costs=costs)
    options["budgeted"] = replace(
        options["planned"],
        max_steps=limits.MAX_STEPS_PER_EPOCH,
        max_engine_steps=limits.MAX_ENGINE_STEPS_PER_EPOCH,
        max_instances_per_subscription=limits.MAX_INSTANCES_PER_SUBSCRIPTION,
        max_instances=limits.MAX_INSTANCES,
    )
    summary: dict[str, Any] = {"plan_costs": asdict(costs)}
    streams = {
        "quotes": lambda n: quote_events(args.data, n),
        "walk": lambda n: walk_events(n, names=500, seed=args.seed),
    }
    if args.growth or args.smoke:
        first = min(10_000, args.growth_events // 10)
        record = growth(
            args.growth_stream,
            args.growth_count,
            streams[args.growth_stream](args.growth_events),
            args.seed,
            first,
            options,
        )
        print(json.dumps(record), file=sys.stderr, flush=True)
        records.append(record)
    if args.alone or args.smoke:
        records += alone(
            [10, 100, 300][: 1 if args.smoke else 3],
            quote_events(args.data, args.events),
            args.seed,
        )
    if args.compile or args.smoke:
        record = compiling(args.compile_count, walk_events(2_000, 500, args.seed), args.seed)
        print(json.dumps(record), file=sys.stderr, flush=True)
        records.append(record)
    if not (args.growth or args.alone or args.compile):
        for stream in args.streams:
            events_for = stream_events(stream, args)
            for kind in args.populations:
                found, ratios = compare(
                    stream,
                    kind,
                    args.counts,
                    events_for,
                    args.seed,
                    args.repeat,
                    args.nomerge_max,
                    options,
                )
                records += found
                summary.update(ratios)
    result = stamped(records)
    result["summary"] = summary
    print(json.dumps(summary, indent=1))
    if args.json is not None:
        write_json(args.json, result)
    agree = all(v for k, v in summary.items() if k.endswith("_alerts_agree"))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
