"""One Listen consumer: how many alerts a second reach it, caught up and live.

Start ``cesar serve`` on loopback (1 shard) with ``--subscriptions`` K
subscriptions that alert on every quote (``FILTER{Price > 0} Stock``, one DAG
node for all), publish ``--alerts`` / K quotes of the load test's workload in
batches of ``--batch``, then

* *catch-up*: one Listen from seq 0 reads every stored alert (the consumer
  decodes each: subscription, seq and the event's stream and ``t1``);
* *live*: one Listen (every subscription of the client) waits for new alerts
  while as many quotes are published again; the rate is alerts over the time
  from the first publish to the last alert received (publishing and making
  the alerts are part of it, so this is a floor).

Reported: alerts/s of both, AlertBatch messages received and alerts per
message, and that every seq arrived once, in order.

    python -m cesar.perf.listenbench --alerts 200000
    python -m cesar.perf.listenbench --smoke
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cesar.perf.loadwork import Workload
from cesar.perf.report import machine, now, write_json
from cesar.perf.serverproc import Server
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb

EVERY = "FILTER{Price > 0} Stock PUBLISH Every"


def _publish(conn: Any, work: Workload, start: int, count: int, batch: int, epoch: int) -> None:
    """Publish ``count`` quotes (a multiple of ``epoch``), epochs ``start / epoch`` on, each
    batch closing its epochs."""
    t = start // epoch
    for first in range(0, count, batch):
        events = []
        for _ in range(min(batch, count - first) // epoch):
            events.extend(work.epoch(t, epoch))
            t += 1
        request = pb.PublishRequest(events=[to_event(e) for e in events], watermark=t - 1)
        reply = conn.stub.PublishBatch(request)
        if reply.rejected:
            raise SystemExit(f"listenbench: rejected {reply.rejected[0]}")


def _read(stream: Any, count: int, seqs: dict[str, list[int]], messages: list[int]) -> None:
    """Read ``count`` alerts, decoding each; their seqs per subscription into ``seqs``."""
    got = 0
    for batch in stream:
        messages.append(len(batch.alerts))
        for alert in batch.alerts:
            if alert.event.stream.startswith("Every") and alert.event.t1 >= 0:
                seqs.setdefault(alert.subscription, []).append(alert.seq)
                got += 1
        if got >= count:
            break
    stream.cancel()


def run(alerts: int, subscriptions: int, batch: int, epoch: int) -> dict[str, Any]:
    work = Workload("stock", seed=3)
    quotes = alerts // subscriptions
    alerts = quotes * subscriptions
    with tempfile.TemporaryDirectory(prefix="cesar-listen-") as tmp:
        server = Server(Path(tmp) / "data", "--retention", str(2 * quotes), shards=1).start()
        try:
            conn = server.connect()
            subs = [
                conn.stub.Subscribe(pb.SubscribeRequest(query=f"{EVERY}{n}")).id
                for n in range(subscriptions)
            ]
            _publish(conn, work, 0, quotes, batch, epoch)
            seqs: dict[str, list[int]] = {}
            messages: list[int] = []
            started = time.perf_counter()
            stream = conn.stub.Listen(pb.ListenRequest(after_seq=dict.fromkeys(subs, 0)))
            _read(stream, alerts, seqs, messages)
            catch_up = time.perf_counter() - started
            ordered = all(seqs[s] == list(range(1, quotes + 1)) for s in subs)
            live_seqs: dict[str, list[int]] = {}
            live_messages: list[int] = []
            stream = conn.stub.Listen(pb.ListenRequest())
            reader = threading.Thread(target=_read, args=(stream, alerts, live_seqs, live_messages))
            reader.start()
            time.sleep(0.5)  # the stream is open before the first publish
            started = time.perf_counter()
            _publish(conn, work, quotes, quotes, batch, epoch)
            published = time.perf_counter() - started
            reader.join()
            live = time.perf_counter() - started
            live_ordered = all(
                live_seqs[s] == list(range(quotes + 1, 2 * quotes + 1)) for s in subs
            )
        finally:
            server.stop()
    return {
        "benchmark": "listenbench",
        "date": now(),
        "machine": machine(),
        "alerts": alerts,
        "subscriptions": subscriptions,
        "catch_up_per_s": round(alerts / catch_up),
        "catch_up_messages": len(messages),
        "catch_up_alerts_per_message": round(alerts / max(1, len(messages)), 1),
        "live_per_s": round(alerts / live),
        "live_quotes_published_per_s": round(quotes / published),
        "live_messages": len(live_messages),
        "live_alerts_per_message": round(alerts / max(1, len(live_messages)), 1),
        "every_seq_once_in_order": ordered and live_ordered,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.listenbench")
    parser.add_argument("--alerts", type=int, default=200_000)
    parser.add_argument("--subscriptions", type=int, default=10, help="each alerts on every quote")
    parser.add_argument("--batch", type=int, default=5_000, help="quotes per PublishBatch")
    parser.add_argument("--epoch", type=int, default=100, help="simultaneous quotes per minute")
    parser.add_argument("--smoke", action="store_true", help="a small run for CI")
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.alerts = 5_000
    result = run(args.alerts, args.subscriptions, args.batch, args.epoch)
    print(json.dumps(result))
    if args.json:
        write_json(args.json, result)
    return 0 if result["every_seq_once_in_order"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
