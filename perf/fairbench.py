"""Fairness: a one-event client's publish latency beside a client sending huge batches.

In one run: start ``cesar serve`` (2 shards) with a few subscriptions on
``Stock``, then measure a *small* client's PublishBatch latency (one event of
its own stream ``Tick`` a request, back to back) twice: alone, then while a
*bulk* client sends PublishBatch requests of ``--batch`` events of ``Stock``
(100,000: the largest a request may hold) as fast as they are acknowledged.
Reported: the small client's latency p50 / p99 / max alone and beside the bulk
client, their ratio, and the bulk client's events/s.  Every request must be
fully accepted (checked).  Work counters: requests and events of each client.

``--compile N`` measures instead the small client beside a client's SubscribeBatch of ``N``
patterns of distinct shapes (each compiled in full, about 20 ms), while it compiles.

``--runaway E`` measures instead, on a fresh server, the small client beside a
*runaway*: a client subscribed to ``PATTERN AND(Stock a, Stock b, Stock c, Stock d,
Stock e) WITHIN 1 HOUR`` publishing five quotes a minute, one request (one epoch) at a
time, ``E`` epochs: each runaway epoch's latency and the small client's, with the work
budget's counters (steps cut, instances) from the shards.  ``--no-budget`` starts the
server with the work and instance budgets off (the "before").

    python -m cesar.perf.fairbench                  # 5 bulk batches of 100,000 events
    python -m cesar.perf.fairbench --smoke          # 2 bulk batches of 20,000 (CI)
    python -m cesar.perf.fairbench --batch N --bulk-batches B --json out.json
    python -m cesar.perf.fairbench --runaway 30 [--no-budget] --json out.json
    python -m cesar.perf.fairbench --compile 2000 --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from cesar.perf.report import machine, now, print_report
from cesar.perf.serverbench import stock_events
from cesar.perf.serverproc import Server
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb

TICK = "Tick(n:int)"
QUERIES = [
    "FILTER{Price > 400} Stock",
    "SELECT * FROM Stock NEXT{$1.Name = $2.Name AND $2.Price < 0.99 * $1.Price} Stock",
    "FILTER{n < 0} Tick",
]


def small_latencies(conn: Any, start: int, stop: threading.Event, least: int) -> list[float]:
    """One-event Tick publishes back to back until ``stop`` is set (and ``least`` are done):
    each one's seconds from request to acknowledgement."""
    out: list[float] = []
    t = start
    while not stop.is_set() or len(out) < least:
        event = pb.Event(stream="Tick", t0=t, t1=t, attributes={"n": pb.Value(int_value=t)})
        began = time.perf_counter()
        reply = conn.stub.PublishBatch(pb.PublishRequest(events=[event]), metadata=conn.metadata)
        out.append(time.perf_counter() - began)
        assert reply.accepted == 1, reply.rejected
        t += 1
    return out


def alone_latencies(conn: Any, count: int) -> list[float]:
    """``count`` one-event Tick publishes back to back, from t = 1: their latencies."""
    done = threading.Event()
    done.set()
    return small_latencies(conn, 1, done, count)


@contextlib.contextmanager
def small_client_beside(conn: Any, start: int) -> Iterator[list[float]]:
    """One-event Tick publishes from ``start``, back to back on a thread while the block
    runs (at least one): their latencies, complete once the block ends."""
    stop = threading.Event()
    beside: list[float] = []
    worker = threading.Thread(target=lambda: beside.extend(small_latencies(conn, start, stop, 1)))
    worker.start()
    try:
        yield beside
    finally:
        stop.set()
        worker.join()


def stock_epoch(t1: int, names: int = 5) -> list[pb.Event]:
    """One quote of each of ``names`` tickers (N0, N1, ...) at ``t1``: an epoch."""
    return [
        pb.Event(
            stream="Stock",
            t0=t1,
            t1=t1,
            attributes={
                "Name": pb.Value(string_value=f"N{i}"),
                "Price": pb.Value(float_value=100.0 + i),
                "Volume": pb.Value(int_value=1),
            },
        )
        for i in range(names)
    ]


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
        "requests": len(ordered),
    }


