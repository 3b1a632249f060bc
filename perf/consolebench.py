"""What the web console costs event processing when nobody looks: two servers, one with
``--console-port`` and one without, fed the same quotes in turn.

Each server (front + 2 shards) gets the three example queries, then ``--rounds`` copies of
the bundled day of quotes, each copy later than the one before, published through the
Python client in turn (the machine is noisy: compare within one run).  Reported: each
server's events/s over its rounds (the median round, and all of them), their ratio, and
the alerts each made (equal: both did the same work).  The console's server answers one
page request first, so its code is loaded and its thread is running, then nobody looks.

    python -m cesar.perf.consolebench --rounds 10
    python -m cesar.perf.consolebench --smoke
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from cesar.client import Client
from cesar.perf.report import machine, now, write_json
from cesar.perf.serverproc import QUERIES, Server, sample_events

SPAN = 400
"""Minutes between two copies of the sample (which spans 390)."""


def run(rounds: int) -> dict[str, Any]:
    """Both servers, their queries, then ``rounds`` copies of the quotes, in turn."""
    events = sample_events()
    seconds: dict[str, list[float]] = {"off": [], "on": []}
    alerts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="cesar-consolebench-") as scratch:
        servers = {
            "off": Server(Path(scratch) / "off"),
            "on": Server(Path(scratch) / "on", "--console-port", "0"),
        }
        try:
            for mode, server in servers.items():
                server.start()
                if mode == "on":
                    assert server.process is not None and server.process.stdout is not None
                    console = server.process.stdout.readline().split()[1]
                    with urllib.request.urlopen(console, timeout=30) as page:
                        page.read()
                with Client(server.address) as client:
                    client.subscribe_many([q.read_text() for q in QUERIES])
            clients = {mode: Client(server.address) for mode, server in servers.items()}
            for number in range(rounds):
                shift = number * SPAN
                shifted = [{"t0": e.t0 + shift, "t1": e.t1 + shift, **e.attrs()} for e in events]
                for mode, client in clients.items():
                    started = time.perf_counter()
                    published = client.publish("Stock", shifted)
                    seconds[mode].append(time.perf_counter() - started)
                    assert published.accepted == len(events), published.rejected[:3]
            for mode, client in clients.items():
                alerts[mode] = sum(s.last_seq for s in client.subscriptions())
                client.close()
        finally:
            for server in servers.values():
                server.stop()
    report: dict[str, Any] = {
        "benchmark": "consolebench",
        "machine": machine(),
        "date": now(),
        "rounds": rounds,
        "events_per_round": len(events),
    }
    for mode in ("off", "on"):
        rates = [len(events) / s for s in seconds[mode]]
        report[mode] = {
            "events_per_s": round(statistics.median(rates)),
            "rounds_events_per_s": [round(r) for r in rates],
            "alerts": alerts[mode],
        }
    report["alerts_agree"] = alerts["off"] == alerts["on"]
    report["on_over_off"] = round(report["on"]["events_per_s"] / report["off"]["events_per_s"], 2)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="copies of the day of quotes")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--smoke", action="store_true", help="2 rounds")
    args = parser.parse_args(argv)
    result = run(2 if args.smoke else args.rounds)
    if args.json:
        write_json(args.json, result)
    for mode in ("off", "on"):
        print(
            f"console {mode:>3}: {result[mode]['events_per_s']:>6} events/s (median round), "
            f"{result[mode]['alerts']} alerts",
            file=sys.stderr,
        )
    print(f"on / off: {result['on_over_off']}x; alerts agree: {result['alerts_agree']}")
    return 0 if result["alerts_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
