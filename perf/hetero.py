"""The heterogeneous workload: 1,000 CEL queries of 24 shapes, compiled build against pure.

A pub/sub server's subscriptions come from many shapes at once, a few large
families and a long tail.  :func:`hetero_queries` draws ``--queries`` queries
from the 24 shapes of :data:`SHAPES` (filters, then NEXT and FOLD chains,
cross-stock NEXT, DUR bounds, SELECT projection and top-level UNION), the
number per shape Zipf-distributed (shape ``r`` of the drawn order gets a share
``1/r``), the constants (a ticker ``T``/``U``, a price ``c`` near the ticker's
first price, a factor ``k``, a window ``w``, a count ``n``) drawn per query from
``--seed``.  The events are 100 random-walk stocks.

``run`` measures the build this process runs (``cesar --version`` says which):
every shape's queries alone in an engine, then all of them in one, each as the
process's CPU time over the epochs and an output digest; each the least of
``--repeat`` runs (3) in fresh engines, the collector emptied before each.  ``--vs-pure`` runs
``run`` in processes with and without ``CESAR_PURE=1``, in turn ``--turns`` times (1; each
figure then the least of every turn of its build, so that a host whose speed drifts over the
minutes a process takes weighs on both builds alike), and reports compiled against pure per
shape and on the whole, outputs equal::

    python -m cesar.perf.hetero --events 10000 100000 --vs-pure --turns 2 --json out.json
    python -m cesar.perf.hetero --smoke          # 48 queries, 1,000 events (CI)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cesar import build
from cesar.automata.schema import Event, epochs, parse_stream_spec
from cesar.perf.quotes import first_prices, walk_events
from cesar.perf.report import engine_figures, machine, now, subscribed
from cesar.server.engine.matches import Match, expand
from cesar.server.host.collector import tune_collector

STOCK = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")
Draw = Callable[[random.Random, str, str, float], str]
"""A shape: (rng, ticker T, another ticker U, T's first price) → one query's text."""


def _c(rng: random.Random, price: float) -> float:
    return round(price * rng.uniform(0.97, 1.03), 2)


def _above(rng: random.Random, ticker: str, price: float) -> str:
    return f"FILTER{{Name = '{ticker}' AND Price > {_c(rng, price)}}} Stock"


_RISE = "NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock"
"""The next quote of the same stock, higher."""


def _k(rng: random.Random) -> float:
    return round(1 - rng.uniform(0.001, 0.01), 4)


SHAPES: dict[str, Draw] = {
    "ticker": lambda r, t, u, p: f"FILTER{{Name = '{t}'}} Stock",
    "above": lambda r, t, u, p: _above(r, t, p),
    "below": lambda r, t, u, p: f"FILTER{{Name = '{t}' AND Price < {_c(r, p)}}} Stock",
    "band": lambda r, t, u, p: (
        f"FILTER{{Name = '{t}' AND Price > {_c(r, p)} AND Price < {_c(r, p) + 3}}} Stock"
    ),
    "any_above": lambda r, t, u, p: f"FILTER{{Price > {round(r.uniform(103, 110), 2)}}} Stock",
    "turnover": lambda r, t, u, p: (
        f"FILTER{{Name = '{t}' AND Price * Volume > {round(_c(r, p) * 100)}}} Stock"
    ),
    "project": lambda r, t, u, p: (
        f"SELECT Name, Price AS Quote FROM FILTER{{Name = '{t}' AND Price > {_c(r, p)}}} Stock"
    ),
    "either": lambda r, t, u, p: (
        f"{_above(r, t, p)} UNION FILTER{{Name = '{u}' AND Price < {_c(r, p)}}} Stock"
    ),
    "rise": lambda r, t, u, p: f"{_above(r, t, p)} {_RISE}",
    "rise_within": lambda r, t, u, p: (
        f"{_above(r, t, p)} "
        f"NEXT{{$1.Name = $2.Name AND $2.Price > $1.Price AND DUR <= {r.randint(2, 10)}}} Stock"
    ),
    "drop": lambda r, t, u, p: (
        f"FILTER{{Name = '{t}'}} Stock "
        f"NEXT{{$1.Name = $2.Name AND $2.Price < {_k(r)} * $1.Price}} Stock"
    ),
    "any_drop": lambda r, t, u, p: (
        f"FILTER{{After < {_k(r)} * Before}} "
        "(SELECT Name, Price_1 AS Before, Price AS After FROM Stock NEXT{$1.Name = $2.Name} Stock)"
    ),
    "cross": lambda r, t, u, p: (
        f"{_above(r, t, p)} "
        f"NEXT{{$2.Name = '{u}' AND $2.Price > {round(r.uniform(95, 105), 2)}}} Stock"
    ),
    "cross_above": lambda r, t, u, p: (
        f"{_above(r, t, p)} NEXT{{$2.Name = '{u}' AND $2.Price > $1.Price}} Stock"
    ),
    "cross_within": lambda r, t, u, p: (
        f"FILTER{{DUR <= {r.randint(2, 10)}}} (FILTER{{Name = '{t}' AND Price < {_c(r, p)}}} "
        f"Stock NEXT{{$2.Name = '{u}'}} Stock)"
    ),
    "rise_project": lambda r, t, u, p: (
        f"SELECT Name, Price_1 AS Before, Price AS After FROM ({_above(r, t, p)} {_RISE})"
    ),
    "rise_then_drop": lambda r, t, u, p: (
        f"(SELECT Name, Price_1 AS First, Price AS Peak FROM ({_above(r, t, p)} {_RISE})) "
        f"NEXT{{$1.Name = $2.Name AND $2.Price < {_k(r)} * $1.Peak}} Stock"
    ),
    "run_all": lambda r, t, u, p: (
        f"({_above(r, t, p)}) "
        f"FOLD{{$2.Name = $.Name AND DUR <= {r.randint(2, 10)}, $2.Price > $1.Price, }} Stock"
    ),
    "run_count": lambda r, t, u, p: (
        f"FILTER{{Quotes >= {r.randint(2, 6)}}} ((SELECT *, 1 AS Quotes FROM "
        f"FILTER{{Name = '{t}'}} Stock) "
        "FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Quotes + 1 AS Quotes} Stock)"
    ),
    "any_run": lambda r, t, u, p: (
        f"FILTER{{Quotes >= {r.randint(3, 6)}}} ((SELECT *, 1 AS Quotes FROM Stock) "
        "FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Quotes + 1 AS Quotes} Stock)"
    ),
    "long_run": lambda r, t, u, p: (
        f"FILTER{{DUR >= {r.randint(3, 6)}}} ((FILTER{{Name = '{t}'}} Stock) "
        "FOLD{$2.Name = $.Name, $2.Price > $.Price, } Stock)"
    ),
    "run_gain": lambda r, t, u, p: (
        f"FILTER{{Price > {round(1 + r.uniform(0.005, 0.02), 3)} * Start}} "
        f"((SELECT Name, Price, Volume, Price AS Start FROM FILTER{{Name = '{t}'}} Stock) "
        "FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Start AS Start} Stock)"
    ),
    "volume_then": lambda r, t, u, p: (
        f"FILTER{{Name = '{t}' AND Volume >= 100}} Stock "
        f"NEXT{{$1.Name = $2.Name AND $2.Price > $1.Price + {round(r.uniform(0.1, 1), 2)}}} Stock"
    ),
    "either_rise": lambda r, t, u, p: (
        f"{_above(r, t, p)} {_RISE} "
        f"UNION FILTER{{Name = '{u}' AND Price > {_c(r, p)}}} Stock "
        "NEXT{$1.Name = $2.Name AND $2.Price < $1.Price} Stock"
    ),
}


def hetero_queries(count: int, events: Sequence[Event], seed: int = 1) -> list[tuple[str, str]]:
    """``count`` (shape, text) pairs: a Zipf number per shape (in an order drawn from
    ``seed``), every shape at least once, constants drawn around the quotes' own prices."""
    rng = random.Random(f"hetero:{seed}")
    first = first_prices(events)
    tickers = sorted(first)
    order = list(SHAPES)
    rng.shuffle(order)
    weights = [1 / rank for rank in range(1, len(order) + 1)]
    counts = [max(1, round(count * w / sum(weights))) for w in weights]
    counts[0] += count - sum(counts)
    out = []
    for shape, n in zip(order, counts, strict=True):
        for _ in range(n):
            t, u = rng.sample(tickers, 2)
            out.append((shape, SHAPES[shape](rng, t, u, first[t])))
    return out


def _measure(texts: Sequence[str], events: Sequence[Event], repeat: int) -> dict[str, Any]:
    """The queries over the events in a fresh engine, ``repeat`` times: the least CPU time
    (the machine's noise only ever adds), the outputs checked equal each time."""
    best: dict[str, Any] = {}
    for _ in range(repeat):
        engine = subscribed("engine", texts, STOCK)
        made: list[Event | Match] = []
        # Each measurement starts from an empty collector: a full collection owed to the
        # garbage of the measurements before (the previous shapes' outputs) would otherwise
        # fall on whichever shape runs then, as a few hundred ms of walking the whole heap.
        gc.collect()
        tick = time.process_time()
        for epoch in epochs(events):
            made.extend(engine.process_matches(epoch))
        made.extend(engine.finish())
        seconds = time.process_time() - tick
        figures = engine_figures("engine", engine, len(texts), events, expand(made), seconds)
        assert not best or figures["digest"] == best["digest"], "a repetition's outputs differ"
        if not best or figures["seconds"] < best["seconds"]:
            best = figures
    keys = ("queries", "seconds", "alerts", "digest", "dag_nodes", "instances_touched_per_event")
    return {k: best[k] for k in keys}


def run(queries: int, counts: Sequence[int], seed: int, repeat: int = 1) -> dict[str, Any]:
    """Every shape alone, then all together, at each of ``counts`` events, in this build;
    each the best of ``repeat`` runs."""
    tune_collector()  # as the server's shards run the engine
    out: dict[str, Any] = {"build": build.describe(), "runs": []}
    for count in counts:
        events = walk_events(count, seed=seed)
        drawn = hetero_queries(queries, events, seed)
        by_shape: dict[str, list[str]] = {}
        for shape, text in drawn:
            by_shape.setdefault(shape, []).append(text)
        shapes = {shape: _measure(texts, events, repeat) for shape, texts in by_shape.items()}
        whole = _measure([text for _, text in drawn], events, repeat)
        out["runs"].append({"events": count, "shapes": shapes, "all": whole})
    return out


def _in_build(pure: bool, args: argparse.Namespace) -> dict[str, Any]:
    env = {**os.environ, "CESAR_PURE": "1" if pure else "0"}
    argv = [sys.executable, "-m", "cesar.perf.hetero", "--queries", str(args.queries)]
    argv += ["--seed", str(args.seed), "--events", *map(str, args.events)]
    argv += ["--repeat", str(args.repeat)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _least(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """The turns of one build's ``run`` as one: each measurement the least of its turns (their
    outputs checked equal)."""
    first = turns[0]
    for turn in turns[1:]:
        for kept, other in zip(first["runs"], turn["runs"], strict=True):
            pairs = [(kept, other, "all")] + [
                (kept["shapes"], other["shapes"], s) for s in kept["shapes"]
            ]
            for mine, theirs, key in pairs:
                assert mine[key]["digest"] == theirs[key]["digest"], "a turn's outputs differ"
                if theirs[key]["seconds"] < mine[key]["seconds"]:
                    mine[key] = theirs[key]
    return first


def versus_pure(args: argparse.Namespace) -> dict[str, Any]:
    """``run`` in a compiled and a pure process, in turn ``args.turns`` times; the ratios of
    the least figures, outputs compared."""
    turns: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for _ in range(args.turns):
        for interpreted in (False, True):
            turns[interpreted].append(_in_build(interpreted, args))
    compiled, pure = _least(turns[False]), _least(turns[True])
    report: dict[str, Any] = {
        "date": now(),
        "machine": machine(),
        "queries": args.queries,
        "repeat": args.repeat,
        "turns": args.turns,
        "compiled": compiled["build"],
        "pure": pure["build"],
        "runs": [],
    }
    for fast, slow in zip(compiled["runs"], pure["runs"], strict=True):
        rows = {"all": (fast["all"], slow["all"])}
        rows |= {s: (fast["shapes"][s], slow["shapes"][s]) for s in sorted(fast["shapes"])}
        report["runs"].append(
            {
                "events": fast["events"],
                "rows": {
                    name: {
                        "queries": a["queries"],
                        "alerts": a["alerts"],
                        "compiled_s": a["seconds"],
                        "pure_s": b["seconds"],
                        "speedup": round(b["seconds"] / a["seconds"], 2) if a["seconds"] else None,
                        "outputs_equal": a["digest"] == b["digest"],
                    }
                    for name, (a, b) in rows.items()
                },
            }
        )
    return report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.hetero", description=__doc__)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--events", type=int, nargs="+", default=[10_000])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each measurement; the least CPU time counts"
    )
    parser.add_argument("--vs-pure", action="store_true", help="compiled against pure, in turn")
    parser.add_argument(
        "--turns", type=int, default=1, help="with --vs-pure: processes of each build, alternating"
    )
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument("--smoke", action="store_true", help="48 queries, 1,000 events (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.queries, args.events, args.repeat = 48, [1_000], 1
    report = (
        versus_pure(args)
        if args.vs_pure
        else run(args.queries, args.events, args.seed, args.repeat)
    )
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    if args.vs_pure:
        equal = all(r["outputs_equal"] for run in report["runs"] for r in run["rows"].values())
        return 0 if equal else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
