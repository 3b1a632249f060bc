"""Every byte and second a client causes is bounded, and whatever the server stores, it restarts.

One test per budget of docs/operations.md ("Budgets"), each through the
public API against real ``cesar serve`` (and ``cesar shard``) processes: the
abuse is refused or capped with an error naming its budget, other clients
are unharmed, and the server restarts from what it stored and serves.
"""

from __future__ import annotations

import json
import random
import re
import secrets
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path

import grpc
import pyarrow as pa
import pytest

from cesar.automata.schema import Event
from cesar.perf.serverproc import (
    QUERIES,
    Server,
    alert_line,
    collect,
    expected_lines,
    listed,
    normalized,
    publish,
    quote,
    sample_events,
    status_of,
    subscribe,
)
from cesar.server.host import snapshots
from cesar.server.wire.client import Connection
from cesar.v1 import cesar_pb2 as pb

CESAR = Path(sys.executable).with_name("cesar")
INVALID = grpc.StatusCode.INVALID_ARGUMENT
BLOB = "Blob(body:string)"


def restarts_and_serves(server: Server) -> None:
    """Stop ``server``, start it again on what it stored, and subscribe and publish there."""
    assert server.stop() == 0
    server.start()
    conn = server.connect()
    sub = subscribe(conn, "FILTER{Price > 100} Stock", secrets.token_hex(4).join("ab"))
    reply = conn.stub.PublishBatch(
        pb.PublishRequest(events=[quote(t) for t in (29_000_000, 29_000_001)]),
        metadata=conn.metadata,
    )
    assert reply.accepted == 2, reply.rejected
    assert collect(conn, 1, pb.ListenRequest(after_seq={sub.id: 0}))


def blob_events(rows: int, size: int, start: int = 1) -> list[pb.Event]:
    return [
        pb.Event(stream="Blob", t0=t, t1=t, attributes={"body": pb.Value(string_value="x" * size)})
        for t in range(start, start + rows)
    ]


@pytest.mark.parametrize(
    "query",
    [
        "Stock" + " NEXT{} Stock" * 30,
        " UNION ".join(["Stock"] * 100),
    ],
    ids=["30 NEXT", "100 UNION"],
)
def test_a_query_too_deep_to_store_is_refused_and_the_server_restarts(
    tmp_path: Path, query: str
) -> None:
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        code, details = status_of(
            conn.stub.Subscribe, pb.SubscribeRequest(query=query), metadata=conn.metadata
        )
        assert code is INVALID and "nests more than 96 messages deep" in details
        batch = pb.SubscribeBatchRequest(subscriptions=[pb.SubscribeRequest(query=query)])
        reply = conn.stub.SubscribeBatch(batch, metadata=conn.metadata)
        assert reply.results[0].failure.code == "INVALID_ARGUMENT"
        assert listed(conn) == []
        restarts_and_serves(server)
    finally:
        server.stop()


def test_one_epoch_of_huge_alerts_is_capped_per_subscription_and_split_on_the_wire(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path / "data", "--stream", BLOB, shards=1).start()
    try:
        conn = server.connect()
        subs = [subscribe(conn, "Blob", f"Copy{i}") for i in range(2)]
        events = blob_events(400, 150_000)
        for event in events:
            event.t0 = event.t1 = 1  # one epoch: 400 alerts of 150 KB per subscription
        reply = conn.stub.PublishBatch(
            pb.PublishRequest(events=events, watermark=2), metadata=conn.metadata
        )
        assert reply.accepted == 400
        rows = {s.id: s for s in listed(conn)}
        for sub in subs:
            last = rows[sub.id].last_seq
            alerts = collect(conn, last, pb.ListenRequest(after_seq={sub.id: 0}))
            sent = [a for a in alerts if a.HasField("event")]
            notices = [a.notice for a in alerts if a.notice]
            assert len(notices) == 1 and "16777216 bytes" in notices[0], notices
            assert 100 <= len(sent) <= 112, len(sent)  # 16 MiB of 150 KB alerts
        restarts_and_serves(server)
    finally:
        server.stop()


