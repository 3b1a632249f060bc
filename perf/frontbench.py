"""The front's own cost: CPU per published event and per alert delivered, by wire form.

A server with one shard and one light subscription (``FILTER{Name = 'N1' AND Volume > 9000}
Stock``, a few alerts); E events of the serverbench walk published through the streaming
Publish RPC in requests of 1,000 (the first warms the processes up and is not counted),
once as protobuf events and once as Arrow pieces
(``arrow_events``, the columns ``stream``, ``t0``, ``t1``, ``Stock/Name``...), each on a fresh
server.  Measured from /proc: the front process's CPU over the publish (its threads, not the
shard's, which runs in a process of its own) and the shard's.  Then, on the protobuf server,
a subscription alerting on every event, the events again and one Listen reading every alert:
the front's CPU per alert delivered.

    python -m cesar.perf.frontbench                  # 100K events
    python -m cesar.perf.frontbench --smoke          # 5K events (CI)
    python -m cesar.perf.frontbench --events E --json out.json

Deterministic counters beside the times: events accepted, alerts, the shard's engine events.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cesar.automata.schema import Event, parse_stream_spec
from cesar.perf.report import print_report, stamped
from cesar.perf.serverbench import stock_events
from cesar.perf.serverproc import STOCK, Server, cpu_seconds
from cesar.server.wire.client import Connection, arrow_requests, publish_requests
from cesar.v1 import cesar_pb2 as pb

LIGHT = "FILTER{Name = 'N1' AND Volume > 9000} Stock PUBLISH Light"
EVERY = "FILTER{Price > 0} Stock PUBLISH Every"
BATCH = 1_000


def _publish(server: Server, requests: list[pb.PublishRequest], events: int) -> dict[str, Any]:
    """Publish ``requests`` on one stream; the front's and the shard's CPU and the wall over
    all but the first, which warms the processes up (a process's first Arrow call imports
    what pyarrow needs: about 0.4 CPU-s, once)."""
    (shard,) = server.shard_pids()
    assert server.process is not None
    conn = Connection.open(server.address)
    acks = list(conn.stub.Publish(iter(requests[:1])))
    events -= acks[0].accepted
    front_before, shard_before = cpu_seconds(server.process.pid), cpu_seconds(shard)
    started = time.perf_counter()
    acks += list(conn.stub.Publish(iter(requests[1:])))
    wall = time.perf_counter() - started
    front = cpu_seconds(server.process.pid) - front_before
    shard_cpu = cpu_seconds(shard) - shard_before
    stats = conn.stub.Stats(pb.StatsRequest())
    conn.close()
    accepted = sum(a.accepted for a in acks[1:])
    assert accepted == events, (accepted, events)
    return {
        "events": events,
        "accepted": accepted,
        "wall_s": round(wall, 3),
        "events_per_s": round(events / wall, 1),
        "front_cpu_s": round(front, 3),
        "front_us_per_event": round(front / events * 1e6, 2),
        "shard_cpu_s": round(shard_cpu, 3),
        "shard_us_per_event": round(shard_cpu / events * 1e6, 2),
        "alerts": stats.front["alerts"],
        "shard_events": stats.shards[0].counters["events"],
    }


def _deliver(server: Server, events: list[Event]) -> dict[str, Any]:
    """Every event an alert of one subscription, read by one Listen: the front's CPU per
    alert, over the publish and the delivery."""
    assert server.process is not None
    conn = Connection.open(server.address)
    sub = conn.stub.Subscribe(pb.SubscribeRequest(query=EVERY)).id
    late = [Event.of(e.stream, e.t0 + 10**6, e.t1 + 10**6, dict(e.values)) for e in events]
    front_before = cpu_seconds(server.process.pid)
    started = time.perf_counter()
    list(conn.stub.Publish(iter(publish_requests(late, BATCH))))
    got = 0
    for batch in conn.stub.Listen(pb.ListenRequest(after_seq={sub: 0})):
        got += len(batch.alerts)
        if got >= len(late):
            break
    wall = time.perf_counter() - started
    front = cpu_seconds(server.process.pid) - front_before
    conn.close()
    return {
        "alerts": got,
        "wall_s": round(wall, 3),
        "front_cpu_s": round(front, 3),
        "front_us_per_event_and_alert": round(front / len(late) * 1e6, 2),
    }


def run(events: list[Event]) -> dict[str, Any]:
    """Both wire forms, each on a fresh server, then the alerts; the figures."""
    out: dict[str, Any] = {}
    schemas = {"Stock": parse_stream_spec(STOCK)}
    forms = {
        "protobuf": publish_requests(events, BATCH),
        "arrow": arrow_requests(events, schemas, BATCH),
    }
    for form, requests in forms.items():
        with tempfile.TemporaryDirectory() as data:
            server = Server(Path(data) / "server", shards=1).start()
            try:
                conn = Connection.open(server.address)
                conn.stub.Subscribe(pb.SubscribeRequest(query=LIGHT))
                conn.close()
                out[form] = _publish(server, requests, len(events))
                if form == "protobuf":
                    out["alerts"] = _deliver(server, events)
            finally:
                server.stop()
    out["arrow_vs_protobuf_front_cpu"] = round(
        out["arrow"]["front_cpu_s"] / out["protobuf"]["front_cpu_s"], 3
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.frontbench", description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--smoke", action="store_true", help="5K events")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    events = stock_events(5_000 if args.smoke else args.events)
    print_report(stamped([run(events)]), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