def run(batch: int, bulk_batches: int) -> dict[str, Any]:
    """The measurement (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data", "--stream", TICK).start()
        try:
            small, bulk = server.connect(), server.connect()
            for text in QUERIES:
                small.stub.Subscribe(pb.SubscribeRequest(query=text), metadata=small.metadata)
            alone = alone_latencies(small, 200)
            events = stock_events(batch * bulk_batches)
            requests = [
                pb.PublishRequest(events=[to_event(e) for e in events[i : i + batch]])
                for i in range(0, len(events), batch)
            ]
            began = time.perf_counter()
            with small_client_beside(small, 10_000) as beside:
                for request in requests:
                    reply = bulk.stub.PublishBatch(request, metadata=bulk.metadata, timeout=600)
                    assert reply.accepted == len(request.events), reply.rejected[:3]
                bulk_seconds = time.perf_counter() - began
        finally:
            server.stop()
    alone_s, beside_s = summary(alone), summary(beside)
    return {
        "batch": batch,
        "bulk_batches": bulk_batches,
        "alone": alone_s,
        "beside_bulk": beside_s,
        "p50_ratio": round(beside_s["p50_ms"] / alone_s["p50_ms"], 2),
        "p99_ratio": round(beside_s["p99_ms"] / alone_s["p99_ms"], 2),
        "bulk_events_per_s": round(batch * bulk_batches / bulk_seconds),
        "counters": {
            "small_requests": alone_s["requests"] + beside_s["requests"],
            "bulk_requests": bulk_batches,
            "bulk_events": batch * bulk_batches,
        },
    }


def distinct_patterns(count: int, components: int = 24) -> list[str]:
    """``count`` patterns of ``components`` quotes each, no two of one shape (their
    conditions read Price or Volume by the bits of their number)."""
    out = []
    for number in range(count):
        parts = ", ".join(f"Stock a{j}" for j in range(components))
        conditions = " AND ".join(
            f"a{j}.{'Price' if number >> j & 1 else 'Volume'} > {j}" for j in range(components)
        )
        out.append(f"PATTERN SEQ({parts}) WHERE {conditions} WITHIN 1 HOUR PUBLISH P{number}")
    return out


def beside_compile(count: int) -> dict[str, Any]:
    """The small client beside a SubscribeBatch of ``count`` distinct patterns."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "data", "--stream", TICK).start()
        try:
            small, loud = server.connect(), server.connect()
            small.stub.Subscribe(pb.SubscribeRequest(query=QUERIES[2]), metadata=small.metadata)
            alone = alone_latencies(small, 100)
            batch = pb.SubscribeBatchRequest(
                subscriptions=[pb.SubscribeRequest(query=q) for q in distinct_patterns(count)]
            )
            with small_client_beside(small, 10_000) as beside:
                began = time.perf_counter()
                try:
                    reply = loud.stub.SubscribeBatch(batch, metadata=loud.metadata, timeout=600)
                    outcome = "OK"
                    registered = sum(item.HasField("subscription") for item in reply.results)
                except grpc.RpcError as exc:  # past the compile budget: nothing registered
                    outcome, registered = exc.code().name, 0
                batch_seconds = time.perf_counter() - began
        finally:
            server.stop()
    alone_s, beside_s = summary(alone), summary(beside)
    return {
        "batch": count,
        "outcome": outcome,
        "batch_seconds": round(batch_seconds, 2),
        "alone": alone_s,
        "beside_compile": beside_s,
        "p99_ratio": round(beside_s["p99_ms"] / alone_s["p99_ms"], 2),
        "counters": {"registered": registered, "small_requests": len(alone) + len(beside)},
    }


RUNAWAY = "PATTERN AND(Stock a, Stock b, Stock c, Stock d, Stock e) WITHIN 1 HOUR PUBLISH Five"
UNBUDGETED = (
    *("--max-steps-per-epoch", "0", "--max-engine-steps-per-epoch", "0"),
    *("--max-instances-per-subscription", "0"),
)


def runaway(epochs: int, budget: bool) -> dict[str, Any]:
    """The small client beside a runaway pattern (see the module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        extra = () if budget else UNBUDGETED
        server = Server(Path(tmp) / "data", "--stream", TICK, *extra).start()
        try:
            small, loud = server.connect(), server.connect()
            small.stub.Subscribe(pb.SubscribeRequest(query=QUERIES[2]), metadata=small.metadata)
            loud.stub.Subscribe(pb.SubscribeRequest(query=RUNAWAY), metadata=loud.metadata)
            loud_seconds = []
            start = int(time.time() // 60) - epochs - 10
            with small_client_beside(small, 1) as beside:
                for k in range(epochs):
                    began = time.perf_counter()
                    request = pb.PublishRequest(events=stock_epoch(start + k), watermark=start + k)
                    reply = loud.stub.PublishBatch(request, metadata=loud.metadata, timeout=600)
                    loud_seconds.append(time.perf_counter() - began)
                    assert reply.accepted == 5, reply.rejected
            stats = loud.stub.Stats(pb.StatsRequest(), metadata=loud.metadata)
            shards = [dict(s.counters) for s in stats.shards]
        finally:
            server.stop()
    return {
        "budget": budget,
        "epochs": epochs,
        "runaway_publish": summary(loud_seconds),
        "runaway_publish_s": [round(s, 3) for s in loud_seconds],
        "small_beside_runaway": summary(beside),
        "counters": {
            "cut": sum(s.get("cut", 0) for s in shards),
            "instances": sum(s.get("instances", 0) for s in shards),
            "dropped": sum(s.get("dropped", 0) for s in shards),
            "spawned": sum(s.get("spawned", 0) for s in shards),
            "instances_touched": sum(s.get("instances_touched", 0) for s in shards),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.fairbench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="2 bulk batches of 20,000 (CI)")
    parser.add_argument("--batch", type=int, default=100_000, help="events per bulk request")
    parser.add_argument("--bulk-batches", type=int, default=5, help="bulk requests sent")
    parser.add_argument("--json", type=Path, help="write the report here too")
    parser.add_argument("--runaway", type=int, metavar="E", help="epochs beside a runaway")
    parser.add_argument("--compile", type=int, metavar="N", help="beside an N-query batch")
    parser.add_argument("--no-budget", action="store_true", help="the runaway unbudgeted")
    args = parser.parse_args(argv)
    batch, count = (20_000, 2) if args.smoke else (args.batch, args.bulk_batches)
    if args.compile:
        measured = beside_compile(args.compile)
    elif args.runaway:
        measured = runaway(args.runaway, not args.no_budget)
    else:
        measured = run(batch, count)
    print_report({"date": now(), "machine": machine(), **measured}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
