"""Composite patterns at K = 10, 100, 1,000 subscriptions that differ in one constant.

Each *form* is a pattern over four streams ``A``..``D`` (``k:int, Price:float``), keyed on
``k`` (``[k]``), within ``--window`` ticks, subscribed ``K`` times with its own constant
``a.Price > c_i`` (``c_i`` spread evenly over the prices, so each pattern keeps about half
the ``a`` events and the matches grow with K).  Per form and K, one engine (the server's
configuration) runs one generated stream (one event per tick, random stream, key and
price), and the benchmark reports:

* the cost per unit of work: process CPU over (events + alerts), in µs;
* the DAG's nodes by level (the longest path to them from the start node);
* instances touched and internal matches (an internal stream's events, such as the union
  a join reads) per event;
* the alerts, checked against a brute-force count written here from the definitions
  (docs/patterns.md), which knows nothing of the engine's automata.

The OR form is also run split (its two alternatives as flat patterns, 2K subscriptions): the
OR costs its hop over the split form.  The targets (issue 49): the cost per unit at K = 1,000
at most 1.5× that at K = 10, internal matches per event independent of K, the OR at least
0.95× the split form's speed.

    python -m cesar.perf.compositebench --events 3000 --json results/composite.json
    python -m cesar.perf.compositebench --smoke
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, epochs, parse_stream_spec
from cesar.perf.report import machine, now, print_report
from cesar.server.engine.engine import Engine
from cesar.server.engine.matches import expand

FORMS = {
    "seq": "SEQ(A a, B b, C c)",
    "or": "SEQ(A a, OR(SEQ(B b, C c), D d))",
    "and_seq": "AND(SEQ(A a, B b), SEQ(C c, D d))",
    "and_seq_not": "AND(SEQ(A a, !(C c), B b), D d)",
    "and_not": "AND(A a, B b, !(C c))",
}
"""The forms measured: a flat SEQ (the baseline), OR over SEQ, an AND of SEQs, a negation in
a SEQ inside an AND, and a negation inside an AND."""
SPLIT = ("SEQ(A a, B b, C c)", "SEQ(A a, D d)")
"""The OR form's alternatives, subscribed apart."""
STREAMS = "ABCD"


def stream(events: int, keys: int, seed: int) -> list[Event]:
    """``events`` point events, one per tick, each of a random stream, key and price."""
    rng = random.Random(seed)
    return [
        Event.of(
            rng.choice(STREAMS), t, t, {"k": rng.randrange(keys), "Price": rng.randrange(1000) / 10}
        )
        for t in range(1, events + 1)
    ]


def constant(number: int, k: int) -> float:
    """Pattern ``number``'s constant of ``k``: spread evenly over the prices."""
    return round(100 * number / k, 3)


def text(structure: str, c: float, window: int, name: str) -> str:
    """The pattern ``structure`` with its constant ``c``."""
    return (
        f"PATTERN {structure} WHERE [k] AND a.Price > {c} WITHIN {window} "
        f"RETURN a.Price AS start PUBLISH {name}"
    )


def brute(form: str, events: Sequence[Event], window: int) -> dict[int, int]:
    """Per ``a`` event (by its tick), the matches it starts under ``form``, enumerated from the
    definitions: one event per tick, so a SEQ's parts are in later ticks and a negated event
    lies strictly between by tick; every event of a match, the negated included, has the
    ``a`` event's ``k``; the last tick at most ``window`` after the first."""
    by: dict[tuple[object, str], list[int]] = defaultdict(list)
    for e in events:
        by[e.attrs()["k"], e.stream].append(e.t1)
    out: dict[int, int] = {}
    for e in events:
        if e.stream != "A":
            continue
        k, t = e.attrs()["k"], e.t1
        near = {s: [u for u in by[k, s] if abs(u - t) <= window] for s in STREAMS}
        out[t] = _count(form, t, near, window)
    return out


def _count(form: str, a: int, near: dict[str, list[int]], window: int) -> int:
    """Matches of ``form`` whose ``a`` is at tick ``a``, over the ticks of each stream near it."""
    bs, cs, ds = near["B"], near["C"], near["D"]

    def within(*ticks: int) -> bool:
        return max(ticks) - min(ticks) <= window

    def clear(low: int, high: int) -> bool:
        return not any(low < c < high for c in cs)

    if form in ("seq", "or"):
        count = sum(1 for b in bs if b > a for c in cs if c > b and within(a, c))
        if form == "or":
            count += sum(1 for d in ds if d > a and within(a, d))
        return count
    if form == "and_seq":
        return sum(1 for b in bs if b > a for c in cs for d in ds if d > c and within(a, b, c, d))
    if form == "and_seq_not":
        return sum(1 for b in bs if b > a and clear(a, b) for d in ds if within(a, b, d))
    assert form == "and_not"
    return sum(1 for b in bs if within(a, b) and clear(min(a, b), max(a, b)))


