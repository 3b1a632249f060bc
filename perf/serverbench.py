"""The server end to end: subscribe, publish and receive alerts over gRPC, 1 shard vs 2.

For each shard count, in one run: start ``cesar serve`` on loopback, subscribe
the workload's queries from C concurrent clients, publish the events through
the streaming Publish RPC in batches of 1,000 (as Arrow columns, as the clients
send them), and have every client Listen
until it holds all its alerts.  Reported per shard count: subscriptions/s and
subscribe latency p50/p99, publish throughput (events acknowledged per
second), the front's and the shards' CPU over the publish (µs an event, from /proc),
time until the last alert is received, alerts, and the shards'
deterministic engine counters; then the 2-shard / 1-shard ratios, and each
shard count's publish rate against the same queries and events run on one
engine in this process first (``vs_in_process``: the run alone, as the publish is
timed after the server's subscribes; the engine's subscribes are reported apart).  The
alert count must be the same for every shard count and the in-process run (checked).

    python -m cesar.perf.serverbench                 # 10K queries, 50 clients, 100K events
    python -m cesar.perf.serverbench --smoke         # 300 queries, 5 clients, 5K events (CI)
    python -m cesar.perf.serverbench --queries Q --clients C --events E --shards 1 2 --json out.json
    python -m cesar.perf.serverbench --repeat 3      # 3 rounds; the median of each ratio

The workload (also the load smoke test's): a seeded random walk of 200 stocks
(100 quotes a minute) and queries that are 60% selections pinned to a stock,
39% drops of a stock joined on Name (both key-partitioned) and 1% two-stock
sequences (global).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cesar.automata.schema import Event, Value, parse_stream_spec
from cesar.perf.report import machine
from cesar.perf.serverproc import STOCK, Server, cpu_seconds
from cesar.server.engine.workload import Workload
from cesar.server.host.collector import tune_collector
from cesar.server.wire.client import Connection, arrow_requests
from cesar.v1 import cesar_pb2 as pb

NAMES = 200


def stock_events(count: int, seed: int = 7) -> list[Event]:
    """A seeded random walk of ``NAMES`` stocks, 100 quotes per minute."""
    rng = random.Random(seed)
    price = [rng.uniform(10, 500) for _ in range(NAMES)]
    out = []
    for i in range(count):
        k = rng.randrange(NAMES)
        price[k] = round(price[k] * rng.uniform(0.97, 1.03), 4)
        values: dict[str, Value] = {
            "Name": f"N{k}",
            "Price": price[k],
            "Volume": rng.randrange(1, 10_000),
        }
        out.append(Event.of("Stock", i // 100, i // 100, values))
    return out


def queries(count: int, seed: int = 11) -> list[tuple[str, str]]:
    """(name, CEL) pairs: 60% pinned selections, 39% joined drops, 1% global sequences.

    A global sequence pairs two stocks, so its runs mix keys; it pins both ends so that
    every run ends soon (a NEXT without a selective right side keeps one instance per event).
    """
    rng = random.Random(seed)
    out = []
    for i in range(count):
        name = f"N{rng.randrange(NAMES)}"
        if i % 100 < 60:
            text = f"FILTER{{Name = '{name}' AND Volume > {rng.randrange(9_900, 10_000)}}} Stock"
        elif i % 100 < 99:
            factor = round(rng.uniform(0.965, 0.975), 3)
            text = (
                f"FILTER{{Name = '{name}' AND After < {factor} * Before}} "
                "(SELECT Name, Price_1 AS Before, Price AS After "
                "FROM Stock NEXT{$1.Name = $2.Name} Stock)"
            )
        else:
            other = f"N{rng.randrange(NAMES)}"
            factor = round(rng.uniform(0.8, 1.2), 2)
            text = (
                f"FILTER{{Name = '{name}'}} Stock "
                f"NEXT{{$2.Name = '{other}' AND $2.Price > {factor} * $1.Price}} Stock"
            )
        out.append((f"Q{i}", f"{text} PUBLISH Q{i}"))
    return out


@dataclass
class ServerRun:
    """One shard count's figures."""

    shards: int
    queries: int
    clients: int
    events: int
    subscribe_s: float
    subscribes_per_s: float
    subscribe_p50_ms: float
    subscribe_p99_ms: float
    publish_s: float
    events_per_s: float
    front_us_per_event: float
    shards_us_per_event: float
    last_alert_s: float
    alerts: int
    counters: dict[str, int]


def in_process(texts: list[tuple[str, str]], events: list[Event]) -> dict[str, float]:
    """The same queries and events on one engine in this process (``cesar run``'s path, the
    collector tuned as there): events/s of the run alone, as the server's publish is timed
    after its subscribes (the subscribes timed apart, compiling not counted), and its
    alerts."""
    tune_collector()
    program = Workload.build([parse_stream_spec(STOCK)], texts)
    started = time.perf_counter()
    engine = program.subscribed("engine")
    subscribe_s = time.perf_counter() - started
    started = time.perf_counter()
    alerts = len(engine.run(events)) + len(engine.finish())
    seconds = time.perf_counter() - started
    return {
        "events_per_s": round(len(events) / seconds, 1),
        "subscribe_s": round(subscribe_s, 3),
        "alerts": alerts,
    }


