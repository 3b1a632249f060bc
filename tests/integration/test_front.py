"""The front in-process, with real shard processes and a real SQLite file."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pytest

from cesar.automata.schema import Event
from cesar.perf.serverproc import (
    QUERIES,
    STOCK,
    alert_line,
    expected_lines,
    normalized,
    sample_events,
)
from cesar.server.front import limits
from cesar.server.front.auth import Client, Clients, Limits
from cesar.server.front.catalog import Catalog, SubscriptionRow
from cesar.server.front.checkpoints import SnapshotPolicy
from cesar.server.front.commits import Ticket, Tickets
from cesar.server.front.errors import FailedPrecondition, FrontError, InvalidArgument, OutOfRange
from cesar.server.front.front import Front
from cesar.server.front.pieces import events_in
from cesar.server.front.subscribing import SubscribeItem
from cesar.server.host.calibrate import given
from cesar.server.shard.pool import ShardPool
from cesar.server.wire.arrowevents import column, encode
from cesar.server.wire.client import alerts
from cesar.server.wire.convert import to_event, trusted_event
from cesar.server.wire.routing import shard_of
from cesar.v1 import cesar_pb2 as pb

EVERY = "FILTER{Price > 0} Stock PUBLISH Every"
ROOT = Path(__file__).resolve().parents[2]


def shard_pool(count: int, data_dir: Path | None = None) -> ShardPool:
    """``count`` child shards planning with the constants every test server is given
    (tests/conftest.py), not measured at each start."""
    return ShardPool(count, data_dir=data_dir, costs=given(os.environ["CESAR_PLAN_COSTS"]))


def started(
    tmp_path: Path, shards: int, snapshots: SnapshotPolicy | None = None
) -> tuple[Front, ShardPool]:
    """A started front over ``shards`` child shards, its catalog and their snapshots under
    ``tmp_path``: a second call after a close restarts it."""
    pool = shard_pool(shards, data_dir=tmp_path / "shards")
    catalog = Catalog(tmp_path / "c.sqlite", retention=100_000)
    front = Front(catalog, pool, snapshots=snapshots)
    front.start()
    return front, pool


@pytest.fixture
def front(tmp_path: Path) -> Iterator[Front]:
    shards = shard_pool(1)
    front = Front(Catalog(tmp_path / "catalog.sqlite", retention=5), shards)
    front.start()
    try:
        yield front
    finally:
        front.close()
        shards.stop()


def test_a_consumer_behind_the_retention_window_is_told_and_counted(front: Front) -> None:
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    front.define_stream(client, STOCK)
    sub = front.subscribe(client, EVERY)
    events = [to_event(e) for e in sample_events()[:60]]
    front.publish(client, pb.PublishRequest(events=events[:3], watermark=events[2].t1))
    listener = front.listen(client, [], {sub.id: 0}, lambda: True)
    assert [a.seq for a in pb.AlertBatch.FromString(next(listener)).alerts] == [1, 2, 3]
    for event in events[3:]:  # far more alerts than the 5 kept, a stored row each
        front.publish(client, pb.PublishRequest(events=[event], watermark=event.t1))
    (oldest,) = front.catalog.db.execute(  # pruned at merges: at least the last 5 kept
        "SELECT MIN(seq) FROM alerts WHERE subscription = ?", (sub.id,)
    ).fetchone()
    assert 4 < oldest <= front.registry.last_seq[sub.id] - 4
    message = rf"after seq 3 were pruned .* resume with after_seq {oldest - 1} .* seq {oldest}$"
    with pytest.raises(OutOfRange, match=message):
        list(listener)
    assert front.counters["listen_overruns"] == 1
    assert front.listens[client.name] == 0  # the slot is given back


def test_alert_ids_are_never_reused_after_an_unsubscribe(front: Front) -> None:
    """A live Listen reads alerts by id: the newest alert's subscription, removed with its
    alerts, must not free its id for the next alert, or the stream passes it by (a seq gap)."""
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    front.define_stream(client, STOCK)
    kept = front.subscribe(client, "FILTER{Name = 'IBM'} Stock PUBLISH Kept")
    gone = front.subscribe(client, "FILTER{Name = 'MSFT'} Stock PUBLISH Gone")

    def quote(name: str, t: int) -> None:
        event = pb.Event(stream="Stock", t0=t, t1=t)
        event.attributes["Name"].string_value = name
        event.attributes["Price"].float_value = 1.0
        event.attributes["Volume"].int_value = 1
        response = front.publish(client, pb.PublishRequest(events=[event], watermark=t))
        assert response.accepted == 1

    quote("IBM", 1)
    quote("MSFT", 2)  # the newest alert is the one to be removed
    listener = front.listen(client, [kept.id], {kept.id: 0}, lambda: True)
    assert [a.seq for a in pb.AlertBatch.FromString(next(listener)).alerts] == [1]
    front.unsubscribe(client, gone.id)
    quote("IBM", 3)
    quote("IBM", 4)
    seqs = [a.seq for a in pb.AlertBatch.FromString(next(listener)).alerts]
    listener.close()
    assert seqs == [2, 3]


def test_listen_limit_per_client(front: Front) -> None:
    client = Clients(Limits(10, 10_000, 1, 10)).anonymous
    front.define_stream(client, STOCK)
    sub = front.subscribe(client, EVERY)
    first = front.listen(client, [sub.id], {sub.id: 0}, lambda: True)
    front.publish(
        client,
        pb.PublishRequest(events=[to_event(sample_events()[0])], watermark=sample_events()[0].t1),
    )
    assert pb.AlertBatch.FromString(next(first)).alerts[0].seq == 1
    with pytest.raises(Exception, match="1 Listen streams open"):
        next(front.listen(client, [sub.id], {}, lambda: True))
    first.close()
    assert front.listens[client.name] == 0


def test_restart_replays_the_log_into_fresh_shards(tmp_path: Path) -> None:
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    events = [to_event(e) for e in sample_events()]
    shards = shard_pool(2)
    front = Front(Catalog(tmp_path / "c.sqlite", retention=100), shards)
    front.start()
    front.define_stream(client, STOCK)
    front.publish(client, pb.PublishRequest(events=events[:10]))
    drops = front.subscribe(client, Path("examples/queries/drops.cel").read_text())
    front.publish(client, pb.PublishRequest(events=events[10:1000]))
    seq_before = front.registry.last_seq[drops.id]
    front.close()
    shards.stop()
    shards = shard_pool(1)  # fewer shards than before: placement is recomputed, meaning is not
    again = Front(Catalog(tmp_path / "c.sqlite", retention=100), shards)
    again.start()
    try:
        assert again.registry.last_seq[drops.id] == seq_before
        pending = again.gate.pending[0][again.registry.groups.find("Stock")]
        assert [e.t1 for entry in pending for e in events_in(entry.event)] == [
            e.t1 for e in events[:1000] if e.t1 == events[999].t1
        ]
        again.publish(client, pb.PublishRequest(events=events[1000:], watermark=events[-1].t1))
        all_drops = expected_lines(
            [("drops", Path("examples/queries/drops.cel").read_text())],
            [trusted_event(e) for e in events[10:]],
        )
        assert again.registry.last_seq[drops.id] == sum(all_drops.values())
    finally:
        again.close()
        shards.stop()


def test_publish_rejects_unknown_fields_as_the_cli_does(front: Front) -> None:
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    front.define_stream(client, STOCK)
    event = to_event(sample_events()[0])
    event.attributes["Extra"].int_value = 1
    response = front.publish(client, pb.PublishRequest(events=[event]))
    assert [(r.field, r.reason) for r in response.rejected] == [
        ("attributes.Extra", "not an attribute of the stream")
    ]
    assert isinstance(response, pb.PublishResponse)


def _arrow_batch(events: list[Event]) -> bytes:
    """Stock events as the feed's Arrow table."""
    columns = {
        "stream": [e.stream for e in events],
        "t0": [e.t0 for e in events],
        "t1": [e.t1 for e in events],
    }
    for name in ("Name", "Price", "Volume"):
        columns[column("Stock", name)] = [e.attrs()[name] for e in events]
    return encode(pa.table(columns))


