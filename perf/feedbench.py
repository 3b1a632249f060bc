"""The Spark feed: its own routing throughput, and the pipeline end to end, 1 shard vs 2.

On the one-minute stock data (``../shared/data/stocks``, 193,676 quotes of 6
stocks), in one run and one local[2] Spark session:

1. **routing**: the feed validates, orders and routes the quotes (as JSON
   Lines files) for a 2-shard routing table taken from a real server holding
   the demo subscriptions (key-partitioned) and a global one, into a server
   that only acknowledges (:mod:`cesar.perf.acksink`).  Reported: rows per second
   of micro-batch time (Spark's ``triggerExecution``), events sent per shard,
   PublishBatch messages.
2. **end to end**, for each shard count: ``cesar serve`` with the same
   subscriptions; the feed reads files dropped into its source directory
   (a) the first half of the quotes at once, in files of 12,000 — throughput,
   events applied per second from the first drop to the last — and (b) the
   rest paced at ``--rate`` events/s, a file every half second — latency from
   a file's drop to each alert it causes (the alert's ``t1`` names the file),
   p50 and p99.  The alerts must equal ``cesar run``'s
   count on the same events (checked; the server runs with the runaway caps
   off, as ``cesar run`` has none).  Each shard count's throughput is also
   given against ``cesar run``'s rate on the same queries and events in this
   process (``vs_in_process``; the run that counts the alerts, timed after its subscribes
   as the feed is timed after the server's).  Beside it: the
   front's and the shards' CPU an event over the throughput phase (from /proc) against the
   in-process run's, each shard's busy share of that phase (1.0: it bounds the rate), and
   the time this process's one consumer took to catch up with the alerts after it, before
   the paced part starts.

``--workload server`` runs serverbench's workload through the feed instead (its
10,000 queries on its random walk of 200 stocks, ``--queries`` and
``--events``): there the engine's work, not the feed's, bounds the throughput.

    python -m cesar.perf.feedbench                     # the whole data set
    python -m cesar.perf.feedbench --workload server   # 10,000 queries, 200,000 events
    python -m cesar.perf.feedbench --smoke             # the bundled sample on 2 shards (CI)
    python -m cesar.perf.feedbench --json out.json
    python -m cesar.perf.feedbench --workload server --shards 1 --pin   # shard on its own CPU

``--pin`` gives each shard a CPU of its own (``cesar serve --shard-cpus auto``) and keeps
this process, its Spark and the front on the CPUs left (fewer shards than CPUs).
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc

from cesar.automata.schema import Event, parse_stream_spec
from cesar.examples import STOCKS_SAMPLE
from cesar.perf import serverbench
from cesar.perf.acksink import AckSink
from cesar.perf.quotes import minute_events
from cesar.perf.report import machine, print_report
from cesar.perf.serverproc import QUERIES, STOCK, Server, cpu_seconds
from cesar.server.engine.workload import Workload
from cesar.server.feed.job import Feed, Options, session
from cesar.server.front.limits import MAX_SUBSCRIBE_BATCH
from cesar.server.host.collector import tune_collector
from cesar.server.host.cpus import PlacementError, allowed, pin, place
from cesar.server.wire.client import alerts, list_streams
from cesar.server.wire.eventfile import drop_file, input_line, read_events
from cesar.v1 import cesar_pb2 as pb

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/data/stocks/intraday_1min_6_us_stocks_2020-10-26_2021-01-08.csv"
SAMPLE = STOCKS_SAMPLE
GLOBAL = "FILTER{Name = 'AMZN'} Stock NEXT{$2.Name = 'TSLA' AND $2.Price > 420} Stock PUBLISH G"
FILE_ROWS = 12_000
UNCAPPED = ("--max-instances-per-subscription", "0", "--max-alerts-per-epoch", "0")
"""The runaway caps off: the global query holds an AMZN quote until TSLA passes 420, far more
than a node's default cap of partial matches, and ``cesar run`` (the check) has no caps."""


def sample_events() -> list[Event]:
    """The bundled sample (a day of the same six stocks), for ``--smoke``."""
    with open(SAMPLE) as handle:
        return read_events(handle, str(SAMPLE), {"Stock": parse_stream_spec(STOCK)}).events


def queries() -> list[tuple[str, str]]:
    return [(p.stem, p.read_text()) for p in QUERIES] + [("G", GLOBAL)]


