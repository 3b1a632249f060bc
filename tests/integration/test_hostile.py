"""A hostile client with a valid token cannot break the server or reach other clients.

Each test drives real ``cesar serve`` processes through the public API (or
starts them wrongly) and checks the answer is a clear error, the server lives,
and nothing of anyone else's is touched.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import grpc
import pyarrow as pa
import pytest

from cesar.automata.schema import TimeUnit
from cesar.perf.serverproc import (
    QUERIES,
    Server,
    alert_line,
    collect,
    expected_lines,
    listed,
    normalized,
    publish,
    sample_events,
    status_of,
    subscribe,
)
from cesar.server.wire.arrowevents import encode
from cesar.server.wire.client import list_streams
from cesar.server.wire.convert import to_event
from cesar.server.wire.eventfile import iso_time
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2, shard_pb2_grpc
from tests.integration.arrowfaults import FAULTS, WRONG_TYPE, arrow_request

CESAR = Path(sys.executable).with_name("cesar")
INVALID = grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    started = Server(tmp_path_factory.mktemp("hostile") / "data").start()
    yield started
    started.stop()


def with_tokens(tmp_path: Path, lines: str) -> Server:
    """A started server whose tokens file holds ``lines``."""
    tokens = tmp_path / "tokens"
    tokens.write_text(lines)
    return Server(tmp_path / "data", "--tokens", str(tokens)).start()


@pytest.mark.parametrize("name", ["bad name", "a-b", "9x", "日本", "select", "x" * 200])
def test_an_invalid_name_registers_nothing(server: Server, name: str) -> None:
    conn = server.connect()
    before = listed(conn)
    code, details = status_of(
        conn.stub.Subscribe, pb.SubscribeRequest(query="Stock", name=name), metadata=conn.metadata
    )
    assert code is INVALID and "name" in details
    assert listed(conn) == before
    streams = conn.stub.ListStreams(pb.ListStreamsRequest(), metadata=conn.metadata).streams
    assert name not in {s.name for s in streams}
    assert server.process is not None and server.process.poll() is None


def test_a_batch_with_a_bad_item_installs_the_good_ones_only(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        drops = "FILTER{Price > 0} Stock NEXT{$1.Name = $2.Name AND $2.Price < $1.Price} Stock"
        items = [
            pb.SubscribeRequest(query=drops, name="Good"),
            pb.SubscribeRequest(query="Stock", name="bad name"),
            pb.SubscribeRequest(query=drops, name="AlsoGood"),
        ]
        reply = conn.stub.SubscribeBatch(
            pb.SubscribeBatchRequest(subscriptions=items), metadata=conn.metadata
        )
        kinds = [r.WhichOneof("outcome") for r in reply.results]
        assert kinds == ["subscription", "failure", "subscription"]
        assert reply.results[1].failure.code == "INVALID_ARGUMENT"
        assert [s.stream for s in listed(conn)] == ["Good", "AlsoGood"]
        events = sample_events()[:400]
        publish(conn, events)
        want = expected_lines([("Good", drops + " PUBLISH Good")], events)
        resume = pb.ListenRequest(after_seq={s.id: 0 for s in listed(conn)})
        got = collect(conn, 2 * sum(want.values()), resume)
        assert {a.event.stream for a in got} == {"Good", "AlsoGood"}
        good = next(s for s in listed(conn) if s.stream == "Good")
        made = sum(want.values())  # one published batch: a stored row of alerts (or a few)
        for after in (1, made // 2, made - 1):  # a resume inside a row skips its first alerts
            request = pb.ListenRequest(after_seq={good.id: after})
            resumed = [a.seq for a in collect(conn, made - after, request)]
            assert resumed == list(range(after + 1, made + 1)), after
        code, _ = status_of(
            conn.stub.Unsubscribe, pb.UnsubscribeRequest(id="s9"), metadata=conn.metadata
        )
        assert code is grpc.StatusCode.NOT_FOUND
        for sub in listed(conn):  # every registered subscription is on its shards
            conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=sub.id), metadata=conn.metadata)
        assert server.process is not None and server.process.poll() is None
    finally:
        server.stop()


def test_idempotency_keys_belong_to_their_client(tmp_path: Path) -> None:
    server = with_tokens(tmp_path, "tok-a alice\ntok-b bob\n")
    try:
        alice, bob = server.connect("tok-a"), server.connect("tok-b")
        events = [to_event(e) for e in sample_events()[:5]]
        request = pb.PublishRequest(events=events, idempotency_key="batch-1")
        first = alice.stub.PublishBatch(request, metadata=alice.metadata)
        other = bob.stub.PublishBatch(request, metadata=bob.metadata)
        again = alice.stub.PublishBatch(request, metadata=alice.metadata)
        assert (first.duplicate, other.duplicate, again.duplicate) == (False, False, True)
        assert other.accepted == first.accepted == 5 and again.batch == first.batch
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("FILTER{" + "(" * 300 + "Price > 1" + ")" * 300 + "} Stock", "nest deeper than 64"),
        ("(" * 500 + "Stock" + ")" * 500, "nest deeper than 64"),
        ("FILTER{Price > " + " + ".join(["1"] * 6000) + "} Stock", "nests too deeply"),
        ("FILTER{Price > 1e999} Stock", "out of range"),
        ("FILTER{" + " AND ".join(f"Price > {i}" for i in range(3000)) + " AND } Stock", "line 1"),
    ],
    ids=["brackets", "streams", "terms", "infinity", "long-line"],
)
def test_bad_queries_get_their_cause_not_a_crash(server: Server, query: str, expected: str) -> None:
    conn = server.connect()
    code, details = status_of(
        conn.stub.Subscribe, pb.SubscribeRequest(query=query), metadata=conn.metadata
    )
    assert code is INVALID and expected in details
    assert len(details) < 1000  # the excerpt is a window around the column, not the line
    assert server.process is not None and server.process.poll() is None


def test_bad_algebra_and_undecodable_requests_are_invalid_arguments(server: Server) -> None:
    conn = server.connect()
    scope = pb.Algebra()
    compare = scope.select.predicate.compare
    compare.op, compare.right.constant.int_value = ">", 1
    compare.left.attribute.name, compare.left.attribute.scope = "Price", 99  # type: ignore[assignment]
    scope.select.input.stream.name = "Stock"
    nan = pb.Algebra()
    nan.CopyFrom(scope)
    nan.select.predicate.compare.left.attribute.scope = pb.SCOPE_EVENT
    nan.select.predicate.compare.right.constant.float_value = float("nan")
    for algebra, expected in ((scope, "unknown scope 99"), (nan, "not a finite number")):
        code, details = status_of(
            conn.stub.Subscribe, pb.SubscribeRequest(algebra=algebra), metadata=conn.metadata
        )
        assert code is INVALID and expected in details
    raw = grpc.insecure_channel(server.address).unary_unary(
        "/cesar.v1.Cesar/Subscribe",
        request_serializer=lambda data: data,
        response_deserializer=lambda data: data,
    )
    for data in (b"\x0a\x03\xff\xfe\x41", b"\x22" + b"\x80" * 10):
        code, details = status_of(raw, data, metadata=conn.metadata)
        assert code is INVALID and "not a valid cesar.v1.SubscribeRequest" in details
    code, details = status_of(
        conn.stub.DefineStream, pb.DefineStreamRequest(spec="SELECT(a:int)"), metadata=conn.metadata
    )
    assert code is INVALID and "keyword" in details
    assert server.process is not None and server.process.poll() is None


def test_runaway_queries_are_capped_with_one_notice_and_others_unharmed(tmp_path: Path) -> None:
    server = Server(
        tmp_path / "data", "--max-instances-per-subscription", "50", "--max-alerts-per-epoch", "3"
    ).start()
    try:
        conn = server.connect()
        never = subscribe(conn, "Stock NEXT{$2.Price > 1000 * $1.Price} Stock PUBLISH Never")
        chatty = subscribe(conn, "Stock FOLD{,,} Stock PUBLISH Chatty")
        dear = "FILTER{Price > 500} Stock"
        calm = subscribe(conn, dear + " PUBLISH Calm")
        events = sample_events()[:300]
        publish(conn, events)
        rows = {s.id: s for s in listed(conn)}
        notices = collect(conn, rows[never.id].last_seq, pb.ListenRequest(after_seq={never.id: 0}))
        assert len(notices) == 1 and "exceeded 50 live instances" in notices[0].notice
        chat = collect(conn, rows[chatty.id].last_seq, pb.ListenRequest(after_seq={chatty.id: 0}))
        told = [a for a in chat if a.notice]
        assert len(told) <= 2 and "only the first 3" in told[0].notice
        per_epoch: dict[int, int] = {}
        for alert in chat:
            if alert.HasField("event"):
                per_epoch[alert.event.t1] = per_epoch.get(alert.event.t1, 0) + 1
        assert max(per_epoch.values()) <= 3
        calm_alerts = collect(
            conn, rows[calm.id].last_seq, pb.ListenRequest(after_seq={calm.id: 0})
        )
        want = normalized(expected_lines([("Calm", dear + " PUBLISH Calm")], events))
        assert Counter(alert_line(a) for a in calm_alerts) == want
        stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
        assert sum(s.counters["alerts_dropped"] for s in stats.shards) > 0
    finally:
        server.stop()


def test_the_shard_port_answers_only_the_front(server: Server) -> None:
    log = server.log.read_text()
    ports = [int(p) for p in re.findall(r'"msg": "shard started".*?"port": (\d+)', log)]
    assert ports
    channel = grpc.insecure_channel(f"127.0.0.1:{ports[-1]}")
    stub = shard_pb2_grpc.ShardStub(channel)
    for call, request in (
        (stub.Remove, shard_pb2.RemoveRequest(lane="global", subscription="s1")),
        (lambda r, metadata: list(stub.Apply(r, metadata=metadata)), shard_pb2.ApplyRequest()),
    ):
        code, _ = status_of(call, request, metadata=(("authorization", "Bearer guess"),))
        assert code is grpc.StatusCode.UNAUTHENTICATED
    assert server.process is not None and server.process.poll() is None


def serve(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``cesar serve`` that must refuse to start: its exit status and stderr."""
    command = [str(CESAR), "serve", "--data-dir", str(data_dir), "--shards", "1", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_one_server_per_port_and_per_data_directory(server: Server, tmp_path: Path) -> None:
    port = server.address.rsplit(":", 1)[1]
    taken = serve(tmp_path / "other", "--port", port)
    assert taken.returncode == 2 and "port is in use" in taken.stderr
    locked = serve(server.data_dir, "--port", "0")
    assert locked.returncode == 2 and "one server per data directory" in locked.stderr
    assert server.process is not None and server.process.poll() is None


def test_an_unusable_catalog_stops_start_up_with_the_restore_procedure(tmp_path: Path) -> None:
    empty, junk = tmp_path / "empty", tmp_path / "junk"
    for folder, content in ((empty, b""), (junk, b"not a database" * 100)):
        folder.mkdir()
        (folder / "catalog.sqlite").write_bytes(content)
        result = serve(folder, "--port", "0")
        assert result.returncode == 2 and "restore" in result.stderr
        assert "Traceback" not in result.stderr
    broken = Server(tmp_path / "broken").start()
    publish(broken.connect(), sample_events()[:10])
    broken.stop()
    db = sqlite3.connect(tmp_path / "broken" / "catalog.sqlite")
    db.execute("UPDATE batches SET payload = x'ffffffff' WHERE number = 1")
    db.commit()
    db.close()
    result = serve(tmp_path / "broken", "--port", "0")
    assert result.returncode == 2 and "batch 1 of the event log" in result.stderr


def test_tls_with_a_foreign_key_and_an_open_address_are_told_plainly(tmp_path: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", tmp_path / "a.key", "-out", tmp_path / "a.pem"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["openssl", "genrsa", "-out", tmp_path / "b.key", "2048"], check=True, capture_output=True
    )
    result = serve(
        tmp_path / "tls", "--port", "0",
        "--tls-cert", str(tmp_path / "a.pem"), "--tls-key", str(tmp_path / "b.key"),
    )  # fmt: skip
    assert result.returncode == 2 and "is the key the certificate's?" in result.stderr
    assert "Traceback" not in result.stderr
    open_server = Server(tmp_path / "open", "--host", "0.0.0.0").start()
    open_server.stop()
    assert "without --tokens" in open_server.log.read_text()


def test_published_streams_are_private_until_shared(tmp_path: Path) -> None:
    server = with_tokens(tmp_path, "tok-a alice\ntok-b bob\ntok-f spark scope=feed\n")
    try:
        alice, bob, feed = server.connect("tok-a"), server.connect("tok-b"), server.connect("tok-f")
        pairs = subscribe(alice, "Stock NEXT{$1.Name = $2.Name} Stock PUBLISH Pairs")
        reader = "FILTER{Price_1 > 0} Pairs"
        for call, request in (
            (bob.stub.Subscribe, pb.SubscribeRequest(query=reader)),
            (bob.stub.Explain, pb.ExplainRequest(query=reader)),
        ):
            code, details = status_of(call, request, metadata=bob.metadata)
            assert code is INVALID and "unknown stream Pairs" in details and pairs.id not in details
        code, details = status_of(
            bob.stub.Subscribe,
            pb.SubscribeRequest(query="Stock PUBLISH Pairs"),
            metadata=bob.metadata,
        )
        assert code is grpc.StatusCode.ALREADY_EXISTS and "alice" not in details
        listing = bob.stub.ListStreams(pb.ListStreamsRequest(), metadata=bob.metadata).streams
        assert [s.name for s in listing] == ["Stock"]
        shared = alice.stub.ShareStream(
            pb.ShareStreamRequest(stream="Pairs", readers=["bob"]), metadata=alice.metadata
        )
        assert list(shared.shared_with) == ["bob"]
        mine = subscribe(bob, reader)
        code, details = status_of(
            alice.stub.Unsubscribe, pb.UnsubscribeRequest(id=pairs.id), metadata=alice.metadata
        )
        assert code is grpc.StatusCode.FAILED_PRECONDITION and "client bob" in details
        assert mine.id not in details
        code, _ = status_of(
            alice.stub.ShareStream, pb.ShareStreamRequest(stream="Pairs"), metadata=alice.metadata
        )
        assert code is grpc.StatusCode.FAILED_PRECONDITION
        code, _ = status_of(
            bob.stub.ShareStream, pb.ShareStreamRequest(stream="Pairs"), metadata=bob.metadata
        )
        assert code is grpc.StatusCode.NOT_FOUND
        code, _ = status_of(bob.stub.GetRouting, pb.GetRoutingRequest(), metadata=bob.metadata)
        assert code is grpc.StatusCode.PERMISSION_DENIED
        assert feed.stub.GetRouting(pb.GetRoutingRequest(), metadata=feed.metadata).shards == 2
        routed = pb.PublishRequest(events=[to_event(sample_events()[0])], shard=0, shards=2)
        code, _ = status_of(bob.stub.PublishBatch, routed, metadata=bob.metadata)
        assert code is grpc.StatusCode.PERMISSION_DENIED
    finally:
        server.stop()


def test_streams_are_bounded_per_client_and_deletable_by_their_owner(tmp_path: Path) -> None:
    server = with_tokens(tmp_path, "tok-a alice max_streams=2\ntok-b bob\n")
    try:
        alice, bob = server.connect("tok-a"), server.connect("tok-b")
        define = alice.stub.DefineStream
        for name in ("A", "B"):
            define(pb.DefineStreamRequest(spec=f"{name}(x:int)"), metadata=alice.metadata)
        code, _ = status_of(
            define, pb.DefineStreamRequest(spec="C(x:int)"), metadata=alice.metadata
        )
        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        code, _ = status_of(
            bob.stub.DeleteStream, pb.DeleteStreamRequest(name="A"), metadata=bob.metadata
        )
        assert code is grpc.StatusCode.NOT_FOUND
        subscribe(alice, "FILTER{x > 1} A")
        code, _ = status_of(
            alice.stub.DeleteStream, pb.DeleteStreamRequest(name="A"), metadata=alice.metadata
        )
        assert code is grpc.StatusCode.FAILED_PRECONDITION
        alice.stub.DeleteStream(pb.DeleteStreamRequest(name="B"), metadata=alice.metadata)
        define(pb.DefineStreamRequest(spec="C(x:int)"), metadata=alice.metadata)
        spec = "Wide(" + ",".join(f"a{i}:int" for i in range(300)) + ")"
        code, details = status_of(
            define, pb.DefineStreamRequest(spec=spec), metadata=alice.metadata
        )
        assert code is INVALID and "at most 256" in details
    finally:
        server.stop()


def test_oversized_publish_requests_are_refused_whole(server: Server) -> None:
    conn = server.connect()
    event = to_event(sample_events()[0])
    code, details = status_of(
        conn.stub.PublishBatch,
        pb.PublishRequest(events=[event] * 100_001),
        metadata=conn.metadata,
    )
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED and "100000" in details
    rows = 100_001
    table = pa.table(
        {
            "stream": ["Stock"] * rows,
            "t0": pa.array([1] * rows, pa.int64()),
            "t1": pa.array([1] * rows, pa.int64()),
        }
    )
    code, details = status_of(
        conn.stub.PublishBatch,
        pb.PublishRequest(arrow_events=encode(table)),
        metadata=conn.metadata,
    )
    assert code is INVALID and "more than 100000 rows" in details


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_vectorized_check_refuses_its_row_with_its_field_and_reason(
    server: Server, fault: str
) -> None:
    """A client's Arrow request and a routed piece alike: the bad row alone is refused, at
    its index, with the field and reason the protobuf path gives."""
    conn = server.connect()
    bad, field, reason = FAULTS[fault]
    for shard in (None, 1):
        reply = conn.stub.PublishBatch(arrow_request(bad, shard), metadata=conn.metadata)
        rejected = [r for r in reply.rejected if r.index == 1]
        assert len(rejected) == 1, (fault, shard, reply)
        assert rejected[0].field == field and rejected[0].reason.startswith(reason), reply
    code, details = status_of(conn.stub.PublishBatch, WRONG_TYPE, metadata=conn.metadata)
    assert code is INVALID and "column 'Stock/Price' holds string; expected float" in details


def test_one_far_future_timestamp_cannot_block_intake(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--max-time-jump", "3600").start()
    try:
        conn = server.connect()
        events = [to_event(e) for e in sample_events()[:12]]
        publish_batch = conn.stub.PublishBatch
        reply = publish_batch(pb.PublishRequest(events=events[:6]), metadata=conn.metadata)
        assert reply.accepted == 6
        wild = [pb.Event(), pb.Event()]
        for event, t1 in zip(wild, (2**63 - 1, events[5].t1 * 60_000), strict=True):
            event.CopyFrom(events[6])
            event.t0 = event.t1 = t1  # the end of time; milliseconds in a [min] stream
        reply = publish_batch(pb.PublishRequest(events=wild), metadata=conn.metadata)
        assert reply.accepted == 0 and len(reply.rejected) == 2
        assert all(r.field == "t1" and "jumps more than 3600 s" in r.reason for r in reply.rejected)
        # a watermark is a promise about every stream: bounded the same way, whole request refused
        far = pb.PublishRequest(events=events[6:8], watermark=2**62)
        code, details = status_of(publish_batch, far, metadata=conn.metadata)
        assert code == INVALID and "3600 s" in details
        assert "watermark 4611686018427387904 is ahead of every stream's" in details
        reply = publish_batch(pb.PublishRequest(events=events[6:]), metadata=conn.metadata)
        assert reply.accepted == 6 and not reply.rejected  # later events are not late
    finally:
        server.stop()


def test_a_stream_ahead_in_time_makes_only_its_own_clock_group_late(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        metadata = conn.metadata
        conn.stub.DefineStream(
            pb.DefineStreamRequest(spec="Sensor(Id:string,Temp:float)[min]"), metadata=metadata
        )
        drops = subscribe(conn, QUERIES[1].read_text())
        subscribe(conn, "FILTER{Temp > 90} Sensor PUBLISH Hot")
        now = int(time.time() // 60)
        sensor = [
            pb.Event(
                stream="Sensor",
                t0=now + i,
                t1=now + i,
                attributes={"Id": pb.Value(string_value="a")},
            )
            for i in range(3)
        ]
        for event, temp in zip(sensor, (80.0, 95.0, 99.0), strict=True):
            event.attributes["Temp"].float_value = temp
        reply = conn.stub.PublishBatch(pb.PublishRequest(events=sensor[:2]), metadata=metadata)
        assert reply.accepted == 2
        # Stock is years behind Sensor, but no subscription reads the two together
        stock = sample_events()
        assert publish(conn, stock) == len(stock)
        expected = normalized(expected_lines([("drops", QUERIES[1].read_text())], stock))
        got = collect(conn, sum(expected.values()), pb.ListenRequest(after_seq={drops.id: 0}))
        assert Counter(alert_line(a) for a in got) == expected

        both = subscribe(conn, "Stock NEXT{$2.Temp > 90} Sensor PUBLISH Both")  # one clock now
        one = to_event(stock[-1])
        one.t0 = one.t1 = stock[-1].t1 + 1
        reply = conn.stub.PublishBatch(pb.PublishRequest(events=[one]), metadata=metadata)
        assert reply.accepted == 0 and "late" in reply.rejected[0].reason
        conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=both.id), metadata=metadata)
        server.stop()
        server.start()  # groups only merge: they survive the subscription and a restart
        conn = server.connect()
        reply = conn.stub.PublishBatch(pb.PublishRequest(events=[one]), metadata=metadata)
        assert reply.accepted == 0 and "late" in reply.rejected[0].reason
        reply = conn.stub.PublishBatch(pb.PublishRequest(events=sensor[2:]), metadata=metadata)
        assert reply.accepted == 1
    finally:
        server.stop()


def test_repair_log_is_the_way_back_from_an_accepted_wrong_timestamp(tmp_path: Path) -> None:
    """With checkpoints every 2 batches (the log compacted behind them): the one taken after
    the wrong event is forgotten, the start replays from the one before it."""
    server = Server(tmp_path / "data", "--snapshot-every-batches", "2").start()
    stock = sample_events()
    half = len(stock) // 2
    while stock[half].t1 == stock[half - 1].t1:
        half += 1
    good, rest = stock[:half], stock[half:]
    try:
        conn = server.connect()
        drops = subscribe(conn, QUERIES[1].read_text())
        assert publish(conn, good) == len(good)
        wrong = to_event(good[-1])
        wrong.t0 = wrong.t1 = good[-1].t1 + 600  # ten hours ahead: within --max-time-jump
        wrong.attributes["Price"].float_value = 1.0
        conn.stub.PublishBatch(pb.PublishRequest(events=[wrong]), metadata=conn.metadata)
        late = conn.stub.PublishBatch(
            pb.PublishRequest(events=[to_event(e) for e in rest[:5]]), metadata=conn.metadata
        )
        assert late.accepted == 0 and all("late" in r.reason for r in late.rejected)
        repair = [str(CESAR), "repair-log", "--data-dir", str(server.data_dir), "--stream"]
        after = iso_time(good[-1].t1, TimeUnit.MIN)  # a time as people write it
        assert after is not None
        repair += ["Stock", "--after", after]
        busy = subprocess.run(repair, capture_output=True, text=True, timeout=60, check=False)
        assert busy.returncode == 2 and "in use by cesar serve" in busy.stderr
    finally:
        server.stop()
    done = subprocess.run(repair, capture_output=True, text=True, timeout=60, check=True)
    assert f"dropped 1 events of Stock after t1 = {good[-1].t1} ({after})" in done.stdout
    catalog = sqlite3.connect(server.data_dir / "catalog.sqlite")
    compacted = catalog.execute("SELECT value FROM marks WHERE name = 'compacted'").fetchone()
    assert compacted == (2,)
    assert catalog.execute("SELECT position FROM checkpoints").fetchall() == [(2,)]
    catalog.close()
    server.start()
    try:
        conn = server.connect()
        assert publish(conn, rest) == len(rest)
        expected = normalized(expected_lines([("drops", QUERIES[1].read_text())], stock))
        [row] = listed(conn)
        got = collect(conn, row.last_seq, pb.ListenRequest(after_seq={drops.id: 0}))
        wrong_time = f'"t1": {wrong.t1}'
        kept = Counter(line for a in got if wrong_time not in (line := alert_line(a)))
        assert kept == expected
    finally:
        server.stop()


def test_stream_listings_come_in_bounded_pages(server: Server) -> None:
    conn = server.connect()
    wide = ",".join(f"attribute_number_{i:03d}:string" for i in range(250))
    for n in range(12):
        spec = f"Wide{n:02d}({wide})"
        conn.stub.DefineStream(pb.DefineStreamRequest(spec=spec), metadata=conn.metadata)
    first = conn.stub.ListStreams(pb.ListStreamsRequest(page_size=5), metadata=conn.metadata)
    assert len(first.streams) == 5 and first.next_page_token == first.streams[-1].name
    whole = list_streams(conn.stub, conn.metadata)
    names = [s.name for s in whole]
    assert names == sorted(set(names)) and {f"Wide{n:02d}" for n in range(12)} <= set(names)
    page = conn.stub.ListStreams(pb.ListStreamsRequest(), metadata=conn.metadata)
    assert page.ByteSize() <= (1 << 20) + 100_000