def every_alert(front: Front, client: Client, subs: Iterable[str]) -> Counter[str]:
    """Every alert of ``subs`` so far, read back through Listen, as normalized JSON lines."""
    got: Counter[str] = Counter()
    for sub in subs:
        stream = front.listen(client, [], {sub: 0}, lambda: True)
        batches = map(pb.AlertBatch.FromString, stream)
        got.update(alert_line(a) for a in islice(alerts(batches), front.registry.last_seq[sub]))
        stream.close()
    return normalized(got)


def test_batches_routed_per_shard_keep_each_shard_s_own_epochs(tmp_path: Path) -> None:
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    shards = shard_pool(2)
    front = Front(Catalog(tmp_path / "c.sqlite", retention=100_000), shards)
    front.start()
    try:
        front.define_stream(client, STOCK)
        queries = [(p.stem, p.read_text()) for p in QUERIES]
        subs = {front.subscribe(client, text, name).id: name for name, text in queries}
        events = sample_events()
        half = len(events) // 2
        mark = events[half - 1].t1
        parts = [[e for e in events if shard_of(e.attrs()["Name"], 2) == k] for k in (0, 1)]
        # shard 1 runs ahead of shard 0: its whole stream first, then shard 0's in two batches
        order = [
            (1, parts[1], events[-1].t1),
            (0, [e for e in parts[0] if e.t1 <= mark], mark),
            (0, [e for e in parts[0] if e.t1 > mark], events[-1].t1),
        ]
        for number, (shard, part, watermark) in enumerate(order):
            request = pb.PublishRequest(
                arrow_events=_arrow_batch(part),
                shard=shard,
                shards=2,
                watermark=watermark,
                idempotency_key=f"feed:{number}:{shard}",
            )
            response = front.publish(client, request)
            assert (response.accepted, list(response.rejected)) == (len(part), [])
            assert front.publish(client, request).duplicate
        late = front.publish(
            client, pb.PublishRequest(events=[to_event(parts[0][0])], shard=0, shards=2)
        )
        assert [r.field for r in late.rejected] == ["t1"]
        assert "on shard 0" in late.rejected[0].reason
        with pytest.raises(FailedPrecondition, match="this server has 2 shards"):
            front.publish(client, pb.PublishRequest(shard=0, shards=3))
        assert every_alert(front, client, subs) == normalized(expected_lines(queries, events))
    finally:
        front.close()
        shards.stop()