def run(shards: int, texts: list[tuple[str, str]], events: list[Event], clients: int) -> ServerRun:
    """Start a server with ``shards``, drive it, stop it; its figures."""
    with tempfile.TemporaryDirectory() as data:
        server = Server(Path(data) / "server", "--log-level", "WARNING", shards=shards).start()
        try:
            return _drive(server, shards, texts, events, clients)
        finally:
            server.stop()


def _drive(
    server: Server, shards: int, texts: list[tuple[str, str]], events: list[Event], clients: int
) -> ServerRun:
    address = server.address
    latencies: list[float] = []
    mine = [texts[c::clients] for c in range(clients)]

    def subscribe_all(client: int) -> list[str]:
        conn = Connection.open(address)
        ids = []
        for _, text in mine[client]:
            start = time.perf_counter()
            ids.append(conn.stub.Subscribe(pb.SubscribeRequest(query=text)).id)
            latencies.append(time.perf_counter() - start)
        conn.close()
        return ids

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        owned = list(pool.map(subscribe_all, range(clients)))
    subscribe_s = time.perf_counter() - started

    conn = Connection.open(address)
    requests = arrow_requests(events, {"Stock": parse_stream_spec(STOCK)})
    assert server.process is not None
    pids = [server.process.pid, *server.shard_pids()]
    cpu = [cpu_seconds(pid) for pid in pids]
    started = time.perf_counter()
    acks = list(conn.stub.Publish(iter(requests)))
    publish_s = time.perf_counter() - started
    cpu = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu, strict=True)]
    assert sum(a.accepted for a in acks) == len(events)

    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest())
    last = {s.id: s.last_seq for s in listing.subscriptions}

    def receive(client: int) -> int:
        wanted = {sub: last[sub] for sub in owned[client] if last[sub]}
        total = sum(wanted.values())
        if not total:
            return 0
        listener = Connection.open(address)
        stream = listener.stub.Listen(pb.ListenRequest(after_seq=dict.fromkeys(wanted, 0)))
        got = 0
        for batch in stream:
            got += len(batch.alerts)
            if got >= total:
                break
        stream.cancel()
        listener.close()
        return got

    with ThreadPoolExecutor(clients) as pool:
        alerts = sum(pool.map(receive, range(clients)))
    last_alert_s = time.perf_counter() - started
    stats = conn.stub.Stats(pb.StatsRequest())
    conn.close()
    counters: dict[str, int] = {}
    for shard in stats.shards:
        for key, value in shard.counters.items():
            counters[key] = counters.get(key, 0) + value
    return ServerRun(
        shards=shards,
        queries=len(texts),
        clients=clients,
        events=len(events),
        subscribe_s=round(subscribe_s, 3),
        subscribes_per_s=round(len(texts) / subscribe_s, 1),
        subscribe_p50_ms=round(1000 * statistics.median(latencies), 2),
        subscribe_p99_ms=round(1000 * statistics.quantiles(latencies, n=100)[98], 2),
        publish_s=round(publish_s, 3),
        events_per_s=round(len(events) / publish_s, 1),
        front_us_per_event=round(cpu[0] / len(events) * 1e6, 2),
        shards_us_per_event=round(sum(cpu[1:]) / len(events) * 1e6, 2),
        last_alert_s=round(last_alert_s, 3),
        alerts=alerts,
        counters=counters,
    )


def _round(
    texts: list[tuple[str, str]], events: list[Event], shards: list[int], clients: int
) -> dict[str, Any]:
    """The in-process engine, then each shard count, one after the other: their figures and
    ratios (the in-process run just before, on the same machine's mood)."""
    engine = in_process(texts, events)
    records = [run(n, texts, events, clients) for n in shards]
    out: dict[str, Any] = {
        "in_process": engine,
        "records": [asdict(r) for r in records],
        "vs_in_process": {
            str(r.shards): round(r.events_per_s / engine["events_per_s"], 2) for r in records
        },
    }
    if len(records) >= 2:
        one, many = records[0], records[-1]
        out["ratios"] = {
            "events_per_s": round(many.events_per_s / one.events_per_s, 2),
            "last_alert_s": round(many.last_alert_s / one.last_alert_s, 2),
            "subscribes_per_s": round(many.subscribes_per_s / one.subscribes_per_s, 2),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.serverbench", description=__doc__)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds (each: in process, then each shard count)"
    )
    parser.add_argument("--smoke", action="store_true", help="300 queries, 5 clients, 5K events")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.queries, args.clients, args.events = 300, 5, 5_000
    texts = queries(args.queries)
    events = stock_events(args.events)
    rounds = [_round(texts, events, args.shards, args.clients) for _ in range(args.repeat)]
    alerts = {r["alerts"] for one in rounds for r in [one["in_process"], *one["records"]]}
    summary: dict[str, object] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "alerts_agree": len(alerts) == 1,
        **rounds[0],
    }
    if len(rounds) > 1:
        summary["repeats"] = rounds[1:]
        summary["median"] = {
            key: {
                part: round(statistics.median(float(one[key][part]) for one in rounds), 2)
                for part in rounds[0][key]
            }
            for key in ("vs_in_process", "ratios")
            if key in rounds[0]
        }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if len(alerts) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