def expected(per_a: dict[int, int], events: Sequence[Event], constants: Sequence[float]) -> int:
    """The alerts of the patterns with ``constants``: each ``a`` event's matches, for every
    pattern whose constant its price passes."""
    price = {e.t1: _price(e) for e in events if e.stream == "A"}
    return sum(n * sum(1 for c in constants if price[t] > c) for t, n in per_a.items())


def _price(event: Event) -> float:
    value = event.attrs()["Price"]
    assert isinstance(value, float)
    return value


def measure(
    texts: Sequence[str], events: Sequence[Event], schemas: dict[str, Any]
) -> dict[str, Any]:
    """Subscribe ``texts`` to a fresh engine, run ``events``: the figures of one run."""
    engine = Engine()
    for number, query in enumerate(texts):
        engine.subscribe(f"s{number}", compile_query(query, schemas).automata)
    parts = epochs(events)
    clock = time.process_time()
    alerts = 0
    for epoch in parts:
        alerts += sum(1 for _ in expand(engine.process_matches(epoch)))
    seconds = time.process_time() - clock
    counters = engine.counters
    n = len(events)
    return {
        "subscriptions": len(texts),
        "seconds": round(seconds, 3),
        "alerts": alerts,
        "us_per_unit": round(1e6 * seconds / (n + alerts), 2),
        "dag_nodes_by_level": engine.program.dag.levels(),
        "instances_touched_per_event": round(counters.instances_touched / n, 2),
        "internal_matches_per_event": round((counters.matches - alerts) / n, 3),
    }


def run(ks: Sequence[int], events: int, keys: int, window: int, seed: int) -> dict[str, Any]:
    """Every form at every K; the report."""
    spec = "(k:int,Price:float)"
    schemas = {s: parse_stream_spec(s + spec) for s in STREAMS}
    data = stream(events, keys, seed)
    report: dict[str, Any] = {
        "benchmark": "compositebench",
        "machine": machine(),
        "date": now(),
        "events": events,
        "keys": keys,
        "window": window,
        "forms": {},
    }
    agree = True
    for form, structure in FORMS.items():
        per_a = brute(form, data, window)
        rows: dict[str, Any] = {}
        for k in ks:
            constants = [constant(i, k) for i in range(k)]
            texts = [text(structure, c, window, f"P{i}") for i, c in enumerate(constants)]
            row = measure(texts, data, schemas)
            row["brute_force"] = expected(per_a, data, constants)
            agree &= row["alerts"] == row["brute_force"]
            if form == "or":
                split = [
                    text(alt, c, window, f"P{i}_{n}")
                    for i, c in enumerate(constants)
                    for n, alt in enumerate(SPLIT)
                ]
                row["split"] = measure(split, data, schemas)
                agree &= row["split"]["alerts"] == row["brute_force"]
                row["or_over_split"] = round(row["split"]["us_per_unit"] / row["us_per_unit"], 2)
            rows[str(k)] = row
            _say(form, k, row)
        first, last = rows[str(ks[0])], rows[str(ks[-1])]
        rows["cost_ratio"] = round(last["us_per_unit"] / first["us_per_unit"], 2)
        report["forms"][form] = rows
        ratio = rows["cost_ratio"]
        print(f"{form}: cost per unit at K={ks[-1]} / K={ks[0]}: {ratio}x", file=sys.stderr)
    report["alerts_agree"] = agree
    return report


def _say(form: str, k: int, row: dict[str, Any]) -> None:
    split = ""
    if "split" in row:
        split = f", split {row['split']['us_per_unit']} µs (or/split {row['or_over_split']}x)"
    print(
        f"{form:>12} K={k:<5} {row['us_per_unit']:>7} µs/unit, {row['alerts']} alerts "
        f"(brute force {row['brute_force']}), nodes {row['dag_nodes_by_level']}, "
        f"touched/event {row['instances_touched_per_event']}, internal/event "
        f"{row['internal_matches_per_event']}{split}",
        file=sys.stderr,
    )


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--keys", type=int, default=5)
    parser.add_argument("--window", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--smoke", action="store_true", help="K = 2 and 8, 300 events")
    args = parser.parse_args(argv)
    if args.smoke:
        args.ks, args.events = [2, 8], 300
    result = run(args.ks, args.events, args.keys, args.window, args.seed)
    print_report(result, args.json)
    out(f"alerts agree with the brute-force count: {result['alerts_agree']}")
    return 0 if result["alerts_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