def test_a_routed_piece_for_two_lanes_of_a_shard_is_decoded_there_once(tmp_path: Path) -> None:
    """Every row of a routed piece goes to the shard's key-partitioned lane and to its global
    lane: the front sends the rows' table once for both (the same blocks), the shard makes
    each event once and both engines run it; alerts as ``cesar run``."""
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    front, shards = started(tmp_path, 1)
    try:
        front.define_stream(client, STOCK)
        queries = [
            ("Rise", "Stock NEXT{$1.Name = $2.Name AND $2.Price > 1.004 * $1.Price} Stock"),
            ("G", "FILTER{Name = 'AMZN'} Stock NEXT{$2.Name = 'TSLA'} Stock PUBLISH G"),
        ]
        subs = [front.subscribe(client, text, name).id for name, text in queries]
        events = sample_events()
        request = pb.PublishRequest(
            arrow_events=_arrow_batch(events), shard=0, shards=1, watermark=events[-1].t1
        )
        assert front.publish(client, request).accepted == len(events)
        counters = front.server_stats().shards[0].counters
        assert counters["lanes"] == 2 and counters["events"] == 2 * len(events)
        assert counters["events_decoded"] == len(events)
        assert every_alert(front, client, subs) == normalized(expected_lines(queries, events))
    finally:
        front.close()
        shards.stop()


