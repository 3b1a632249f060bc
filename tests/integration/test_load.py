"""Load smoke: 10K subscriptions from 50 concurrent clients, 6K events, alerts = ``cesar run``.

The workload is :mod:`perf.serverbench`'s: selections pinned to one stock, drops
of one stock joined on Name (both key-partitioned) and a few global sequences.
Each client subscribes half its queries one by one and half in one SubscribeBatch, all
clients at once, and listens to its own alerts at the end.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cesar.perf.serverbench import queries, stock_events
from cesar.perf.serverproc import (
    Server,
    alert_line,
    collect,
    expected_lines,
    normalized,
    subscribe,
)
from cesar.server.wire.client import publish_requests
from cesar.v1 import cesar_pb2 as pb

CLIENTS = 50
QUERIES = 10_000
EVENTS = 6_000


def test_10k_subscriptions_50_clients_6k_events(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    clients = "".join(f"token-{c} client-{c}\n" for c in range(CLIENTS))
    tokens.write_text(clients + "token-root root scope=admin\n")
    server = Server(tmp_path / "data", "--tokens", str(tokens)).start()
    try:
        texts = queries(QUERIES)
        mine = [texts[c::CLIENTS] for c in range(CLIENTS)]

        def subscribe_all(client: int) -> list[pb.Subscription]:
            conn = server.connect(f"token-{client}")
            try:  # half one by one, half in one SubscribeBatch, every client at once
                half = len(mine[client]) // 2
                alone = [subscribe(conn, text) for _, text in mine[client][:half]]
                batch = pb.SubscribeBatchRequest(
                    subscriptions=[pb.SubscribeRequest(query=t) for _, t in mine[client][half:]]
                )
                reply = conn.stub.SubscribeBatch(batch, metadata=conn.metadata)
                return alone + [r.subscription for r in reply.results]
            finally:
                conn.close()

        with ThreadPoolExecutor(CLIENTS) as pool:
            made = list(pool.map(subscribe_all, range(CLIENTS)))
        assert sum(len(m) for m in made) == QUERIES
        assert {s.placement.key_attribute for m in made for s in m} == {"Name", ""}

        events = stock_events(EVENTS)
        publisher = server.connect("token-0")
        requests = publish_requests(events)
        acks = list(publisher.stub.Publish(iter(requests), metadata=publisher.metadata))
        assert sum(a.accepted for a in acks) == EVENTS
        assert not any(a.rejected for a in acks)

        expected = normalized(expected_lines(texts, events))
        assert sum(expected.values()) > 1000

        def received(client: int) -> list[pb.Alert]:
            conn = server.connect(f"token-{client}")
            try:
                listing = conn.stub.ListSubscriptions(
                    pb.ListSubscriptionsRequest(), metadata=conn.metadata
                )
                total = sum(s.last_seq for s in listing.subscriptions)
                request = pb.ListenRequest(after_seq={s.id: 0 for s in listing.subscriptions})
                return collect(conn, total, request, timeout=300)
            finally:
                conn.close()

        with ThreadPoolExecutor(CLIENTS) as pool:
            alerts = [a for got in pool.map(received, range(CLIENTS)) for a in got]
        assert Counter(alert_line(a) for a in alerts) == expected
        root = server.connect("token-root")  # server-wide Stats are an admin's
        stats = root.stub.Stats(pb.StatsRequest(), metadata=root.metadata)
        assert stats.front["alerts"] == sum(expected.values())
        assert stats.front["events_rejected"] == 0
    finally:
        assert server.stop() == 0
