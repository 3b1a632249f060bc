"""Soak: a server under hostile but ordinary clients for a long time; memory flat, others served.

One ``cesar serve`` (loopback, 2 shards, default limits, a tokens file with
one client each) runs for ``--minutes`` while

* ``runaway`` holds queries that would grow without bound: a NEXT whose
  filter no event satisfies (every quote stays a partial match) and
  ``Stock FOLD{,,} Stock`` (runs that never end, alerts at every quote);
* ``churn`` subscribes and unsubscribes a query every second;
* ``stalled`` listens to a chatty subscription of its own and never reads;
* ``steady`` holds ordinary queries and reads every alert;
* ``publisher`` replays the bundled day of quotes again and again, each
  replay shifted later in time, at ``--rate`` events/s.

Every ``--sample`` seconds the front's and each shard's resident memory are
read through Stats.  Pass: memory flat — the median of the last quarter of
the run within ``--tolerance`` (20 %) of the median of its second quarter,
for the front and every shard, judged on runs of 10 minutes or more — and
``steady``'s alerts exactly what ``cesar run`` makes of the same quotes.
Loopback only; bounded in time.

    python -m cesar.perf.soak --minutes 30 --json soak.json
    python -m cesar.perf.soak --smoke          # 20 seconds (CI), memory not judged
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from cesar.automata.schema import Event
from cesar.perf.report import machine, now, write_json
from cesar.perf.serverproc import (
    Server,
    alert_line,
    expected_lines,
    normalized,
    sample_events,
)
from cesar.server.wire.client import Connection, alerts
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb

STEADY = [
    ("Dear", "FILTER{Price > 1000} Stock PUBLISH Dear"),
    (
        "QuickDrop",
        "Stock NEXT{$1.Name = $2.Name AND $2.Price < $1.Price AND DUR <= 3} Stock "
        "PUBLISH QuickDrop",
    ),
]
RUNAWAY = [
    "Stock NEXT{$2.Price > 1000 * $1.Price} Stock PUBLISH Never",
    "Stock FOLD{,,} Stock PUBLISH Chatty",
]
CHATTY = "FILTER{Price > 0} Stock PUBLISH Everything"
CHURN = "FILTER{Price > 500} Stock"
CLIENTS = ("steady", "runaway", "churn", "stalled", "publisher")
MIN_JUDGED_SECONDS = 600
"""Memory is judged flat or not only on runs this long: shorter ones are still warming up."""


def replays(rounds: int) -> list[Event]:
    """The bundled day of quotes ``rounds`` times, each replay after the previous one."""
    day = sample_events()
    span = day[-1].t1 - day[0].t0 + 10
    out: list[Event] = []
    for k in range(rounds):
        out.extend(
            Event.of(e.stream, e.t0 + k * span, e.t1 + k * span, dict(e.values)) for e in day
        )
    return out


class Soak:
    """One soak run; :meth:`run` returns the report."""

    def __init__(self, minutes: float, rate: float, sample: float, tolerance: float) -> None:
        self.seconds = minutes * 60
        self.rate = rate
        self.sample = sample
        self.tolerance = tolerance
        self.stop = threading.Event()
        self.samples: list[dict[str, Any]] = []
        self.steady_lines: Counter[str] = Counter()
        self.steady_seen = 0
        self.errors: Counter[str] = Counter()
        self.published: list[Event] = []
        self.churned = 0

    def run(self, work: Path) -> dict[str, Any]:
        tokens = work / "tokens"
        lines = [f"tok-{c} {c}\n" for c in CLIENTS] + ["tok-operator operator scope=admin\n"]
        tokens.write_text("".join(lines))
        server = Server(work / "data", "--tokens", str(tokens)).start()
        try:
            conns = {c: server.connect(f"tok-{c}") for c in CLIENTS}
            operator = server.connect("tok-operator")  # server-wide Stats are an admin's
            steady_ids = [self._subscribe(conns["steady"], text) for _, text in STEADY]
            for text in RUNAWAY:
                self._subscribe(conns["runaway"], text)
            chatty = self._subscribe(conns["stalled"], CHATTY)
            stalled = conns["stalled"].stub.Listen(
                pb.ListenRequest(after_seq={chatty: 0}), metadata=conns["stalled"].metadata
            )
            steady = conns["steady"].stub.Listen(
                pb.ListenRequest(after_seq=dict.fromkeys(steady_ids, 0)),
                metadata=conns["steady"].metadata,
            )
            reader = threading.Thread(target=self._read, args=(steady,))
            threads = [
                reader,
                threading.Thread(target=self._churn, args=(conns["churn"],)),
                threading.Thread(target=self._sample, args=(operator,)),
            ]
            for thread in threads:
                thread.start()
            started = time.monotonic()
            self._publish(conns["publisher"], started)
            self.stop.set()
            for thread in threads[1:]:
                thread.join()
            self._drain(conns["steady"], steady)
            reader.join()
            stalled.cancel()
            return self._report(time.monotonic() - started)
        finally:
            server.stop()

    def _subscribe(self, conn: Connection, text: str) -> str:
        reply = conn.stub.Subscribe(pb.SubscribeRequest(query=text), metadata=conn.metadata)
        return str(reply.id)

    def _publish(self, conn: Connection, started: float) -> None:
        events = replays(1 + int(self.seconds * self.rate) // 2340)
        batch = max(1, int(self.rate // 10))
        for start in range(0, len(events), batch):
            due = started + start / self.rate
            if time.monotonic() - started > self.seconds:
                break
            time.sleep(max(0.0, due - time.monotonic()))
            piece = events[start : start + batch]
            request = pb.PublishRequest(events=[to_event(e) for e in piece])
            reply = conn.stub.PublishBatch(request, metadata=conn.metadata)
            self.errors["rejected"] += len(reply.rejected)
            self.published.extend(piece)
        last = self.published[-1].t1
        conn.stub.PublishBatch(pb.PublishRequest(watermark=last), metadata=conn.metadata)

    def _read(self, stream: Any) -> None:
        try:
            for alert in alerts(stream):
                self.steady_seen += 1
                if alert.HasField("event"):
                    self.steady_lines[alert_line(alert)] += 1
                else:
                    self.errors["steady notices"] += 1
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.errors[f"listen {exc.code().name}"] += 1

    def _drain(self, conn: Connection, stream: Any) -> None:
        """Wait (up to 5 minutes) until ``steady`` holds every alert it was sent, then stop."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            rows = conn.stub.ListSubscriptions(
                pb.ListSubscriptionsRequest(), metadata=conn.metadata
            ).subscriptions
            if self.steady_seen >= sum(row.last_seq for row in rows):
                break
            time.sleep(0.5)
        else:
            self.errors["drain timeout"] += 1
        stream.cancel()

    def _churn(self, conn: Connection) -> None:
        while not self.stop.wait(1.0):
            sub = self._subscribe(conn, CHURN)
            conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=sub), metadata=conn.metadata)
            self.churned += 1

    def _sample(self, conn: Connection) -> None:
        started = time.monotonic()
        while True:
            stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
            self.samples.append(
                {
                    "seconds": round(time.monotonic() - started, 1),
                    "front_rss": int(stats.front["rss_bytes"]),
                    "shard_rss": [int(s.counters["rss_bytes"]) for s in stats.shards],
                    "instances": sum(int(s.counters["instances"]) for s in stats.shards),
                    "alerts_dropped": sum(int(s.counters["alerts_dropped"]) for s in stats.shards),
                }
            )
            if self.stop.wait(self.sample):
                return

    def _report(self, seconds: float) -> dict[str, Any]:
        quarter = max(1, len(self.samples) // 4)
        series = {"front": [s["front_rss"] for s in self.samples]}
        for i in range(len(self.samples[0]["shard_rss"])):
            series[f"shard {i}"] = [s["shard_rss"][i] for s in self.samples]
        memory = {
            name: round(
                statistics.median(rss[-quarter:]) / statistics.median(rss[quarter : 2 * quarter]), 3
            )
            for name, rss in series.items()
        }
        lines = normalized(expected_lines(STEADY, self.published))
        lost = sum((lines - self.steady_lines).values())
        extra = sum((self.steady_lines - lines).values())
        flat = all(abs(ratio - 1) <= self.tolerance for ratio in memory.values())
        judged = self.seconds >= MIN_JUDGED_SECONDS
        return {
            "machine": machine(),
            "date": now(),
            "seconds": round(seconds, 1),
            "events": len(self.published),
            "events_per_s": round(len(self.published) / seconds, 1),
            "steady_alerts": sum(self.steady_lines.values()),
            "steady_lost": lost,
            "steady_extra": extra,
            "churned": self.churned,
            "memory_late_over_early": memory,
            "memory_flat": flat if judged else None,
            "errors": dict(self.errors),
            "samples": self.samples,
            "passed": (flat or not judged)
            and lost == extra == 0
            and not self.errors.get("rejected"),
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between Stats")
    parser.add_argument("--tolerance", type=float, default=0.2, help="memory drift allowed")
    parser.add_argument("--smoke", action="store_true", help="20 seconds, sampled every 2 s")
    parser.add_argument("--json", metavar="OUT", help="also write the report as JSON")
    args = parser.parse_args(argv)
    minutes, sample = (20 / 60, 2.0) if args.smoke else (args.minutes, args.sample)
    soak = Soak(minutes, args.rate, sample, args.tolerance)
    with tempfile.TemporaryDirectory(prefix="cesar-soak-") as work:
        report = soak.run(Path(work))
    summary = {k: v for k, v in report.items() if k != "samples"}
    print(json.dumps(summary, indent=2))
    if args.json:
        write_json(Path(args.json), report)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
