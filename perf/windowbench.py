"""A time-window aggregate shared by many subscriptions against one window each.

``n`` subscriptions ``FILTER{Price > f_i * AVG_OVER(Price, 30 MIN, Name)} Stock``, each its
own factor ``f_i``, all reading one window.  ``shared``: the engine keeps one running
average per stock for all of them.  ``private``: an engine that keeps one window per
subscription (``EngineOptions(share_windows=False)``), as an engine that does not share
windows would; the alerts must be the same.  Both engines get the same quotes (the
one-minute file, or the bundled sample), in turn ``--chunk`` epochs at a time in one run
(the machine is noisy: compare within the run).  Reported beside the wall time: the
window updates (events added to a window, deterministic), the windows kept and the
alerts.

    python -m cesar.perf.windowbench --subscriptions 1000 --quotes 50000 \\
        --file ../shared/data/stocks/intraday_1min_6_us_stocks_2020-10-26_2021-01-08.csv
    python -m cesar.perf.windowbench --smoke
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
from cesar.server.engine.engine import Engine, EngineOptions


def text(number: int) -> str:
    """Subscription ``number``'s query: its own factor."""
    factor = round(1.0005 + number * 1e-5, 6)
    return f"FILTER{{Price > {factor} * AVG_OVER(Price, 30 MIN, Name)}} Stock PUBLISH A{number}"


def run(subscriptions: int, quotes: int, chunk: int, path: Path | None) -> dict[str, Any]:
    """Subscribe both engines, then process the quotes' epochs chunk by chunk in turn."""
    schemas = {"Stock": parse_stream_spec(STOCK_SPEC)}
    engines = {"shared": Engine(), "private": Engine(EngineOptions(share_windows=False))}
    for number in range(subscriptions):
        automata = compile_query(text(number), schemas).automata
        for engine in engines.values():
            engine.subscribe(f"s{number}", automata)
    parts = epochs(quote_events(path, quotes))
    seconds, alerts = in_turns(engines, parts, chunk, lambda e: (e.stream, e.t1))
    events = sum(len(epoch) for epoch in parts)
    report: dict[str, Any] = {
        "benchmark": "windowbench",
        "machine": machine(),
        "date": now(),
        "subscriptions": subscriptions,
        "events": events,
        "source": str(path) if path else "bundled sample",
    }
    for mode, engine in engines.items():
        states = engine.windows.states.values()
        report[mode] = {
            "events_per_s": round(events / seconds[mode]),
            "windows": len(engine.windows.states),
            "window_updates_per_event": round(sum(s.added for s in states) / events, 1),
            "alerts": alerts[mode].total(),
        }
        print(
            f"{mode:>7}: {report[mode]['events_per_s']:>7} events/s, "
            f"{report[mode]['windows']} windows, "
            f"{report[mode]['window_updates_per_event']} window updates per event, "
            f"{alerts[mode].total()} alerts",
            file=sys.stderr,
        )
    report["alerts_agree"] = alerts["shared"] == alerts["private"]
    report["shared_over_private"] = round(
        report["shared"]["events_per_s"] / report["private"]["events_per_s"], 2
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=1_000)
    parser.add_argument("--quotes", type=int, default=50_000)
    parser.add_argument("--chunk", type=int, default=50, help="epochs per turn")
    parser.add_argument("--file", type=Path, help="one-minute bars (default: the sample)")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--smoke", action="store_true", help="100 subscriptions, 600 quotes")
    args = parser.parse_args(argv)
    if args.smoke:
        args.subscriptions, args.quotes, args.file = 100, 600, None
    result = run(args.subscriptions, args.quotes, args.chunk, args.file)
    if args.json:
        write_json(args.json, result)
    ratio, agree = result["shared_over_private"], result["alerts_agree"]
    print(f"shared / private: {ratio}x; alerts agree: {agree}")
    return 0 if result["alerts_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
