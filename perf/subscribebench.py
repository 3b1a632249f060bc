"""SubscribeBatch into a loaded server: subscriptions/s and the latency of each batch.

Start ``cesar serve`` on loopback with S shards, subscribe ``--preload``
queries in SubscribeBatch requests of ``--batch`` from one client (timed
too: the rate as the server fills), then time ``--measure`` more in the same
batches — the rate of a server that already holds the preload.  Queries are
the load test's ``stock`` workload (70 % selections pinned to a stock, 29 %
drops joined on ``Name``, 1 % two-stock sequences; ``perf/loadwork.py``).
Reported: subscriptions/s of both phases, the measured batches' latency p50 /
p99 / max, and the front's and shards' RSS at the end (the Stats RPC).

    python -m cesar.perf.subscribebench --preload 100000 --measure 10000 --shards 2
    python -m cesar.perf.subscribebench --smoke      # 2,000 + 2,000 (CI)
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cesar.perf.loadwork import Workload
from cesar.perf.report import machine
from cesar.perf.serverproc import Server
from cesar.server.wire.client import Connection
from cesar.v1 import cesar_pb2 as pb


def _batches(conn: Connection, work: Workload, first: int, count: int, size: int) -> list[float]:
    """Subscribe queries ``first`` … ``first + count - 1``; seconds per batch."""
    seconds = []
    for start in range(first, first + count, size):
        chunk = [work.query(n).request() for n in range(start, min(start + size, first + count))]
        tick = time.perf_counter()
        response = conn.stub.SubscribeBatch(pb.SubscribeBatchRequest(subscriptions=chunk))
        seconds.append(time.perf_counter() - tick)
        failed = [r.failure.message for r in response.results if r.HasField("failure")]
        if failed:
            raise SystemExit(f"subscribebench: {len(failed)} subscriptions failed: {failed[0]}")
    return seconds


def run(shards: int, preload: int, measure: int, batch: int, seed: int) -> dict[str, Any]:
    """One server: preload, then measure; the figures."""
    work = Workload("stock", seed=seed)
    with tempfile.TemporaryDirectory() as data:
        limit = str(preload + measure + 1)
        server = Server(Path(data) / "server", "--max-subscriptions", limit,
                        "--log-level", "WARNING", shards=shards).start()  # fmt: skip
        try:
            conn = server.connect()
            loading = _batches(conn, work, 0, preload, batch)
            measured = _batches(conn, work, preload, measure, batch)
            stats = conn.stub.Stats(pb.StatsRequest())
            conn.close()
        finally:
            server.stop()
    cuts = (
        statistics.quantiles(measured, n=100, method="inclusive")
        if len(measured) > 1
        else measured * 99
    )
    return {
        "shards": shards,
        "batch": batch,
        "preload": preload,
        "preload_per_s": round(preload / sum(loading), 1) if loading else None,
        "measured": measure,
        "measured_per_s": round(measure / sum(measured), 1),
        "batch_ms_p50": round(cuts[49] * 1000, 1),
        "batch_ms_p99": round(cuts[98] * 1000, 1),
        "batch_ms_max": round(max(measured) * 1000, 1),
        "front_rss_mb": round(stats.front["rss_bytes"] / 2**20, 1),
        "shards_rss_mb": [round(s.counters["rss_bytes"] / 2**20, 1) for s in stats.shards],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cesar.perf.subscribebench", description=__doc__
    )
    parser.add_argument("--preload", type=int, default=100_000)
    parser.add_argument("--measure", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="2,000 preloaded, 2,000 measured")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    preload, measure = (2_000, 2_000) if args.smoke else (args.preload, args.measure)
    record = run(args.shards, preload, measure, args.batch, args.seed)
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        **record,
    }
    print(json.dumps(summary), flush=True)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