def test_unlimited_alert_bytes_still_travel_in_messages_under_the_transport_limit(
    tmp_path: Path,
) -> None:
    server = Server(
        tmp_path / "data", "--stream", BLOB, "--max-alert-bytes-per-epoch", "0", shards=1
    ).start()
    try:
        conn = server.connect()
        subs = [subscribe(conn, "Blob", f"Copy{i}") for i in range(5)]
        events = blob_events(400, 150_000)
        for event in events:
            event.t0 = event.t1 = 1
        reply = conn.stub.PublishBatch(
            pb.PublishRequest(events=events, watermark=2), metadata=conn.metadata
        )
        assert reply.accepted == 400  # 5 x 60 MB of alerts from one epoch: over 256 MiB
        rows = {s.id: s for s in listed(conn)}
        assert all(rows[s.id].last_seq == 400 for s in subs)
        assert server.process is not None and server.process.poll() is None
    finally:
        server.stop()


def test_an_epoch_bigger_than_a_message_reaches_its_shard_in_parts_and_replays(
    tmp_path: Path,
) -> None:
    server = Server(
        tmp_path / "data", "--stream", BLOB, "--max-alerts-per-epoch", "0", shards=1
    ).start()
    try:
        conn = server.connect()
        sub = subscribe(conn, "SELECT 1 AS One FROM Blob", "Ones")
        for k in range(5):  # 5 x 60 MB at one t1: one 300 MB epoch, over gRPC's 256 MiB
            events = blob_events(400, 150_000)
            for event in events:
                event.t0 = event.t1 = 1
            request = pb.PublishRequest(events=events, watermark=2 if k == 4 else 0)
            assert conn.stub.PublishBatch(request, metadata=conn.metadata).accepted == 400
        alerts = collect(conn, 2000, pb.ListenRequest(after_seq={sub.id: 0}))
        assert len(alerts) == 2000 and all(a.event.t1 == 1 for a in alerts)
        server.kill9()  # no checkpoint since: the restart replays the 300 MB epoch from the log
        server.start()
        conn = server.connect()
        assert {s.id: s.last_seq for s in listed(conn)}[sub.id] == 2000
        restarts_and_serves(server)
    finally:
        server.stop()


