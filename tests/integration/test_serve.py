"""``cesar serve`` as a process: crash recovery, resumable Listen, shutdown, TLS, retention."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import grpc

from cesar.perf.serverproc import (
    QUERIES,
    Server,
    alert_line,
    collect,
    expected_lines,
    normalized,
    publish,
    sample_events,
    status_of,
    subscribe,
    wait_gone,
)
from cesar.v1 import cesar_pb2 as pb

SOURCES = [(q.stem, q.read_text()) for q in QUERIES]


def _split(events):  # type: ignore[no-untyped-def]
    """Cut the sample in two, mid-epoch: the open epoch must survive the crash too."""
    half = len(events) // 2
    while events[half].t1 != events[half - 1].t1:
        half += 1
    return events[:half], events[half:]


def test_kill_9_then_restart_keeps_subscriptions_and_alerts_continue(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    conn = server.connect()
    subs = [subscribe(conn, text) for _, text in SOURCES]
    events = sample_events()
    first, second = _split(events)
    publish(conn, first, close=False)
    request = pb.ListenRequest(after_seq={s.id: 0 for s in subs})
    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    before = {s.id: s.last_seq for s in listing.subscriptions}
    received = collect(conn, sum(before.values()), request)
    shards = server.shard_pids()
    assert len(shards) == 2
    server.kill9()
    assert wait_gone(shards) == [], "shard processes outlived their front"

    server.start()
    conn = server.connect()
    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    assert [(s.id, s.stream, s.last_seq) for s in listing.subscriptions] == [
        (s.id, s.stream, before[s.id]) for s in subs
    ]
    publish(conn, second)
    expected = normalized(expected_lines(SOURCES, events))
    # the consumer reconnects with the last seq it saw of each subscription
    last = {s.id: max((a.seq for a in received if a.subscription == s.id), default=0) for s in subs}
    resumed = pb.ListenRequest(after_seq=last)
    rest = collect(conn, sum(expected.values()) - len(received), resumed)
    assert Counter(alert_line(a) for a in received + rest) == expected
    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    assert sum(s.last_seq for s in listing.subscriptions) == sum(expected.values())
    assert server.stop() == 0


def test_sigterm_drains_and_stops_the_shards(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    conn = server.connect()
    drops = subscribe(conn, QUERIES[1].read_text())
    events = sample_events()
    publish(conn, events)
    shards = server.shard_pids()
    assert server.stop() == 0
    assert wait_gone(shards) == []
    assert '"msg": "stopped"' in server.log.read_text()
    server.start()
    conn = server.connect()
    alerts = collect(conn, 3, pb.ListenRequest(after_seq={drops.id: 0}))
    assert [a.seq for a in alerts] == [1, 2, 3]
    server.stop()


def test_a_shutdown_that_hangs_still_ends_with_every_stack_logged() -> None:
    # the deadline armed at SIGTERM, here around a main thread that never returns
    code = (
        "import threading\n"
        "from cesar.server.front.serve import _arm_shutdown_deadline\n"
        "_arm_shutdown_deadline(0.5, {'code': 0})\n"
        "threading.Event().wait()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "shutdown did not finish" in done.stderr
    assert "<module>" in done.stderr  # the main thread's stack, where it hangs


def test_tls(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    server = Server(tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key)).start()
    try:
        secure = server.connect(tls_ca=cert)
        assert subscribe(secure, QUERIES[1].read_text()).id == "s1"
        plain = server.connect()
        code, _ = status_of(
            plain.stub.ListStreams, pb.ListStreamsRequest(), metadata=plain.metadata, timeout=5
        )
        assert code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    finally:
        server.stop()


def test_listen_resumes_within_retention_and_says_when_it_cannot(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--retention", "5").start()
    try:
        conn = server.connect()
        drops = subscribe(conn, QUERIES[1].read_text())
        publish(conn, sample_events())
        [row] = conn.stub.ListSubscriptions(
            pb.ListSubscriptionsRequest(), metadata=conn.metadata
        ).subscriptions
        last = row.last_seq
        assert last > 5
        kept = collect(conn, 3, pb.ListenRequest(after_seq={drops.id: last - 3}))
        assert [a.seq for a in kept] == [last - 2, last - 1, last]
        stream = conn.stub.Listen(pb.ListenRequest(after_seq={drops.id: 0}), metadata=conn.metadata)
        code, details = status_of(stream.next)
        assert code is grpc.StatusCode.OUT_OF_RANGE
        assert f"oldest kept is seq {last - 4}" in details
    finally:
        server.stop()


def test_instance_limits_reach_the_subscription_as_notices(tmp_path: Path) -> None:
    server = Server(tmp_path / "data", "--max-instances-per-node", "5").start()
    try:
        conn = server.connect()
        never = subscribe(conn, "Stock NEXT{$2.Price > 1000 * $1.Price} Stock PUBLISH Never")
        publish(conn, sample_events()[:60])
        [row] = conn.stub.ListSubscriptions(
            pb.ListSubscriptionsRequest(), metadata=conn.metadata
        ).subscriptions
        assert row.last_seq > 0
        alerts = collect(conn, row.last_seq, pb.ListenRequest(after_seq={never.id: 0}))
        assert all(a.notice and not a.HasField("event") for a in alerts)
        assert "dropped" in alerts[0].notice
        stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
        assert sum(s.counters["dropped"] for s in stats.shards) > 0
        assert sum(s.counters["instances"] for s in stats.shards) <= 5
    finally:
        server.stop()