def workload(args: argparse.Namespace) -> tuple[list[tuple[str, str]], list[Event]]:
    """The (name, CEL) queries and the events of the run the arguments ask for."""
    if args.workload == "server":
        return serverbench.queries(args.queries), serverbench.stock_events(args.events or 200_000)
    if args.smoke:
        return queries(), sample_events()
    return queries(), minute_events(args.data, args.events)


def json_files(events: list[Event], rows: int) -> list[list[str]]:
    lines = [input_line(e) for e in events]
    return [lines[i : i + rows] for i in range(0, len(lines), rows)]


def subscribe_all(
    server: Server, texts: list[tuple[str, str]]
) -> tuple[pb.RoutingTable, list[pb.StreamInfo], list[str]]:
    """Subscribe ``texts`` (SubscribeBatch, each batch as large as allowed); the routing table,
    the streams and the subscription ids."""
    conn = server.connect()
    ids = []
    for at in range(0, len(texts), MAX_SUBSCRIBE_BATCH):
        request = pb.SubscribeBatchRequest(
            subscriptions=[
                pb.SubscribeRequest(query=text, name=name)
                for name, text in texts[at : at + MAX_SUBSCRIBE_BATCH]
            ]
        )
        for result in conn.stub.SubscribeBatch(request, metadata=conn.metadata).results:
            assert result.HasField("subscription"), result.failure
            ids.append(result.subscription.id)
    routing = conn.stub.GetRouting(pb.GetRoutingRequest(), metadata=conn.metadata)
    streams = list_streams(conn.stub, conn.metadata)
    conn.close()
    return routing, streams, ids


def feed_options(address: str, tmp: Path, available_now: bool, per_trigger: int = 1) -> Options:
    """The feed's options: every file at once (``available_now``), or at most ``per_trigger``
    files of :data:`FILE_ROWS` rows a micro-batch, as a stream arriving file by file."""
    return Options(
        server=address,
        source=str(tmp / "in"),
        checkpoint=str(tmp / "checkpoint"),
        dead_letter=str(tmp / "dead"),
        available_now=available_now,
        trigger_seconds=0.2,
        max_files_per_trigger=per_trigger if not available_now else None,
    )


def routing_run(
    spark: Any, texts: list[tuple[str, str]], events: list[Event], tmp: Path
) -> dict[str, Any]:
    """Part 1: the feed alone, into a sink that only acknowledges; a cold run, then a warm one.

    The cold run includes starting Spark's Python workers; the warm one is the
    steady state a long-running feed sees.
    """
    server = Server(tmp / "data", shards=2).start()
    try:
        routing, streams, _ = subscribe_all(server, texts)
    finally:
        server.stop()
    runs = {}
    for name in ("cold", "warm"):
        sink = AckSink(routing, streams)
        scratch = tmp / name
        (scratch / "in").mkdir(parents=True)
        for number, lines in enumerate(json_files(events, len(events))):
            drop_file(scratch / "in", number, lines)
        feed = Feed(spark, feed_options(sink.address, scratch, available_now=True))
        try:
            query = feed.start()
            query.awaitTermination()
            feed.finish()
            progress = query.recentProgress
        finally:
            feed.close()
            sink.stop()
        batch_ms = sum(p["durationMs"]["triggerExecution"] for p in progress if p["numInputRows"])
        rows = sum(p["numInputRows"] for p in progress)
        runs[name] = {
            "rows": rows,
            "micro_batches": sum(1 for p in progress if p["numInputRows"]),
            "batch_seconds": round(batch_ms / 1000, 3),
            "rows_per_s": round(rows / (batch_ms / 1000)),
            "events_sent_per_shard": dict(sorted(sink.received.events.items())),
            "messages_per_shard": dict(sorted(sink.received.messages.items())),
        }
    return runs


class Listener:
    """A Listen stream in a thread: every alert with the time it arrived."""

    def __init__(self, server: Server, ids: list[str]) -> None:
        self.conn = server.connect()
        request = pb.ListenRequest(after_seq={i: 0 for i in ids})
        self.stream = self.conn.stub.Listen(request, metadata=self.conn.metadata)
        self.alerts: list[tuple[float, int]] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for alert in alerts(self.stream):
                self.alerts.append((time.perf_counter(), alert.event.t1))
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise

    def close(self) -> None:
        self.stream.cancel()
        self.thread.join(10)
        self.conn.close()


