"""What the web console costs event processing: three servers, one without
``--console-port``, one with it and nobody looking, one with a page open on every view,
fed the same quotes in turn.

Each server (front + 2 shards) gets the three example queries, then ``--rounds`` copies of
the bundled day of quotes, each copy later than the one before, published through the
Python client in turn (the machine is noisy: compare within one run).  Reported: each
server's events/s over its rounds (the median round, and all of them), their ratios to the
one without a console, and the alerts each made (equal: all did the same work).  The idle
console answers one page request first, so its code is loaded and its thread is running,
then nobody looks.  The watched one is asked what the open pages ask (:class:`Watcher`):
every 2 s the Shards page's counters, the Subscriptions page's lists and each
subscription's "Now", and the Live alerts stream held open and read throughout.

    python -m cesar.perf.consolebench --rounds 10
    python -m cesar.perf.consolebench --smoke
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from cesar.client import Client
from cesar.perf.report import machine, now, write_json
from cesar.perf.serverproc import QUERIES, Server, sample_events

SPAN = 400
"""Minutes between two copies of the sample (which spans 390)."""
MODES = ("off", "on", "watched")
"""No console; a console nobody looks at; a console with a page open on every view."""


class Watcher:
    """What the console's open pages ask of ``console``: every ``every`` seconds the counters,
    the subscriptions, the streams and each subscription's runtime, and the live alerts
    stream read as it comes; counts the requests and alerts it got."""

    def __init__(self, console: str, every: float = 2.0) -> None:
        self.console = console.rstrip("/")
        self.every = every
        self.stop = threading.Event()
        self.requests = 0
        self.alerts = 0
        self.threads = [
            threading.Thread(target=self._poll, daemon=True),
            threading.Thread(target=self._listen, daemon=True),
        ]

    def __enter__(self) -> Watcher:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.threads[0].join(30)

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.console + path, timeout=30) as answer:
            self.requests += 1
            return json.loads(answer.read())

    def _poll(self) -> None:
        while True:
            self._get("/api/shards")
            self._get("/api/streams")
            for row in self._get("/api/subscriptions"):
                self._get(f"/api/subscriptions/{row['id']}/runtime")
            if self.stop.wait(self.every):
                return

    def _listen(self) -> None:
        with urllib.request.urlopen(self.console + "/api/alerts", timeout=600) as stream:
            for line in stream:
                if self.stop.is_set():
                    return
                self.alerts += line.startswith(b"data: ")


def run(rounds: int) -> dict[str, Any]:
    """Both servers, their queries, then ``rounds`` copies of the quotes, in turn."""
    events = sample_events()
    seconds: dict[str, list[float]] = {mode: [] for mode in MODES}
    alerts: dict[str, int] = {}
    watched: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="cesar-consolebench-") as scratch:
        servers = {
            "off": Server(Path(scratch) / "off"),
            "on": Server(Path(scratch) / "on", "--console-port", "0"),
            "watched": Server(Path(scratch) / "watched", "--console-port", "0"),
        }
        consoles: dict[str, str] = {}
        try:
            for mode, server in servers.items():
                server.start()
                if mode != "off":
                    assert server.process is not None and server.process.stdout is not None
                    consoles[mode] = server.process.stdout.readline().split()[1]
                    with urllib.request.urlopen(consoles[mode], timeout=30) as page:
                        page.read()
                with Client(server.address) as client:
                    client.subscribe_many([q.read_text() for q in QUERIES])
            clients = {mode: Client(server.address) for mode, server in servers.items()}
            watcher = Watcher(consoles["watched"]).__enter__()
            for number in range(rounds):
                shift = number * SPAN
                shifted = [{"t0": e.t0 + shift, "t1": e.t1 + shift, **e.attrs()} for e in events]
                for mode, client in clients.items():
                    started = time.perf_counter()
                    published = client.publish("Stock", shifted)
                    seconds[mode].append(time.perf_counter() - started)
                    assert published.accepted == len(events), published.rejected[:3]
            watcher.__exit__()
            watched = {"requests": watcher.requests, "alerts_streamed": watcher.alerts}
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
    for mode in MODES:
        rates = [len(events) / s for s in seconds[mode]]
        report[mode] = {
            "events_per_s": round(statistics.median(rates)),
            "rounds_events_per_s": [round(r) for r in rates],
            "alerts": alerts[mode],
        }
    report["watched"].update(watched)
    report["alerts_agree"] = len({alerts[mode] for mode in MODES}) == 1
    for mode in ("on", "watched"):
        ratio = report[mode]["events_per_s"] / report["off"]["events_per_s"]
        report[f"{mode}_over_off"] = round(ratio, 2)
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
    for mode in MODES:
        print(
            f"console {mode:>7}: {result[mode]['events_per_s']:>6} events/s (median round), "
            f"{result[mode]['alerts']} alerts",
            file=sys.stderr,
        )
    print(
        f"on / off: {result['on_over_off']}x; watched / off: {result['watched_over_off']}x "
        f"({result['watched']['requests']} requests); alerts agree: {result['alerts_agree']}"
    )
    return 0 if result["alerts_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