def zstd_arrow(rows: int, size: int) -> bytes:
    table = pa.table(
        {
            "stream": ["Blob"] * rows,
            "t0": list(range(1, rows + 1)),
            "t1": list(range(1, rows + 1)),
            "Blob/body": ["x" * size] * rows,
        }
    )
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def test_compressed_uploads_are_bounded_by_their_decompressed_size(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--stream", BLOB).start()
    try:
        conn = server.connect()
        subscribe(conn, "Blob", "Copy")
        data = zstd_arrow(1000, 150_000)
        assert len(data) < 100_000
        for _ in range(5):
            code, details = status_of(
                conn.stub.PublishBatch,
                pb.PublishRequest(arrow_events=data),
                metadata=conn.metadata,
            )
            assert code is INVALID and "max_request_bytes" in details
        big = blob_events(500, 150_000)  # 75 MB of events, gzip-compressed by gRPC
        code, _ = status_of(
            conn.stub.PublishBatch,
            pb.PublishRequest(events=big),
            metadata=conn.metadata,
            compression=grpc.Compression.Gzip,
        )
        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (server.data_dir / "catalog.sqlite").stat().st_size < 5_000_000
        restarts_and_serves(server)
    finally:
        server.stop()


def test_work_does_not_outlive_its_client(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        seq = "PATTERN SEQ(" + ", ".join(f"Stock a{i}" for i in range(2000)) + ") WITHIN 10"
        started = time.monotonic()
        code, details = status_of(
            conn.stub.Subscribe, pb.SubscribeRequest(query=seq), metadata=conn.metadata
        )
        assert code is INVALID and "at most 64 components" in details
        assert time.monotonic() - started < 10
        heavy = [
            pb.SubscribeRequest(
                query=f"FILTER{{Price > {i}}} Stock NEXT{{$2.Price > $1.Price}} "
                f"Stock NEXT{{$2.Volume > {i}}} Stock"
            )
            for i in range(10_000)
        ]
        code, _ = status_of(
            conn.stub.SubscribeBatch,
            pb.SubscribeBatchRequest(subscriptions=heavy),
            metadata=conn.metadata,
            timeout=1.0,
        )
        assert code is grpc.StatusCode.DEADLINE_EXCEEDED
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the batch stops at its deadline, nothing stored
            try:
                conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata, timeout=1)
                break
            except grpc.RpcError:
                continue
        assert listed(conn) == []
        restarts_and_serves(server)
        assert listed(server.connect()) != []
    finally:
        server.stop()


def test_a_standalone_shard_applies_the_default_limits(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text(secrets.token_hex(16))
    shard = subprocess.Popen(
        [
            CESAR,
            "shard",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            str(tmp_path / "shard"),
            "--secret-file",
            str(secret),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert shard.stdout is not None
        line = shard.stdout.readline().split()
        assert line[0] == "ready", line
        address = f"127.0.0.1:{line[1]}"
        server = Server(
            tmp_path / "data", "--shard", address, "--shard-secret-file", str(secret), shards=1
        ).start()
        try:
            conn = server.connect()
            chatty = subscribe(conn, "Stock", "Chatty")
            calm = subscribe(conn, "FILTER{Price > 1000000} Stock")
            events = [
                Event.of(
                    "Stock", 29_000_000, 29_000_000, {"Name": "IBM", "Price": 1.0, "Volume": v}
                )
                for v in range(1001)
            ]
            publish(conn, events, batch=2000)  # one epoch: 1,001 alerts, the default is 1,000
            rows = {s.id: s for s in listed(conn)}
            got = collect(
                conn, rows[chatty.id].last_seq, pb.ListenRequest(after_seq={chatty.id: 0})
            )
            assert sum(a.HasField("event") for a in got) == 1000
            assert next(a.notice for a in got if a.notice).startswith("1001 alerts in one epoch")
            assert rows[calm.id].last_seq == 0
        finally:
            server.stop()
    finally:
        shard.terminate()
        shard.wait(30)


def test_an_ordinary_query_never_meets_the_default_budgets(tmp_path: Path) -> None:
    rng = random.Random(7)
    prices = {f"N{i}": 100.0 for i in range(50)}
    events = []
    for k in range(20_000):  # 50 names, each a random walk: thousands of open partial matches
        name = f"N{k % 50}"
        prices[name] *= 1 + rng.gauss(0, 0.003)
        t = 29_000_000 + k // 50
        values = {"Name": name, "Price": round(prices[name], 4), "Volume": 1}
        events.append(Event.of("Stock", t, t, values))
    query = "SELECT * FROM Stock NEXT{$1.Name = $2.Name AND $2.Price < 0.995 * $1.Price} Stock"
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        sub = subscribe(conn, query + " PUBLISH Drops")
        publish(conn, events, batch=5_000)
        last = next(s for s in listed(conn) if s.id == sub.id).last_seq
        got = collect(conn, last, pb.ListenRequest(after_seq={sub.id: 0}))
        assert not [a.notice for a in got if a.notice]
        want = normalized(expected_lines([("Drops", query + " PUBLISH Drops")], events))
        assert sum(want.values()) == 16_514
        assert Counter(alert_line(a) for a in got) == want
    finally:
        server.stop()


def test_a_snapshot_copied_from_another_shard_is_refused_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path / "data", "--snapshot-every-batches", "2", "--snapshots-kept", "2")
    server.start()
    conn = server.connect()
    query = QUERIES[1].read_text()
    drops = subscribe(conn, query)
    events = sample_events()
    publish(conn, events, batch=100)
    assert server.stop() == 0
    catalog = sqlite3.connect(server.data_dir / "catalog.sqlite")
    positions = [p for (p,) in catalog.execute("SELECT position FROM checkpoints ORDER BY 1")]
    catalog.close()
    shards = server.data_dir / "shards"
    foreign = snapshots.path_of(shards / "1", positions[1])
    snapshots.path_of(shards / "0", positions[1]).write_bytes(foreign.read_bytes())
    server.start()
    conn = server.connect()
    more = events[-1].t1 - events[0].t0 + 1
    publish(conn, [Event(e.stream, e.t0 + more, e.t1 + more, e.values) for e in events])
    (row,) = listed(conn)
    alerts = collect(conn, row.last_seq, pb.ListenRequest(after_seq={drops.id: 0}))
    assert server.stop() == 0
    shifted = [Event(e.stream, e.t0 + more, e.t1 + more, e.values) for e in events]
    name = row.stream
    want = normalized(expected_lines([(name, query)], [*events, *shifted]))
    assert Counter(alert_line(a) for a in alerts) == want
    logged = [json.loads(line) for line in server.log.read_text().splitlines()]
    refused = [r for r in logged if r.get("msg") == "checkpoint refused"]
    assert len(refused) == 1 and "another place" in refused[0]["reason"]


def test_a_snapshot_of_another_server_at_the_same_place_is_refused(tmp_path: Path) -> None:
    options = ("--snapshot-every-batches", "2", "--snapshots-kept", "2")
    ours, theirs = (Server(tmp_path / name, *options) for name in ("ours", "theirs"))
    query = QUERIES[1].read_text()
    events = sample_events()
    later = events[-1].t1 - events[0].t0 + 1
    rng = random.Random(3)  # their quotes: as many, at the same times, other prices
    their_events = [
        Event.of(e.stream, e.t0, e.t1, {**dict(e.values), "Price": rng.uniform(10, 20)})
        for e in events
    ]
    try:
        for server, stream in ((ours, events), (theirs, their_events)):
            server.start()
            conn = server.connect()
            subscribe(conn, query)
            publish(conn, stream, batch=100)
            assert server.stop() == 0
        catalog = sqlite3.connect(ours.data_dir / "catalog.sqlite")
        positions = [p for (p,) in catalog.execute("SELECT position FROM checkpoints ORDER BY 1")]
        catalog.close()
        for shard in ("0", "1"):  # their snapshots of our newest checkpoint's place and batch
            source = snapshots.path_of(theirs.data_dir / "shards" / shard, positions[-1])
            snapshots.path_of(ours.data_dir / "shards" / shard, positions[-1]).write_bytes(
                source.read_bytes()
            )
        ours.start()
        conn = ours.connect()
        shifted = [Event(e.stream, e.t0 + later, e.t1 + later, e.values) for e in events]
        publish(conn, shifted)
        (row,) = listed(conn)
        alerts = collect(conn, row.last_seq, pb.ListenRequest(after_seq={row.id: 0}))
        want = normalized(expected_lines([(row.stream, query)], [*events, *shifted]))
        assert Counter(alert_line(a) for a in alerts) == want
        logged = [json.loads(line) for line in ours.log.read_text().splitlines()]
        refused = [r for r in logged if r.get("msg") == "checkpoint refused"]
        assert len(refused) == 1 and "written by another server" in refused[0]["reason"]
        restarts_and_serves(ours)
    finally:
        ours.stop()
        theirs.stop()


def test_an_exponential_recomputation_is_stopped_at_its_budget(tmp_path: Path) -> None:
    pattern = (
        "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_any_match(a[], b) "
        "{ [Name] AND b.Volume > 999 } WITHIN 19 PLAN recompute PUBLISH Runaway"
    )
    server = Server(tmp_path / "data", "--stream", BLOB).start()
    try:
        conn = server.connect()
        runaway = subscribe(conn, pattern)
        other = subscribe(conn, "FILTER{body = 'hi'} Blob", "Greetings")
        rng = random.Random(1)
        for t in range(1, 120):  # each quote a trigger or not: 2^k matches over k buffered
            trigger_or_not = quote(t, 1.0, rng.choice([10, 2000]))
            hello = pb.Event(
                stream="Blob", t0=t, t1=t, attributes={"body": pb.Value(string_value="hi")}
            )
            reply = conn.stub.PublishBatch(
                pb.PublishRequest(events=[trigger_or_not, hello]), metadata=conn.metadata
            )
            assert reply.accepted == 2
        rows = {s.id: s for s in listed(conn)}
        assert rows[other.id].last_seq >= 118
        alerts = collect(
            conn, rows[runaway.id].last_seq, pb.ListenRequest(after_seq={runaway.id: 0})
        )
        notices = [a.notice for a in alerts if "max_steps_per_epoch" in a.notice]
        assert len(notices) == 1, notices
        stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
        assert any("recompute" in s.plans.get(runaway.id, "") for s in stats.shards)
        restarts_and_serves(server)
    finally:
        server.stop()


def test_a_huge_batch_is_taken_in_turns_and_a_small_one_goes_between(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--stream", "Tick(n:int)").start()
    try:
        bulk, small = server.connect(), server.connect()
        subscribe(bulk, "FILTER{Price > 400} Stock")
        events = [
            pb.Event(
                stream="Stock",
                t0=29_000_000 + i // 100,
                t1=29_000_000 + i // 100,
                attributes={
                    "Name": pb.Value(string_value=f"N{i % 50}"),
                    "Price": pb.Value(float_value=float(i % 500)),
                    "Volume": pb.Value(int_value=i),
                },
            )
            for i in range(100_000)
        ]
        huge = pb.PublishRequest(events=events, idempotency_key="huge")
        replies: list[pb.PublishResponse] = []
        sender = threading.Thread(
            target=lambda: replies.append(bulk.stub.PublishBatch(huge, metadata=bulk.metadata))
        )
        sender.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the huge request's first turns are logged
            stats = small.stub.Stats(pb.StatsRequest(), metadata=small.metadata)
            if stats.front["batches"] >= 3:
                break
        tick = pb.Event(stream="Tick", t0=1, t1=1, attributes={"n": pb.Value(int_value=1)})
        mine = small.stub.PublishBatch(pb.PublishRequest(events=[tick]), metadata=small.metadata)
        sender.join()
        (reply,) = replies
        assert reply.accepted == 100_000 and not reply.rejected
        assert mine.accepted == 1 and 3 < mine.batch < reply.batch  # between two turns
        again = bulk.stub.PublishBatch(huge, metadata=bulk.metadata)
        assert again.duplicate and again.accepted == 100_000 and again.batch == reply.batch
    finally:
        server.stop()


def test_metric_labels_come_from_a_closed_set(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--metrics-port", "0").start()
    try:
        assert server.process is not None and server.process.stdout is not None
        line = server.process.stdout.readline().split()
        conn = server.connect()
        for round_ in range(4):  # rejected events naming made-up attributes, or streams
            made_up = {f"x{round_}_{i}_{'y' * 200}": pb.Value(int_value=i) for i in range(2_000)}
            stream = "Stock" if round_ < 3 else "Made_up_" + "z" * 200
            event = pb.Event(stream=stream, t0=1, t1=1, attributes=made_up)
            reply = conn.stub.PublishBatch(
                pb.PublishRequest(events=[event]), metadata=conn.metadata
            )
            assert reply.rejected
        page = urllib.request.urlopen(line[1], timeout=30).read().decode()
        assert len(page) < 200_000
        pattern = r'cesar_front_rejections_total\{field="([^"]*)",kind="[^"]*",stream="([^"]*)"'
        found = re.findall(pattern, page)  # labels in name order, as prometheus_client writes
        assert {stream for _, stream in found} == {"Stock", ""}
        labels = {field for field, _ in found}
        assert labels and labels <= {"stream", "t0", "t1", "attributes"}
    finally:
        server.stop()


def test_names_and_sizes_a_restart_would_refuse_are_refused_first(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        for query, expected in (
            ("Stock PUBLISH " + "P" * 60_000, "characters"),
            ("SELECT " + ", ".join(f"Price AS p{i}" for i in range(300)) + " FROM Stock", "300"),
        ):
            code, details = status_of(
                conn.stub.Subscribe, pb.SubscribeRequest(query=query), metadata=conn.metadata
            )
            assert code in (INVALID, grpc.StatusCode.RESOURCE_EXHAUSTED), details
            assert expected in details
        code, details = status_of(
            conn.stub.Explain,
            pb.ExplainRequest(query="FILTER{Price > 1} Stock " + " " * 70_000),
            metadata=conn.metadata,
        )
        assert code is grpc.StatusCode.RESOURCE_EXHAUSTED and "max_query_bytes" in details
        sub = subscribe(conn, "FILTER{Price > 1} Stock")
        code, details = status_of(
            lambda r, metadata: list(conn.stub.Listen(r, metadata=metadata, timeout=10)),
            pb.ListenRequest(after_seq={sub.id: 5}),
            metadata=conn.metadata,
        )
        assert code is grpc.StatusCode.OUT_OF_RANGE and "past its last alert" in details
        assert listed(conn) == [listed(conn)[0]]
        assert server.stop() == 0
        repair = subprocess.run(
            [
                CESAR,
                "repair-log",
                "--data-dir",
                str(server.data_dir),
                "--stream",
                "Nope",
                "--after",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert repair.returncode != 0 and "no input stream Nope" in repair.stderr
        restarts_and_serves(server)
    finally:
        server.stop()


def test_times_a_client_sends_cannot_jam_a_stream(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--stream", "Ticks(n:int)").start()
    try:
        conn = server.connect()

        def send(stream: str, t: int) -> pb.PublishResponse:
            event = (
                pb.Event(stream=stream, t0=t, t1=t, attributes={"n": pb.Value(int_value=1)})
                if stream == "Ticks"
                else quote(t, 1.0)
            )
            reply: pb.PublishResponse = conn.stub.PublishBatch(
                pb.PublishRequest(events=[event]), metadata=conn.metadata
            )
            return reply

        first = send("Ticks", 2**62)  # the first event of an empty stream in the abstract tick
        assert first.accepted == 0 and "jumps" in first.rejected[0].reason
        assert send("Ticks", 1_000).accepted == 1
        assert send("Ticks", 1_001).accepted == 1
        replayed = 26_000_000  # a [min] stream replaying 2019: now + 23 h is far ahead of it
        assert send("Stock", replayed).accepted == 1
        ahead = int(time.time() / 60) + 23 * 60
        jump = send("Stock", ahead)
        assert jump.accepted == 0 and "ahead of the clock" in jump.rejected[0].reason
        assert send("Stock", replayed + 1).accepted == 1
    finally:
        server.stop()


def test_no_sequence_of_requests_moves_a_stream_past_the_clock_bound(tmp_path: Path) -> None:
    server = Server(
        tmp_path / "data",
        "--stream",
        "Live(n:int)[min]",
        "--stream",
        "Replay(n:int)[min]",
        "--replayed",
        "Replay",
    ).start()
    try:
        conn = server.connect()

        def send(stream: str, t: int) -> pb.PublishResponse:
            event = pb.Event(stream=stream, t0=t, t1=t, attributes={"n": pb.Value(int_value=1)})
            reply: pb.PublishResponse = conn.stub.PublishBatch(
                pb.PublishRequest(events=[event]), metadata=conn.metadata
            )
            return reply

        now = int(time.time() / 60)
        assert send("Live", now).accepted == 1
        for day in range(1, 31):  # each a day past the last: once a ratchet, now refused
            reply = send("Live", now + day * 1440)
            assert reply.accepted == 0 and "ahead of the clock" in reply.rejected[0].reason
            code, details = status_of(
                conn.stub.PublishBatch,
                pb.PublishRequest(watermark=now + day * 1440),
                metadata=conn.metadata,
            )
            assert code is INVALID and "time bound" in details
        assert send("Live", now + 1).accepted == 1  # real-time events are not late
        assert send("Replay", now).accepted == 1
        for day in range(1, 31):  # a stream declared replayed runs on its recording's time
            assert send("Replay", now + day * 1440).accepted == 1
        assert send("Replay", now + 32 * 1440).accepted == 0  # past --max-time-jump
        restarts_and_serves(server)
        conn = server.connect()
        assert send("Live", now + 2 * 1440).accepted == 0
    finally:
        server.stop()


def test_a_runaway_pattern_is_cut_at_its_work_budget_and_others_lose_nothing(
    tmp_path: Path,
) -> None:
    from cesar.perf.fairbench import stock_epoch

    server = Server(tmp_path / "data", "--stream", "Tick(n:int)").start()
    try:
        loud, calm = server.connect(), server.connect()
        five = "PATTERN AND(Stock a, Stock b, Stock c, Stock d, Stock e) WITHIN 1 HOUR"
        runaway = subscribe(loud, five + " PUBLISH Five")
        ticks = subscribe(calm, "FILTER{n > 0} Tick PUBLISH Ticks")
        start = 28_000_000  # 2023, in minutes; restarts_and_serves publishes later
        for k in range(8):  # unbudgeted, the fifth epoch took 56 s and the shard ignored SIGTERM
            request = pb.PublishRequest(events=stock_epoch(start + k), watermark=start + k)
            assert loud.stub.PublishBatch(request, metadata=loud.metadata).accepted == 5
            tick = pb.Event(
                stream="Tick", t0=k + 1, t1=k + 1, attributes={"n": pb.Value(int_value=1)}
            )
            assert (
                calm.stub.PublishBatch(
                    pb.PublishRequest(events=[tick]), metadata=calm.metadata
                ).accepted
                == 1
            )
        stats = loud.stub.Stats(pb.StatsRequest(), metadata=loud.metadata)
        counters = [dict(s.counters) for s in stats.shards]
        assert sum(c["cut"] for c in counters) == 7  # every epoch after the first
        assert max(c["instances"] for c in counters) <= 50_000
        rows = {s.id: s for s in listed(loud)}
        told = collect(loud, rows[runaway.id].last_seq, pb.ListenRequest(after_seq={runaway.id: 0}))
        notices = [a.notice for a in told if a.notice]
        assert len([n for n in notices if "max_steps_per_epoch" in n]) == 1
        assert len([n for n in notices if "max_instances_per_subscription" in n]) == 1
        assert rows[ticks.id].last_seq == 7  # the tick of the last epoch waits for its next
        server.kill9()  # the log replays the same cuts: no notice twice, no alert lost
        server.start()
        loud = server.connect()
        again = {s.id: s.last_seq for s in listed(loud)}
        assert again[runaway.id] == rows[runaway.id].last_seq  # it restarted and serves
        assert server.stop() == 0  # SIGTERM honoured
    finally:
        server.stop()


def test_a_batch_compiling_holds_no_other_clients_publish(tmp_path: Path) -> None:
    from cesar.perf.fairbench import distinct_patterns

    server = Server(tmp_path / "data", "--stream", "Tick(n:int)").start()
    try:
        loud, calm = server.connect(), server.connect()
        subscribe(calm, "FILTER{n > 0} Tick PUBLISH Ticks")
        batch = pb.SubscribeBatchRequest(
            subscriptions=[pb.SubscribeRequest(query=q) for q in distinct_patterns(80)]
        )
        replies: list[pb.SubscribeBatchResponse] = []
        sender = threading.Thread(
            target=lambda: replies.append(loud.stub.SubscribeBatch(batch, metadata=loud.metadata))
        )
        sender.start()
        published = 0
        while sender.is_alive():  # one-event publishes while it compiles (in its own process)
            tick = pb.Event(
                stream="Tick",
                t0=published + 1,
                t1=published + 1,
                attributes={"n": pb.Value(int_value=1)},
            )
            reply = calm.stub.PublishBatch(pb.PublishRequest(events=[tick]), metadata=calm.metadata)
            assert reply.accepted == 1
            published += 1
        sender.join()
        (answer,) = replies
        assert all(r.HasField("subscription") for r in answer.results)
        assert published >= 200, published  # compiled in the front's process: 33 for 150
        restarts_and_serves(server)
    finally:
        server.stop()


def test_events_held_in_open_epochs_are_bounded_per_client_and_restart_counted(
    tmp_path: Path,
) -> None:
    """A client sending one ``t1`` forever fills only its own budget of events waiting in open
    epochs (``max_open_epoch_events``): past it its requests with events are refused, naming
    the budget; another client's go on; a restart counts what it held again (the log keeps
    who published each batch); its watermark closes them and it publishes again."""
    tokens = tmp_path / "tokens"
    tokens.write_text("tl loud max_open_epoch_events=6\ntq quiet\n")
    server = Server(tmp_path / "data", "--tokens", str(tokens), "--stream", "Ticks(n:int)")
    server.start()
    try:
        loud, quiet = server.connect("tl"), server.connect("tq")
        subscribe(loud, "FILTER{Price > 100} Stock", "loud")
        subscribe(quiet, "FILTER{n > 0} Ticks", "quiet")
        t = 26_000_000

        def stock(conn: Connection, t1: int, count: int) -> pb.PublishResponse:
            reply: pb.PublishResponse = conn.stub.PublishBatch(
                pb.PublishRequest(events=[quote(t1)] * count), metadata=conn.metadata
            )
            return reply

        def held(conn: Connection) -> int:
            return conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata).front[
                "open_epoch_events"
            ]

        keyed = pb.PublishRequest(events=[quote(t)] * 2)
        while held(loud) < 6:
            keyed.idempotency_key += "k"
            reply = loud.stub.PublishBatch(keyed, metadata=loud.metadata)
            assert reply.accepted == 2 and not reply.duplicate
        before = held(loud)
        retried = loud.stub.PublishBatch(keyed, metadata=loud.metadata)  # the last key again
        assert retried.duplicate, "a batch already logged answers as before, over budget or not"
        code, details = status_of(stock, loud, t, 1)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"loud has {before} events waiting in open epochs" in details
        assert "max_open_epoch_events 6" in details
        ticks = [pb.Event(stream="Ticks", t0=5, t1=5, attributes={"n": pb.Value(int_value=1)})]
        for _ in range(3):  # the other client's one t1, past loud's budget: its own budget
            reply = quiet.stub.PublishBatch(
                pb.PublishRequest(events=ticks * 4), metadata=quiet.metadata
            )
            assert reply.accepted == 4
        assert held(quiet) >= 12 and held(loud) == before
        assert server.stop() == 0
        server.start()
        loud, quiet = server.connect("tl"), server.connect("tq")
        assert held(loud) == before and held(quiet) >= 12
        assert status_of(stock, loud, t, 1)[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
        closing = loud.stub.PublishBatch(pb.PublishRequest(watermark=t), metadata=loud.metadata)
        assert closing.accepted == 0 and held(loud) == 0
        assert stock(loud, t + 1, 1).accepted == 1
    finally:
        server.stop()