def front_counters(server: Server) -> dict[str, int]:
    """The front's counters (Stats)."""
    conn = server.connect()
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata).front
    conn.close()
    return {name: int(value) for name, value in stats.items()}


def applied(server: Server) -> int:
    """Events the front accepted and handed to the shards (not still pending)."""
    stats = front_counters(server)
    return stats.get("events_accepted", 0) - stats["open_epoch_events"]


def end_to_end(
    spark: Any,
    shards: int,
    texts: list[tuple[str, str]],
    events: list[Event],
    alert_times: Sequence[int],
    rate: float,
    tmp: Path,
    per_trigger: int,
    pinned: frozenset[int] | None = None,
) -> dict[str, Any]:
    """Part 2 for one shard count: throughput (all at once), then latency (paced).

    ``alert_times``: the ``t1`` of each of ``cesar run``'s alerts, ascending; ``per_trigger``:
    the most files the feed takes in one micro-batch; ``pinned``: the CPUs the server places
    its shards and front on (``--shard-cpus auto``) while this process and its Spark keep to
    the others (None: nothing pinned).
    """
    expected, total = bisect.bisect_left(alert_times, events[-1].t1), len(alert_times)
    result: dict[str, Any] = {"shards": shards}
    files = json_files(events, min(FILE_ROWS, len(events) // 10))
    half = len(files) // 2
    server = Server(tmp / "data", *UNCAPPED, shards=shards)
    if pinned is None:
        server.start()
    else:  # a child starts on the CPUs of the thread starting it: give it all, then take back
        mine = os.sched_getaffinity(0)
        os.sched_setaffinity(0, pinned)
        try:
            server.args += ["--shard-cpus", "auto"]
            server.start()
        finally:
            os.sched_setaffinity(0, mine)
    try:
        _, _, ids = subscribe_all(server, texts)
        listener = Listener(server, ids)
        (tmp / "in").mkdir()
        feed = Feed(
            spark, feed_options(server.address, tmp, available_now=False, per_trigger=per_trigger)
        )
        query = feed.start()
        try:
            first_half = sum(len(f) for f in files[:half])
            newest = events[first_half - 1].t1
            held = sum(1 for e in events[:first_half] if e.t1 == newest)
            assert server.process is not None
            pids = [server.process.pid, *server.shard_pids()]
            cpu = [cpu_seconds(pid) for pid in pids]
            started = time.perf_counter()
            for number in range(half):
                drop_file(tmp / "in", number, files[number])
            # the newest minute's quotes wait for the next file (their epoch is open), counted
            # once per lane each goes to (its key's and the global query's)
            while applied(server) < first_half - 2 * held:
                time.sleep(0.05)
            elapsed = time.perf_counter() - started
            cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu, strict=True)]
            done = applied(server)
            result["throughput_events_per_s"] = round(done / elapsed)
            result["front_cpu_us_per_event"] = round(cpu[0] / done * 1e6, 2)
            result["shard_cpu_us_per_event"] = round(sum(cpu[1:]) / done * 1e6, 2)
            result["shard_busy"] = [round(c / elapsed, 3) for c in cpu[1:]]
            # the paced phase measures a caught-up server: its latency is not the backlog
            # of the throughput phase's alerts still on their way to this one consumer
            caught, deadline = bisect.bisect_left(alert_times, newest), time.monotonic() + 300
            while len(listener.alerts) < caught and time.monotonic() < deadline:
                time.sleep(0.05)
            result["catch_up_s"] = round(time.perf_counter() - started - elapsed, 3)
            dropped: list[tuple[float, int, int]] = []
            # paced: each file holds half a second of quotes at ``rate``
            rest = [line for lines in files[half:] for line in lines]
            step = max(1, int(rate / 2))
            paced = [rest[i : i + step] for i in range(0, len(rest), step)]
            for number, lines in enumerate(paced, start=half):
                at = time.perf_counter()
                drop_file(tmp / "in", number, lines)
                first_t = json.loads(lines[0])["t1"]
                last_t = json.loads(lines[-1])["t1"]
                dropped.append((at, first_t, last_t))
                time.sleep(len(lines) / rate)
            deadline = time.monotonic() + 300
            while len(listener.alerts) < expected - 50 and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2.0)
        finally:
            query.stop()
        feed.finish()  # the source is complete: close the newest epoch too
        feed.close()
        deadline = time.monotonic() + 60
        while len(listener.alerts) < total and time.monotonic() < deadline:
            time.sleep(0.1)
        listener.close()
        counters = front_counters(server)
        result["server"] = {
            k: counters.get(k, 0)
            for k in ("events_accepted", "events_rejected", "alerts", "batches")
        }
        late_t = dropped[0][1]
        latencies = []
        for received, t1 in listener.alerts:
            if t1 < late_t:
                continue
            made = max(at for at, first_t, _ in dropped if first_t <= t1)
            latencies.append(received - made)
        latencies.sort()
        result.update(
            paced_rate_events_per_s=rate,
            alerts=len(listener.alerts),
            latency_alerts=len(latencies),
            latency_p50_ms=round(1000 * statistics.median(latencies)),
            latency_p99_ms=round(1000 * latencies[int(0.99 * (len(latencies) - 1))]),
        )
    finally:
        server.stop()
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.feedbench", description=__doc__)
    parser.add_argument("--data", type=Path, default=DATA, help="the one-minute stock CSV")
    parser.add_argument(
        "--workload",
        choices=["stocks", "server"],
        default="stocks",
        help="stocks: the one-minute data and the demo queries; server: serverbench's workload",
    )
    parser.add_argument("--queries", type=int, default=10_000, help="--workload server's queries")
    parser.add_argument(
        "--events",
        type=int,
        help="use the first N quotes (default: all); --workload server: N events (200,000)",
    )
    parser.add_argument("--rate", type=float, default=5000, help="paced events/s for latency")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--files-per-trigger",
        type=int,
        default=1,
        help=f"the most files of {FILE_ROWS:,} rows the feed takes in one micro-batch",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the bundled sample (examples/stocks_sample.csv, 2,340 quotes), paced at 1,000/s, "
        "on 2 shards only",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="each shard on a CPU of its own (cesar serve --shard-cpus auto), the front, this "
        "process and its Spark on the CPUs left: fewer shards than CPUs",
    )
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    pinned = allowed() if args.pin else None
    if pinned is not None:
        try:
            rest = place("auto", max(args.shards), pinned).rest
        except PlacementError as exc:
            parser.error(f"--pin: {exc}")
        pin(rest)  # before Spark's JVM starts: it and its Python workers inherit it
    rate = 1000.0 if args.smoke else args.rate
    texts, events = workload(args)
    tune_collector()  # the in-process reference runs as ``cesar run`` does
    engine = Workload.build([parse_stream_spec(STOCK)], texts).subscribed("engine")
    started, cpu_started = time.perf_counter(), time.process_time()
    outputs = engine.run(events) + engine.finish()
    in_process = round(len(events) / (time.perf_counter() - started), 1)
    in_process_cpu = (time.process_time() - cpu_started) / len(events) * 1e6
    alert_times = sorted(e.t1 for e in outputs)
    spark = session("local[2]", "cesar-feedbench")
    summary: dict[str, Any] = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "events": len(events),
        "workload": args.workload,
        "queries": len(texts),
        "alerts_cesar_run": len(outputs),
        "in_process_events_per_s": in_process,
        "in_process_cpu_us_per_event": round(in_process_cpu, 2),
        "files_per_trigger": args.files_per_trigger,
        "pinned": {"shards": "auto", "this_process_and_spark": sorted(allowed())}
        if args.pin
        else None,
    }
    try:
        with tempfile.TemporaryDirectory() as scratch:
            summary["routing"] = routing_run(spark, texts, events, Path(scratch) / "routing")
            runs = []
            for shards in [2] if args.smoke else args.shards:
                runs.append(
                    end_to_end(
                        spark,
                        shards,
                        texts,
                        events,
                        alert_times,
                        rate,
                        Path(scratch) / f"s{shards}",
                        args.files_per_trigger,
                        pinned,
                    )
                )
            summary["end_to_end"] = runs
    finally:
        spark.stop()
    for run in summary["end_to_end"]:
        assert run["alerts"] == len(outputs), (
            f"{run['shards']} shard(s): {run['alerts']} alerts, cesar run made {len(outputs)}; "
            f"the server: {run['server']}"
        )
    summary["vs_in_process"] = {
        str(run["shards"]): round(run["throughput_events_per_s"] / in_process, 2)
        for run in summary["end_to_end"]
    }
    if len(summary["end_to_end"]) == 2:
        one, two = summary["end_to_end"]
        summary["throughput_ratio_2_vs_1"] = round(
            two["throughput_events_per_s"] / one["throughput_events_per_s"], 2
        )
    print_report(summary, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
