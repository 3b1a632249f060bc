"""The front in-process, with real shard processes and a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cesar.v1 import cesar_pb2 as pb
from server.auth import Clients, Limits
from server.catalog import Catalog
from server.convert import to_event, trusted_event
from server.errors import OutOfRange
from server.front import Front
from server.shardpool import ShardPool
from tests.integration.serverproc import STOCK, expected_lines, sample_events

EVERY = "FILTER{Price > 0} Stock PUBLISH Every"


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    shards = ShardPool(1)
    front = Front(Catalog(tmp_path / "catalog.sqlite", retention=5), shards)
    front.start()
    try:
        yield front
    finally:
        front.close()
        shards.stop()


def test_a_consumer_behind_the_retention_window_is_told_and_counted(front: Front) -> None:
    client = Clients(Limits(10, 10_000, 2)).anonymous
    front.define_stream(client, STOCK)
    sub = front.subscribe(client, EVERY)
    events = [to_event(e) for e in sample_events()[:60]]
    front.publish(events[:3], watermark=events[2].t1)
    listener = front.listen(client, [], {sub.id: 0}, lambda: True)
    assert next(listener).seq == 1
    front.publish(events[3:], watermark=events[-1].t1)  # far more alerts than the 5 kept
    oldest = front.last_seq[sub.id] - 4
    message = rf"after seq 3 were pruned .* resume with after_seq {oldest - 1} .* seq {oldest}$"
    with pytest.raises(OutOfRange, match=message):
        list(listener)
    assert front.counters["listen_overruns"] == 1
    assert front.listens[client.name] == 0  # the slot is given back


def test_listen_limit_per_client(front: Front) -> None:
    client = Clients(Limits(10, 10_000, 1)).anonymous
    front.define_stream(client, STOCK)
    sub = front.subscribe(client, EVERY)
    first = front.listen(client, [sub.id], {sub.id: 0}, lambda: True)
    front.publish([to_event(sample_events()[0])], watermark=sample_events()[0].t1)
    assert next(first).seq == 1
    with pytest.raises(Exception, match="1 Listen streams open"):
        next(front.listen(client, [sub.id], {}, lambda: True))
    first.close()
    assert front.listens[client.name] == 0


def test_restart_replays_the_log_into_fresh_shards(tmp_path: Path) -> None:
    client = Clients(Limits(10, 10_000, 2)).anonymous
    events = [to_event(e) for e in sample_events()]
    shards = ShardPool(2)
    front = Front(Catalog(tmp_path / "c.sqlite", retention=100), shards)
    front.start()
    front.define_stream(client, STOCK)
    front.publish(events[:10])
    drops = front.subscribe(client, Path("examples/queries/drops.cel").read_text())
    front.publish(events[10:1000])
    seq_before = front.last_seq[drops.id]
    front.close()
    shards.stop()
    shards = ShardPool(1)  # fewer shards than before: placement is recomputed, meaning is not
    again = Front(Catalog(tmp_path / "c.sqlite", retention=100), shards)
    again.start()
    try:
        assert again.last_seq[drops.id] == seq_before
        assert [e.t1 for e in again.open] == [e.t1 for e in events[:1000] if e.t1 == events[999].t1]
        again.publish(events[1000:], watermark=events[-1].t1)
        all_drops = expected_lines(
            [("drops", Path("examples/queries/drops.cel").read_text())],
            [trusted_event(e) for e in events[10:]],
        )
        assert again.last_seq[drops.id] == sum(all_drops.values())
    finally:
        again.close()
        shards.stop()


def test_publish_rejects_unknown_fields_as_the_cli_does(front: Front) -> None:
    client = Clients(Limits(10, 10_000, 2)).anonymous
    front.define_stream(client, STOCK)
    event = to_event(sample_events()[0])
    event.attributes["Extra"].int_value = 1
    response = front.publish([event])
    assert [(r.field, r.reason) for r in response.rejected] == [
        ("attributes.Extra", "not an attribute of the stream")
    ]
    assert isinstance(response, pb.PublishResponse)
