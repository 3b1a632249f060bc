"""Restart time: a server killed with ``kill -9`` after N events, back up in how long?

Start ``cesar serve`` on loopback (``--shards`` shards, checkpoints every
``--snapshot-every`` batches), subscribe ``--subscriptions`` queries of the
load test's ``stock`` workload (``perf/loadwork.py``) in SubscribeBatch
requests, then publish epochs of ``--epoch`` simultaneous quotes in batches
of ``--batch`` events.  At each mark of ``--events`` (cumulative: 250K, then
on to 1M) the server is killed with ``kill -9`` and started again on the same
data directory; the restart time is from the start of the process to its
"serving" line (catalog, subscriptions, the latest checkpoint, the log after
it).  Also reported per mark: batches replayed, the checkpoint it resumed
from, the catalog's size, the shards' snapshot sizes and live instances.

With ``--snapshot-every 0`` (no checkpoints) the same run shows what a restart
replaying the whole log costs.

    python -m cesar.perf.restartbench --subscriptions 10000 --events 250000,1000000
    python -m cesar.perf.restartbench --smoke
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cesar.automata.schema import Event
from cesar.perf.loadwork import Workload
from cesar.perf.report import machine, now, write_json
from cesar.perf.serverproc import Server
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb


def _subscribe(server: Server, work: Workload, count: int, size: int = 1000) -> None:
    conn = server.connect()
    for start in range(0, count, size):
        chunk = [work.query(n).request() for n in range(start, min(start + size, count))]
        response = conn.stub.SubscribeBatch(pb.SubscribeBatchRequest(subscriptions=chunk))
        failed = [r.failure.message for r in response.results if r.HasField("failure")]
        if failed:
            raise SystemExit(f"restartbench: {len(failed)} subscriptions failed: {failed[0]}")


def _restart_record(server: Server, seconds: float) -> dict[str, Any]:
    """What the restarted server reports: its load line and its counters."""
    loaded = {}
    for line in server.log.read_text().splitlines():
        record = json.loads(line)
        if record.get("msg") == "catalog loaded":
            loaded = record
    conn = server.connect()
    stats = conn.stub.Stats(pb.StatsRequest())
    snaps = (
        [p.stat().st_size for p in (server.data_dir / "shards").glob("*/*.snap")]
        if (server.data_dir / "shards").exists()
        else []
    )
    return {
        "restart_seconds": round(seconds, 2),
        "load_seconds": loaded.get("seconds"),
        "checkpoint": loaded.get("checkpoint"),
        "batches_replayed": loaded.get("batches_replayed"),
        "catalog_mb": round((server.data_dir / "catalog.sqlite").stat().st_size / 1e6, 1),
        "snapshot_files_mb": round(sum(snaps) / 1e6, 1),
        "instances": sum(s.counters["instances"] for s in stats.shards),
        "front_rss_mb": round(stats.front["rss_bytes"] / 1e6),
    }


def run(
    subscriptions: int,
    marks: Sequence[int],
    shards: int,
    snapshot_every: int,
    batch: int,
    epoch: int,
    seed: int,
) -> dict[str, Any]:
    work = Workload("stock", seed)
    with tempfile.TemporaryDirectory(prefix="cesar-restart-") as tmp:
        server = Server(
            Path(tmp) / "data",
            "--snapshot-every-batches",
            str(snapshot_every),
            "--snapshot-every-seconds",
            "0",
            shards=shards,
        ).start()
        try:
            _subscribe(server, work, subscriptions)
            conn = server.connect()
            published, t, results = 0, 0, []
            publish_seconds = 0.0
            for mark in marks:
                started = time.perf_counter()
                while published < mark:
                    events: list[Event] = []
                    while len(events) < min(batch, mark - published):
                        events.extend(work.epoch(t, epoch))
                        t += 1
                    request = pb.PublishRequest(events=[to_event(e) for e in events])
                    reply = conn.stub.PublishBatch(request)
                    if reply.rejected:
                        raise SystemExit(f"restartbench: rejected {reply.rejected[0]}")
                    published += len(events)
                publish_seconds += time.perf_counter() - started
                server.kill9()
                started = time.perf_counter()
                server.start()
                record = _restart_record(server, time.perf_counter() - started)
                record.update(events=published, publish_rate=round(published / publish_seconds))
                results.append(record)
                print(json.dumps(record), flush=True)
                conn = server.connect()
        finally:
            server.stop()
    return {
        "benchmark": "restartbench",
        "date": now(),
        "machine": machine(),
        "subscriptions": subscriptions,
        "shards": shards,
        "snapshot_every_batches": snapshot_every,
        "batch": batch,
        "epoch": epoch,
        "marks": results,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.restartbench")
    parser.add_argument("--subscriptions", type=int, default=10_000)
    parser.add_argument("--events", default="250000,1000000", help="cumulative kill marks")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--snapshot-every", type=int, default=100, help="batches (0: off)")
    parser.add_argument("--batch", type=int, default=1000, help="events per PublishBatch")
    parser.add_argument("--epoch", type=int, default=100, help="simultaneous quotes per minute")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="a small run for CI")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.subscriptions, args.events, args.snapshot_every = 200, "3000,6000", 2
    marks = sorted(int(m) for m in args.events.split(","))
    result = run(
        args.subscriptions,
        marks,
        args.shards,
        args.snapshot_every,
        args.batch,
        args.epoch,
        args.seed,
    )
    if args.json:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