def test_routed_pieces_go_past_the_front_as_arrow_through_checkpoints_and_restarts(
    tmp_path: Path,
) -> None:
    """The feed's pieces are logged as Arrow (no event messages), wait in the gate as rows
    across a checkpoint, are replayed from the log after a restart; alerts as ``cesar run``."""
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    queries = [(p.stem, p.read_text()) for p in QUERIES]
    events = sample_events()
    mark = events[len(events) // 2 - 1].t1
    parts = [[e for e in events if shard_of(e.attrs()["Name"], 2) == k] for k in (0, 1)]
    halves = [[e for e in part if e.t1 <= mark] for part in parts]
    rests = [[e for e in part if e.t1 > mark] for part in parts]
    split = len(rests[1]) // 2
    # batches 1-2 close the first halves; 3-4 (checkpointed) and 5 (logged after it) stay open,
    # so after the restart shard 1 holds events from the checkpoint and rows from the log
    order = [
        (0, halves[0], mark),
        (1, halves[1], mark),
        (1, rests[1][:split], 0),
        (0, rests[0], 0),
        (1, rests[1][split:], 0),
    ]

    snapshots = SnapshotPolicy(batches=4, seconds=0)
    front, shards = started(tmp_path, 2, snapshots)
    try:
        front.define_stream(client, STOCK)
        subs = [front.subscribe(client, text, name).id for name, text in queries]
        for shard, part, watermark in order:
            request = pb.PublishRequest(
                arrow_events=_arrow_batch(part), shard=shard, shards=2, watermark=watermark
            )
            assert front.publish(client, request).accepted == len(part)
        waiting = front.server_stats().front["open_epoch_events"]
        assert waiting > 0 and front.checkpoints.last_position == 4
        logged = [pb.PublishRequest.FromString(p) for _, p, _ in front.catalog.batches(after=0)]
        assert [(b.shard, len(b.events), bool(b.arrow_events)) for b in logged] == [(1, 0, True)]
    finally:
        front.close()
        shards.stop()
    front, shards = started(tmp_path, 2, snapshots)
    try:
        assert front.server_stats().front["open_epoch_events"] == waiting
        for shard in (0, 1):
            closing = pb.PublishRequest(shard=shard, shards=2, watermark=events[-1].t1)
            front.publish(client, closing)
        assert every_alert(front, client, subs) == normalized(expected_lines(queries, events))
    finally:
        front.close()
        shards.stop()


def test_routed_pieces_that_only_enter_the_gate_are_logged_without_waiting_for_an_apply(
    tmp_path: Path,
) -> None:
    """A feed's pieces without a watermark that release no epoch are logged and acknowledged
    as they are taken, ahead of the close before them whose apply is in flight (the shard is
    stopped, SIGSTOP, so it lasts until the test lets it go on), and more of them than
    ``BATCHES_IN_FLIGHT``: logged, they are not in flight; not once a subscription is stored
    after the close.  The log stays in number order and a restart replays it into the same
    gate: alerts as ``cesar run``."""
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    queries = [(p.stem, p.read_text()) for p in QUERIES]
    events = sample_events()
    mark = events[len(events) // 2 - 1].t1

    def piece(part: list[Event]) -> pb.PublishRequest:
        return pb.PublishRequest(arrow_events=_arrow_batch(part), shard=0, shards=1)

    front, shards = started(tmp_path, 1)
    try:
        front.define_stream(client, STOCK)
        subs = [front.subscribe(client, text, name).id for name, text in queries]
        first = [e for e in events if e.t1 <= mark]
        assert front.publish(client, piece(first)).accepted == len(first)
        shard = shards.processes[0].pid
        os.kill(shard, signal.SIGSTOP)
        try:
            close = front.begin(client, pb.PublishRequest(shard=0, shards=1, watermark=mark))
            rest = [e for e in events if e.t1 > mark]
            size = len(rest) // (limits.BATCHES_IN_FLIGHT + 3) + 1
            *parts, after = [rest[i : i + size] for i in range(0, len(rest), size)]
            assert len(parts) > limits.BATCHES_IN_FLIGHT
            taken: list[Ticket | Tickets] = []

            def take() -> None:
                for part in parts:
                    taken.append(front.begin(client, piece(part)))

            taking = threading.Thread(target=take, daemon=True)
            taking.start()
            taking.join(30)
            assert not taking.is_alive(), f"{len(taken)} of {len(parts)} pieces taken"
            for number, (ahead, part) in enumerate(zip(taken, parts, strict=True), start=3):
                assert isinstance(ahead, Ticket) and ahead.finished()
                assert (ahead.result().batch, ahead.result().accepted) == (number, len(part))
            assert isinstance(close, Ticket) and not close.finished()
            assert front.commits.committed == 1
            # a subscription stored now sits between the pieces and the next one in replay:
            # the next piece waits for its turn, or a crash losing the close would put it first
            front.subscribe(client, "FILTER{Price > 1} Stock PUBLISH Above")
            behind = front.begin(client, piece(after))
            assert isinstance(behind, Ticket) and not behind.finished()
        finally:
            os.kill(shard, signal.SIGCONT)
        assert close.result().batch == 2
        last = 3 + len(parts)
        assert (behind.result().batch, behind.result().accepted) == (last, len(after))
        logged = [number for number, _, _ in front.catalog.batches(after=0)]
        assert logged == list(range(1, last + 1))
        assert front.commits.committed == last and not front.commits.ahead
    finally:
        front.close()
        shards.stop()
    front, shards = started(tmp_path, 1)
    try:
        front.publish(client, pb.PublishRequest(shard=0, shards=1, watermark=events[-1].t1))
        assert every_alert(front, client, subs) == normalized(expected_lines(queries, events))
    finally:
        front.close()
        shards.stop()


def test_arrow_rows_are_validated_like_messages(front: Front) -> None:
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    front.define_stream(client, STOCK)
    table = pa.table(
        {
            "stream": ["Stock", "Stock", "Nope"],
            "t0": [5, 1, 1],
            "t1": [1, 1, 1],
            "Stock.Name": ["IBM", None, "X"],
            "Stock.Price": [1.0, 2.0, 3.0],
            "Stock.Volume": [1, 2, 3],
        }
    )
    response = front.publish(client, pb.PublishRequest(arrow_events=encode(table)))
    assert [(r.index, r.field) for r in response.rejected] == [
        (0, "t0"),
        (1, "attributes.Name"),
        (2, "stream"),
    ]
    with pytest.raises(InvalidArgument, match="not an Arrow IPC stream"):
        front.publish(client, pb.PublishRequest(arrow_events=b"junk"))


def test_a_subscribe_batch_answers_each_item_and_its_subscriptions_alert_as_cesar_run(
    tmp_path: Path,
) -> None:
    client = Clients(Limits(6, 10_000, 2, 10)).anonymous
    texts = [q.read_text() for q in QUERIES] + [
        "FILTER{Price > 300} Stock PUBLISH Dear",
        "FILTER{Name = 'AMZN'} Dear PUBLISH DearAmazon",  # reads Dear, published just before
        "FILTER{Price >} Stock",
        "FILTER{Price > 1} Stock PUBLISH Dear",
        "SELECT Name FROM Stock NEXT{$2.Price > 1.01 * $1.Price} Stock PUBLISH AnyRise",
        "FILTER{Price > 2} Stock PUBLISH OverTheLimit",
    ]
    events = [to_event(e) for e in sample_events()]
    shards = shard_pool(2)
    front = Front(Catalog(tmp_path / "c.sqlite", retention=100_000), shards)
    front.start()
    front.define_stream(client, STOCK)
    front.publish(client, pb.PublishRequest(events=events[:300]))
    with pytest.raises(InvalidArgument, match="1 to 10000 subscriptions, not 0"):
        front.subscribe_many(client, [])
    results = front.subscribe_many(client, [SubscribeItem(t) for t in texts])
    errors = [(i, r.code) for i, r in enumerate(results) if isinstance(r, FrontError)]
    assert errors == [(5, "INVALID_ARGUMENT"), (6, "ALREADY_EXISTS"), (8, "RESOURCE_EXHAUSTED")]
    rows = [r for r in results if isinstance(r, SubscriptionRow)]
    assert [r.id for r in rows] == ["s1", "s2", "s3", "s4", "s5", "s6"]
    assert [r.stream for r in rows] == ["Rising", "Drops", "DropAfterRise", "Dear", "DearAmazon",
                                        "AnyRise"]  # fmt: skip
    assert rows[1].key_attribute == "Name" and rows[5].key_attribute == ""
    assert {s.name for s, _ in front.stream_rows(client)} >= {r.stream for r in rows}
    front.publish(client, pb.PublishRequest(events=events[300:1200]))
    front.close()
    shards.stop()

    shards = shard_pool(2)  # a restart installs the stored batch again, at its position
    again = Front(Catalog(tmp_path / "c.sqlite", retention=100_000), shards)
    again.start()
    try:
        again.publish(client, pb.PublishRequest(events=events[1200:], watermark=events[-1].t1))
        expected = expected_lines(
            [(r.id, r.query) for r in rows], [trusted_event(e) for e in events[300:]]
        )
        per_stream = Counter[str]()
        for line, count in expected.items():
            per_stream[json.loads(line)["stream"]] += count
        assert all(per_stream[r.stream] > 0 for r in rows)
        assert {r.stream: again.registry.last_seq[r.id] for r in rows} == dict(per_stream)
        again.unsubscribe(client, "s6")  # numbers are never reused
        assert again.subscribe(client, "FILTER{Price > 3} Stock PUBLISH Later").id == "s7"
    finally:
        again.close()
        shards.stop()


def test_a_query_pinned_to_a_key_value_runs_on_the_shard_owning_it_alone(tmp_path: Path) -> None:
    client = Clients(Limits(100, 10_000, 2, 10)).anonymous
    rise = (
        "FILTER{{Name = '{}'}} Stock "
        "NEXT{{$1.Name = $2.Name AND $2.Price > 1.002 * $1.Price}} Stock"
    )
    names = ["AAPL", "MSFT", "GOOG", "TSLA", "FB"]  # shards 0, 1, 0, 1, 0
    texts = [rise.format(n) for n in names] + [
        "Stock NEXT{$1.Name = $2.Name AND $2.Price > 1.004 * $1.Price} Stock",  # every shard
        "FILTER{Price > 300} Stock",  # key-partitioned on any attribute: every shard
    ]
    events = sample_events()

    def per_shard(front: Front) -> list[int]:
        return [s.counters["subscriptions"] for s in front.server_stats().shards]

    shards = shard_pool(2)
    front = Front(Catalog(tmp_path / "c.sqlite", retention=100_000), shards)
    front.start()
    front.define_stream(client, STOCK)
    rows = front.subscribe_many(client, [SubscribeItem(t) for t in texts])
    assert [r.id for r in rows if isinstance(r, SubscriptionRow)] == [f"s{n}" for n in range(1, 8)]
    assert front.compiler.counters["bound"] == 3  # the rises after the second share one shape
    assert per_shard(front) == [3 + 2, 2 + 2]
    bound = [s.counters["queries_bound"] for s in front.server_stats().shards]
    assert bound == [1, 0]  # FB, the third rise on shard 0, is bound from its shape
    front.publish(client, pb.PublishRequest(events=[to_event(e) for e in events[:1000]]))
    front.close()
    shards.stop()

    shards = shard_pool(2)  # a restart pins them again
    front = Front(Catalog(tmp_path / "c.sqlite", retention=100_000), shards)
    front.start()
    try:
        assert per_shard(front) == [5, 4]
        front.unsubscribe(client, "s2")
        assert per_shard(front) == [5, 3]
        last = events[-1].t1
        front.publish(
            client, pb.PublishRequest(events=[to_event(e) for e in events[1000:]], watermark=last)
        )
        expected = expected_lines([(f"s{n + 1}", t) for n, t in enumerate(texts)], events)
        got: Counter[str] = Counter()
        for sub in front.registry.live:
            stream = front.listen(client, [], {sub: 0}, lambda: True)
            batches = map(pb.AlertBatch.FromString, stream)
            got.update(alert_line(a) for a in islice(alerts(batches), front.registry.last_seq[sub]))
            stream.close()
        expected = Counter({k: v for k, v in expected.items() if '"stream": "s2"' not in k})
        assert normalized(got) == normalized(expected)
        assert all(front.registry.last_seq[s] > 0 for s in front.registry.live)
    finally:
        front.close()
        shards.stop()


def test_unnamed_queries_compile_outside_the_lock_under_the_id_they_get(front: Front) -> None:
    client = Clients(Limits(100, 10_000, 2, 10)).anonymous
    front.define_stream(client, STOCK)
    plain = [SubscribeItem(f"FILTER{{Price > {p}}} Stock") for p in range(4)]
    rows = front.subscribe_many(client, plain)
    assert [(r.id, r.stream) for r in rows] == [(f"s{n}", f"s{n}") for n in range(1, 5)]
    assert front.counters["compiled_under_lock"] == 0
    # the second item fails only under the lock (its name is taken), so the ids guessed for
    # the two after it are one too high: they are compiled again, under the ids they get
    taken = SubscribeItem("FILTER{Price > 9} Stock PUBLISH s1")
    rows = front.subscribe_many(client, [plain[0], taken, plain[1], plain[2]])
    assert isinstance(rows[1], FrontError) and rows[1].code == "ALREADY_EXISTS"
    assert [(r.id, r.stream) for r in rows if not isinstance(r, FrontError)] == [
        ("s5", "s5"),
        ("s6", "s6"),
        ("s7", "s7"),
    ]
    assert front.counters["compiled_under_lock"] == 2
    front.registry.check_valid()


def test_an_idle_listen_stream_does_not_poll_while_other_clients_get_alerts(
    front: Front,
) -> None:
    limits = Limits(10, 10_000, 2, 10)
    quiet, busy = Client("quiet", limits), Client("busy", limits)
    front.define_stream(quiet, STOCK)
    front.subscribe(busy, EVERY)
    stream = front.listen(quiet, [], {}, lambda: True)
    reader = threading.Thread(target=next, args=(stream, None), daemon=True)
    reader.start()
    events = [to_event(e) for e in sample_events()[:200]]
    front.publish(busy, pb.PublishRequest(events=events, watermark=events[-1].t1))
    time.sleep(0.3)
    before = front.counters["listen_polls"]
    time.sleep(1.5)  # no new alert: the stream waits (0.5 s wake-ups), it does not spin
    assert front.counters["listen_polls"] - before <= 5
    assert front.registry.last_seq[front.subscriptions(busy)[0].id] == 200


def _alerts_across_a_restart(tmp_path: Path, name: str, text: str) -> tuple[int, int]:
    """Subscribe ``text`` on two shards, publish the sample's first 1,000 quotes, restart the
    front and shards, publish the rest: (the alerts it made, the alerts an uninterrupted
    run makes)."""
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    events = [to_event(e) for e in sample_events()]
    shards = shard_pool(2)
    front = Front(Catalog(tmp_path / "c.sqlite", retention=100), shards)
    front.start()
    front.define_stream(client, STOCK)
    subscription = front.subscribe(client, text)
    front.publish(client, pb.PublishRequest(events=events[:1000]))
    front.close()
    shards.stop()
    shards = shard_pool(2)
    again = Front(Catalog(tmp_path / "c.sqlite", retention=100), shards)
    again.start()
    try:
        again.publish(client, pb.PublishRequest(events=events[1000:], watermark=events[-1].t1))
        expected = expected_lines([(name, text)], [trusted_event(e) for e in events])
        return again.registry.last_seq[subscription.id], sum(expected.values())
    finally:
        again.close()
        shards.stop()


def test_a_pattern_under_after_match_skip_publishes_one_alert_per_episode_across_a_restart(
    tmp_path: Path,
) -> None:
    """Matches held at the restart (their window not yet passed) and each stock's bound come
    back: the alerts are those of an uninterrupted run, one per fall, but for the 6 episodes
    still held when the sample ends: a server's input does not end, where the finite run
    (``cesar run``'s) publishes them when its file does."""
    recipe = (ROOT / "docs" / "cookbook.md").read_text().split("### 23.")[1].split("\n## ")[0]
    text = recipe.split("```sase\n")[-1].split("```")[0]
    assert "AFTER MATCH SKIP PAST LAST ROW" in text
    assert _alerts_across_a_restart(tmp_path, "falls", text) == (260, 266)


def test_a_query_reading_a_window_sees_it_whole_across_a_restart(tmp_path: Path) -> None:
    """Cookbook recipe 24 on two shards (it is key-partitioned on Name, as its window is):
    the windows' events outlive the restart, so the alerts are an uninterrupted run's."""
    cookbook = (ROOT / "docs" / "cookbook.md").read_text()
    text = cookbook.split("### 24.")[1].split("```cel\n")[1].split("```")[0]
    assert _alerts_across_a_restart(tmp_path, "above", text) == (240, 240)


def test_a_pattern_with_or_runs_on_two_shards_across_a_restart(tmp_path: Path) -> None:
    """Cookbook recipe 27 (a SEQ holding an OR, key-partitioned on Name): its alternatives'
    automata, each publishing its stream, come back from the catalog, and the alerts are an
    uninterrupted run's."""
    cookbook = (ROOT / "docs" / "cookbook.md").read_text()
    text = cookbook.split("### 27.")[1].split("```sase\n")[1].split("```")[0]
    assert " OR(" in text
    assert _alerts_across_a_restart(tmp_path, "outcomes", text) == (87, 87)


@contextmanager
def an_apply_held(front: Front) -> Iterator[tuple[Client, Ticket]]:
    """A stream, a subscription to every event, and an Apply in flight to a shard stopped
    (SIGSTOP) until the block ends, so the apply lasts as long as the test wants."""
    client = Clients(Limits(10, 10_000, 2, 10)).anonymous
    front.define_stream(client, STOCK)
    front.subscribe(client, EVERY)
    events = [to_event(e) for e in sample_events()[:100]]
    front.publish(client, pb.PublishRequest(events=events))
    shard = front.shards.processes[0].pid
    os.kill(shard, signal.SIGSTOP)
    try:
        ticket = front.begin(client, pb.PublishRequest(watermark=events[-1].t1))
        assert isinstance(ticket, Ticket) and ticket.applying is not None
        yield client, ticket
    finally:
        os.kill(shard, signal.SIGCONT)


def test_stats_callers_while_one_is_queued_share_it(front: Front) -> None:
    """A client polling Stats cannot pile Stats calls on a shard between two applies: callers
    while one is queued and unanswered share it, each with its own copy of the answers, as
    long as no other call was sent to the shard since (then a new call is queued behind it);
    once it is answered the next caller asks again."""
    answered: list[pb.StatsResponse] = []
    with an_apply_held(front) as (client, ticket):
        callers = [
            threading.Thread(target=lambda: answered.append(front.server_stats())) for _ in range(4)
        ]
        for caller in callers:
            caller.start()
        time.sleep(0.2)
        queued = front.shards.stats()
        assert front.shards.stats() is queued
        front.subscribe(client, "FILTER{Price > 1} Stock PUBLISH Above")  # its Install queued
        behind = front.shards.stats()
        assert behind is not queued  # a new call sees the install; the old one would not
        assert front.shards.stats() is behind
    assert ticket.result().accepted == 0
    for caller in callers:
        caller.join(30)
    assert len(answered) == 4
    assert all(a.shards == answered[0].shards for a in answered)
    assert answered[0].shards[0].counters["epochs"] >= 1
    first, second = queued.answers(), queued.answers()
    assert first == second and first[0] is not second[0]
    assert behind.answers()[0].counters["subscriptions"] == first[0].counters["subscriptions"] + 1
    assert front.shards.stats() is not behind  # answered: the next caller asks again


def test_a_stats_call_waiting_behind_an_apply_holds_no_other_call(front: Front) -> None:
    """Stats queues behind the Apply in flight on each shard; it must wait for it without
    the front's lock, or every call that takes the lock (publishes, ListStreams, GetRouting,
    the idle checkpoint) waits for the rest of that apply."""
    answered: list[pb.StatsResponse] = []
    with an_apply_held(front) as (client, ticket):
        asking = threading.Thread(target=lambda: answered.append(front.stats(client)))
        asking.start()
        listed: list[list[str]] = []
        listing = threading.Thread(
            target=lambda: listed.append([row.name for row, _ in front.stream_rows(client)])
        )
        time.sleep(0.2)  # the Stats call queued behind the Apply
        listing.start()
        listing.join(30)
        assert listed == [["Every", "Stock"]]  # answered while the apply waits
        assert ticket.applying is not None
        assert asking.is_alive() and not ticket.applying.calls[0][1].done()
    assert ticket.result().accepted == 0
    asking.join()
    assert answered[0].shards[0].counters["epochs"] >= 1


def test_an_unsubscribe_behind_an_apply_holds_no_other_call(front: Front) -> None:
    """Unsubscribe answers once the subscription is out of the registry and the catalog; its
    shards' Remove follows the calls in flight in order, so a shard busy with a long apply
    holds neither the unsubscribing client nor, through the front's lock, anyone else."""
    with an_apply_held(front) as (client, ticket):
        gone = front.subscribe(client, "FILTER{Price > 1} Stock PUBLISH Above")
        answered = threading.Event()
        leaving = threading.Thread(
            target=lambda: (front.unsubscribe(client, gone.id), answered.set())
        )
        leaving.start()
        assert answered.wait(30)  # while the shard is still stopped
        assert gone.id not in front.registry.live
        assert [row.name for row, _ in front.stream_rows(client)] == ["Every", "Stock"]
        assert ticket.applying is not None and not ticket.applying.calls[0][1].done()
    assert ticket.result().accepted == 0
    counts = [s.counters["subscriptions"] for s in front.server_stats().shards]
    assert counts == [1]  # the install and the remove both reached the shard, in order
