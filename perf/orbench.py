"""A pattern with OR as one subscription against its alternatives as subscriptions of their own.

``n`` subscriptions ``SEQ(Stock a, OR(SEQ(Stock b, Stock c), Stock d))`` — a rise of ``f_i``
then a further rise, or a fall by ``f_i`` — each its own factor.  ``or``: one subscription per
pattern; the engine compiles each alternative as an automaton publishing the pattern's
stream, no hop between (docs/patterns.md, "How a pattern runs"; before 2026-11-28 each
published an internal stream and one more automaton their union).
``split``: the two alternatives subscribed apart, ``2n`` subscriptions, as a user without OR
would write them.  The alerts must be the same multiset (per factor).  Both engines get the
same quotes in turn ``--chunk`` epochs at a time in one run (the machine is noisy: compare
within the run).  Reported beside the wall time: the matches each engine makes (internal
ones included: a hop would show there), instances touched and DAG nodes.

    python -m cesar.perf.orbench --subscriptions 40 --quotes 20000 \\
        --file ../shared/data/stocks/intraday_1min_6_us_stocks_2020-10-26_2021-01-08.csv
    python -m cesar.perf.orbench --smoke
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cesar.automata.compiler import compile_query
from cesar.automata.schema import epochs, parse_stream_spec
from cesar.perf.quotes import STOCK_SPEC, quote_events
from cesar.perf.report import in_turns, machine, now, write_json
from cesar.server.engine.engine import Engine


def texts(number: int) -> dict[str, list[str]]:
    """Pattern ``number`` as one OR, and as its two alternatives."""
    factor = round(1.001 + number * 1e-4, 6)
    rise = f"b.Price > {factor} * a.Price AND c.Price > b.Price"
    fall = f"d.Price < a.Price / {factor}"
    window = "WITHIN 3 MIN"
    return {
        "or": [
            f"PATTERN SEQ(Stock a, OR(SEQ(Stock b, Stock c), Stock d)) WHERE [Name] AND {rise} "
            f"AND {fall} {window} RETURN a.Price AS start PUBLISH O{number}"
        ],
        "split": [
            f"PATTERN SEQ(Stock a, Stock b, Stock c) WHERE [Name] AND {rise} {window} "
            f"RETURN a.Price AS start PUBLISH R{number}",
            f"PATTERN SEQ(Stock a, Stock d) WHERE [Name] AND {fall} {window} "
            f"RETURN a.Price AS start PUBLISH F{number}",
        ],
    }


def run(subscriptions: int, quotes: int, chunk: int, path: Path | None) -> dict[str, Any]:
    """Subscribe both engines, then process the quotes' epochs chunk by chunk in turn."""
    schemas = {"Stock": parse_stream_spec(STOCK_SPEC)}
    engines = {"or": Engine(), "split": Engine()}
    for number in range(subscriptions):
        for mode, queries in texts(number).items():
            for index, text in enumerate(queries):
                compiled = compile_query(text, schemas)
                engines[mode].subscribe(f"s{number}_{index}", compiled.automata, None)
    parts = epochs(quote_events(path, quotes))
    seconds, alerts = in_turns(
        engines, parts, chunk, lambda e: (e.stream[1:], e.t0, e.t1, e.values)
    )
    events = sum(len(epoch) for epoch in parts)
    report: dict[str, Any] = {
        "benchmark": "orbench",
        "machine": machine(),
        "date": now(),
        "subscriptions": subscriptions,
        "events": events,
        "source": str(path) if path else "bundled sample",
    }
    for mode, engine in engines.items():
        counters = engine.counters
        report[mode] = {
            "events_per_s": round(events / seconds[mode]),
            "alerts": alerts[mode].total(),
            "matches": counters.matches,
            "instances_touched": counters.instances_touched,
            "dag_nodes": len(engine.program.dag.nodes),
        }
        print(
            f"{mode:>5}: {report[mode]['events_per_s']:>7} events/s, {alerts[mode].total()} "
            f"alerts, {counters.matches} matches, {len(engine.program.dag.nodes)} DAG nodes",
            file=sys.stderr,
        )
    report["alerts_agree"] = alerts["or"] == alerts["split"]
    report["or_over_split"] = round(
        report["or"]["events_per_s"] / report["split"]["events_per_s"], 2
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=40)
    parser.add_argument("--quotes", type=int, default=20_000)
    parser.add_argument("--chunk", type=int, default=50, help="epochs per turn")
    parser.add_argument("--file", type=Path, help="one-minute bars (default: the sample)")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--smoke", action="store_true", help="10 subscriptions, 600 quotes")
    args = parser.parse_args(argv)
    if args.smoke:
        args.subscriptions, args.quotes, args.file = 10, 600, None
    result = run(args.subscriptions, args.quotes, args.chunk, args.file)
    if args.json:
        write_json(args.json, result)
    print(f"or / split: {result['or_over_split']}x; alerts agree: {result['alerts_agree']}")
    return 0 if result["alerts_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
