"""``cesar serve`` as a process: crash recovery, resumable Listen, shutdown, TLS, retention."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import grpc
import pytest

from cesar.automata.schema import Event
from cesar.examples import QUERIES as EXAMPLE_QUERIES
from cesar.perf.serverproc import (
    CESAR,
    QUERIES,
    Server,
    alert_line,
    collect,
    expected_lines,
    normalized,
    publish,
    sample_events,
    scrape,
    status_of,
    subscribe,
    wait_gone,
)
from cesar.server.host import snapshots
from cesar.server.wire.client import publish_requests
from cesar.server.wire.convert import to_event
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
    server = Server(tmp_path / "data", "--plan-costs", "measure").start()
    conn = server.connect()
    drops = subscribe(conn, QUERIES[1].read_text())
    events = sample_events()
    publish(conn, events)
    shards = server.shard_pids()
    assert server.stop() == 0
    assert wait_gone(shards) == []
    log = server.log.read_text()
    assert '"msg": "stopped"' in log
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    measured = [r for r in records if r["msg"] == "plan constants measured"]
    given = [r for r in records if r["msg"] == "plan constants from the front"]
    assert len(measured) == 1 and len(given) == len(shards)  # the front measures once for all
    assert all(0 < r["chain"] <= 8 and 0 < r["look"] <= 8 for r in measured)
    assert all(
        (r["look"], r["chain"]) == (measured[0]["look"], measured[0]["chain"]) for r in given
    )
    server.args[-1] = "look=2.5,chain=0.5,recompute=0.25"  # pinned: the same plans each start
    server.start()
    conn = server.connect()
    alerts = collect(conn, 3, pb.ListenRequest(after_seq={drops.id: 0}))
    assert [a.seq for a in alerts] == [1, 2, 3]
    server.stop()
    later = server.log.read_text().splitlines()[len(log.splitlines()) :]
    records = [json.loads(line) for line in later if line.startswith("{")]
    pinned = [
        (r["look"], r["chain"], r["recompute"])
        for r in records
        if r["msg"] in ("plan constants given", "plan constants from the front")
    ]
    assert pinned == [(2.5, 0.5, 0.25)] * (1 + len(shards))
    assert not [r for r in records if r["msg"] == "plan constants measured"]


def _publish_until_stopped(
    server: Server, key: str, heard: Counter[tuple[str, str]], started: threading.Barrier
) -> None:
    """PublishBatch in a loop until the server's process ends, backing off after an error
    (20 ms doubling to 0.4 s) as gRPC clients do; tally each outcome in ``heard`` by code
    and whether the front said it is shutting down."""
    connection, backoff, events = server.connect(), 0.02, sample_events()
    started.wait(30)
    for i in range(100_000):
        if server.process is None or server.process.poll() is not None:
            return
        chunk = [to_event(e) for e in events[i % 50 * 10 :][:10]]
        request = pb.PublishRequest(events=chunk, idempotency_key=f"{key}-{i}")
        try:
            connection.stub.PublishBatch(request, metadata=connection.metadata)
            heard["OK", ""] += 1
            backoff = 0.02
        except grpc.RpcError as exc:
            said = "shutting down" if "shutting down" in exc.details() else "other"
            heard[exc.code().name, said] += 1
            time.sleep(backoff)
            backoff = min(2 * backoff, 0.4)


def test_calls_during_a_shutdown_are_answered_unavailable_never_cancelled(tmp_path: Path) -> None:
    """Four clients publishing through a SIGTERM, then through a shard's death: each call
    succeeds or gets UNAVAILABLE, and every client hears "shutting down" from the front
    itself, which drains until the calls pause, so that none reaches grpc-core as gRPC's own
    shutdown begins (such a call comes back CANCELLED, a status clients do not retry)."""
    server = Server(tmp_path / "data").start()
    subscribe(server.connect(), QUERIES[1].read_text())
    for stopping in ("sigterm", "shard"):
        heard: list[Counter[tuple[str, str]]] = [Counter() for _ in range(4)]
        started = threading.Barrier(len(heard) + 1)
        pumps = [
            threading.Thread(
                target=_publish_until_stopped, args=(server, f"{stopping}{k}", tally, started)
            )
            for k, tally in enumerate(heard)
        ]
        for thread in pumps:
            thread.start()
        started.wait(30)
        time.sleep(0.5)
        if stopping == "sigterm":
            assert server.stop() == 0
        else:
            os.kill(server.shard_pids()[0], signal.SIGKILL)
            assert server.process is not None and server.process.wait(60) == 1
        for thread in pumps:
            thread.join(60)
        for codes in heard:
            assert {code for code, _ in codes} <= {"OK", "UNAVAILABLE"}, (stopping, heard)
            assert codes["UNAVAILABLE", "shutting down"] > 0, (stopping, heard)
        assert sum(codes["OK", ""] for codes in heard) > 0
        server.start()
    assert server.stop() == 0


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
    server = Server(
        tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key), "--console-port", "0"
    ).start()
    try:
        secure = server.connect(tls_ca=cert)
        assert subscribe(secure, QUERIES[1].read_text()).id == "s1"
        assert server.process is not None and server.process.stdout is not None
        console = server.process.stdout.readline().split()[1]
        assert console.startswith("https://127.0.0.1:")  # the console's tokens are encrypted too
        trusted = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(console + "api/whoami", context=trusted, timeout=30) as page:
            assert json.loads(page.read()) == {"client": "anonymous", "admin": True}
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # no plain HTTP
            urllib.request.urlopen(console.replace("https", "http") + "api/whoami", timeout=10)
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
    server = Server(tmp_path / "data", "--max-instances-per-subscription", "5").start()
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


def test_kill_9_of_a_shard_or_the_front_12_times_with_snapshots(tmp_path: Path) -> None:
    """Snapshots every 3 batches, the log compacted behind them: kill -9 the front or a shard
    at random points while publishing (each after three batches more were acknowledged, so
    that on a busy machine, where a restart's first batches are slow, every kill after the
    first still finds a checkpoint), and while idle, 12 times; each restart resumes
    from the latest checkpoint, the client retries its batch under the same idempotency
    key, and the alerts are exactly ``cesar run``'s with no seq gap or duplicate — for a
    pattern the shards plan lazily too (its buffered quotes in the snapshots)."""
    server = Server(
        tmp_path / "data", "--snapshot-every-batches", "3", "--snapshots-kept", "2"
    ).start()
    conn = server.connect()
    sources = [*SOURCES, ("loud_fall", (EXAMPLE_QUERIES / "loud_fall.sase").read_text())]
    subs = [subscribe(conn, text) for _, text in sources]
    events = sample_events()
    requests = [
        pb.PublishRequest(events=[to_event(e) for e in events[i : i + 10]], idempotency_key=f"b{i}")
        for i in range(0, len(events), 10)
    ]
    requests[-1].watermark = events[-1].t1
    rng = random.Random(17)
    sent = 0
    for kill in range(12):
        for _ in range(3):  # a checkpoint's worth first, however slow a busy machine is
            if sent < len(requests):
                response = conn.stub.PublishBatch(requests[sent], metadata=conn.metadata)
                assert not response.rejected, response.rejected
                sent += 1
        victim = "front" if kill % 2 == 0 else "shard"
        shard = server.shard_pids()[-2:][rng.randrange(2)]
        timer = threading.Timer(
            rng.uniform(0.05, 0.5),
            server.process.send_signal if victim == "front" else os.kill,  # type: ignore[union-attr]
            (signal.SIGKILL,) if victim == "front" else (shard, signal.SIGKILL),
        )
        timer.start()
        try:
            while sent < len(requests):
                response = conn.stub.PublishBatch(requests[sent], metadata=conn.metadata)
                assert not response.rejected, response.rejected
                sent += 1
        except grpc.RpcError as exc:
            assert exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL), exc
        timer.join()
        assert server.process is not None
        assert server.process.wait(30) != 0
        server.start()
        conn = server.connect()
    while sent < len(requests):
        conn.stub.PublishBatch(requests[sent], metadata=conn.metadata)
        sent += 1
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    assert stats.front["log_compacted_to"] > 0 and stats.front["checkpoint_position"] > 0
    restored = [
        json.loads(line) for line in server.log.read_text().splitlines() if "checkpoint" in line
    ]
    assert sum(r.get("msg") == "checkpoint restored" for r in restored) >= 9
    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    total = sum(s.last_seq for s in listing.subscriptions)
    alerts = collect(conn, total, pb.ListenRequest(after_seq={s.id: 0 for s in subs}))
    for sub in subs:
        seqs = [a.seq for a in alerts if a.subscription == sub.id]
        assert seqs == list(range(1, len(seqs) + 1)), f"{sub.id}: seqs {seqs[:10]}…"
    assert Counter(alert_line(a) for a in alerts) == normalized(expected_lines(sources, events))
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    assert sum(shard.counters["planned"] for shard in stats.shards) >= 1
    assert server.stop() == 0


def _start_fails(server: Server) -> str:
    """Start ``server`` expecting it to refuse; what it printed on stderr."""
    process = subprocess.run(
        [str(CESAR), "serve", "--data-dir", str(server.data_dir), "--port", "0", *server.args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert process.returncode == 2, process
    return process.stderr


@pytest.mark.parametrize("value", ["0", "-5"])
def test_a_retention_below_one_alert_is_refused_at_start(tmp_path: Path, value: str) -> None:
    """A subscription's last seq is its newest stored alert's: a retention of none is refused
    rather than numbering alerts from 1 again after a restart."""
    stderr = _start_fails(Server(tmp_path / "data", "--retention", value))
    assert "--retention must be at least 1" in stderr


def test_restart_after_compaction_resumes_listen_and_skips_a_damaged_snapshot(
    tmp_path: Path,
) -> None:
    server = Server(tmp_path / "data", "--snapshot-every-batches", "2", "--snapshots-kept", "2")
    server.start()
    conn = server.connect()
    drops = subscribe(conn, QUERIES[1].read_text())
    events = sample_events()
    publish(conn, events, batch=100)
    [row] = conn.stub.ListSubscriptions(
        pb.ListSubscriptionsRequest(), metadata=conn.metadata
    ).subscriptions
    assert server.stop() == 0
    catalog = sqlite3.connect(server.data_dir / "catalog.sqlite")
    compacted = catalog.execute("SELECT value FROM marks WHERE name = 'compacted'").fetchone()[0]
    logged = catalog.execute("SELECT COUNT(*) FROM batches WHERE payload != x''").fetchone()[0]
    positions = [p for (p,) in catalog.execute("SELECT position FROM checkpoints ORDER BY 1")]
    catalog.close()
    assert compacted == positions[0] >= 20 and logged <= 4 and len(positions) == 2
    # the newest snapshot of shard 1 is damaged: the start falls back to the older checkpoint
    newest = snapshots.path_of(server.data_dir / "shards" / "1", positions[1])
    newest.write_bytes(newest.read_bytes()[:-10])
    server.start()
    conn = server.connect()
    resumed = collect(conn, row.last_seq - 1, pb.ListenRequest(after_seq={drops.id: 1}))
    assert [a.seq for a in resumed] == list(range(2, row.last_seq + 1))
    again = events[-1].t1 - events[-200].t0 + 1
    late = [Event(e.stream, e.t0 + again, e.t1 + again, e.values) for e in events[-200:]]
    publish(conn, late)
    assert server.stop() == 0
    restarts = [json.loads(line) for line in server.log.read_text().splitlines()]
    refused = [r for r in restarts if r.get("msg") == "checkpoint refused"]
    assert len(refused) == 1 and "damaged" in refused[0]["reason"]
    assert f"batch {positions[1]}: shard 1:" in refused[0]["reason"]
    # every checkpoint unusable and the log compacted: the start is refused, saying why
    for directory in (server.data_dir / "shards").iterdir():
        for path in directory.glob("*.snap"):
            path.write_bytes(b"CESAR-SNAPSHOT\n{}\n")
    stderr = _start_fails(server)
    assert "no usable checkpoint" in stderr and "compacted" in stderr, stderr


def _own_shard(address: str, data: Path, secret: Path, cert: Path, key: Path, *extra: str):  # type: ignore[no-untyped-def]
    """``cesar shard --listen ADDRESS`` with TLS; (process, port)."""
    process = subprocess.Popen(
        [
            *(str(CESAR), "shard", "--listen", address, "--data-dir", str(data)),
            *("--secret-file", str(secret), "--tls-cert", str(cert), "--tls-key", str(key)),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=open(data.parent / f"{data.name}.log", "a"),  # noqa: SIM115 - the child keeps it
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().split()
    assert line and line[0] == "ready", f"shard did not start at {address}"
    return process, int(line[1])


def _retrying(call, *args, **kwargs):  # type: ignore[no-untyped-def]
    """``call`` until it is not UNAVAILABLE (the front reloading its shards), up to 60 s."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return call(*args, **kwargs)
        except grpc.RpcError as exc:
            if exc.code() is not grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_shards_on_their_own_over_tls_survive_a_shard_restart(tmp_path: Path) -> None:
    """Two shards started on their own at 127.0.0.2 and 127.0.0.3 (TLS, a shared secret); one
    is killed with kill -9 mid-stream and started again: the front answers UNAVAILABLE, then
    reloads both from the latest checkpoint, and the alerts are exactly cesar run's."""
    cert, key, secret = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "secret"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=shards", "-addext", "subjectAltName=IP:127.0.0.2,IP:127.0.0.3",
         "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    secret.write_text("a shared secret of the front and its shards\n")
    first, port_a = _own_shard(
        "127.0.0.2:0", tmp_path / "a", secret, cert, key, "--metrics-port", "0"
    )
    assert first.stdout is not None
    first_metrics = first.stdout.readline().split()[1]
    assert first_metrics.startswith("http://127.0.0.2:"), first_metrics
    second, port_b = _own_shard("127.0.0.3:0", tmp_path / "b", secret, cert, key, "--index", "1")
    shards = ["--shard", f"127.0.0.2:{port_a}", "--shard", f"127.0.0.3:{port_b}"]
    tls = ["--shard-tls-ca", str(cert), "--snapshot-every-batches", "4"]
    wrong = tmp_path / "wrong"
    wrong.write_text("not the secret the shards were given")
    server = Server(tmp_path / "data", *shards, "--shard-secret-file", str(wrong), *tls)
    assert "does --shard-secret-file hold" in _start_fails(server)
    server = Server(tmp_path / "data", *shards, "--shard-secret-file", str(secret), *tls)
    server.start()
    try:
        conn = server.connect()
        subs = [subscribe(conn, text) for _, text in SOURCES]
        events = sample_events()
        requests = publish_requests(events, 100)
        half = len(requests) // 2
        for request in requests[:half]:
            conn.stub.PublishBatch(request, metadata=conn.metadata)
        second.kill()
        second.wait()
        second, _ = _own_shard(
            f"127.0.0.3:{port_b}", tmp_path / "b", secret, cert, key, "--index", "1"
        )
        for request in requests[half:]:
            _retrying(conn.stub.PublishBatch, request, metadata=conn.metadata)
        listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
        total = sum(s.last_seq for s in listing.subscriptions)
        alerts = collect(conn, total, pb.ListenRequest(after_seq={s.id: 0 for s in subs}))
        assert Counter(alert_line(a) for a in alerts) == normalized(expected_lines(SOURCES, events))
        for sub in subs:
            seqs = [a.seq for a in alerts if a.subscription == sub.id]
            assert seqs == list(range(1, len(seqs) + 1))
        records = [json.loads(line) for line in server.log.read_text().splitlines()]
        assert any(r.get("msg") == "shards reconnected and reloaded" for r in records)
        own = scrape(first_metrics)
        through_front = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata).shards[0]
        assert own['cesar_shard_events_total{shard="0"}'] == through_front.counters["events"] > 0
        assert own['cesar_shard_apply_seconds_count{shard="0"}'] > 0
        assert server.stop() == 0
    finally:
        for process in (first, second):
            process.terminate()
            process.wait(30)


def test_the_metrics_endpoint_moves_with_the_load(tmp_path: Path) -> None:
    """The front's endpoint (every shard's counters read over the links) and each child
    shard's own (``--shard-metrics-port 0``: any port, named in the shard's log)."""
    server = Server(tmp_path / "data", "--metrics-port", "0", "--shard-metrics-port", "0").start()
    assert server.process is not None and server.process.stdout is not None
    line = server.process.stdout.readline().split()
    assert line[0] == "metrics", line
    before = scrape(line[1])
    assert before["cesar_front_events_accepted_total"] == 0
    assert before['cesar_shard_nodes{shard="1"}'] == 0
    conn = server.connect()
    subscribe(conn, QUERIES[1].read_text())
    events = sample_events()
    middle = None
    for part in range(2):  # scraped while the sample is being published
        half = events[part * len(events) // 2 : (part + 1) * len(events) // 2]
        publish(conn, half, close=part == 1)
        middle = middle or scrape(line[1])
    late = conn.stub.PublishBatch(
        next(iter(publish_requests(events[:1], 1, close=False))), metadata=conn.metadata
    )
    assert late.rejected[0].reason.startswith("late")
    after = scrape(line[1])
    assert 0 < middle["cesar_front_events_accepted_total"] < len(events)
    assert after["cesar_front_events_accepted_total"] == len(events)
    assert after["cesar_front_alerts_total"] > 0 and after["cesar_front_subscriptions"] == 1
    assert after['cesar_front_rejections_total{field="t1",kind="late",stream="Stock"}'] == 1
    assert after["cesar_front_batch_seconds_count"] == after["cesar_front_batches_total"] == 7
    assert middle["cesar_front_batch_seconds_count"] == 3  # 500 + 500 + 170 of the first half
    shard_events = sum(v for k, v in after.items() if k.startswith("cesar_shard_events_total"))
    assert shard_events >= len(events)
    assert sum(v for k, v in after.items() if k.startswith("cesar_shard_nodes{")) > 0
    assert after["cesar_front_listen_lag_alerts"] == after["cesar_front_listen_lag_seconds"] == 0
    records = [json.loads(line) for line in server.log.read_text().splitlines()]
    shard_endpoints = {
        r["role"]: r["address"]
        for r in records
        if r.get("msg") == "metrics" and r["role"] != "front"
    }
    assert sorted(shard_endpoints) == ["shard-0", "shard-1"]
    for role, address in shard_endpoints.items():
        name = f'{{shard="{role[-1]}"}}'
        own = scrape(f"http://{address}/metrics")
        assert own[f"cesar_shard_events_total{name}"] == after[f"cesar_shard_events_total{name}"]
        assert own[f"cesar_shard_apply_seconds_count{name}"] > 0
    server.stop()


def test_an_idle_server_takes_its_checkpoint_and_a_restart_says_what_it_replays(
    tmp_path: Path,
) -> None:
    """A server that stops receiving batches still takes the checkpoint its
    --snapshot-every-seconds has due (it was checked only when a batch committed, so an idle
    server replayed its whole log after a crash, in silence); a restart logs what it has
    to replay before it serves."""
    server = Server(tmp_path / "data", "--snapshot-every-seconds", "1").start()
    try:
        conn = server.connect()
        subscribe(conn, SOURCES[0][1])
        publish(conn, sample_events()[:300], close=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
            if stats.front["checkpoints"] >= 1:
                break
            time.sleep(0.25)
        assert stats.front["checkpoints"] >= 1
        assert stats.front["checkpoint_position"] == stats.front["batches_logged"] > 0
        conn.close()
        server.kill9()
        server.start()
        loading = [
            json.loads(line)
            for line in server.log.read_text().splitlines()
            if '"loading catalog"' in line
        ]
        assert loading[-1]["batches_to_replay"] == 0  # the checkpoint holds every batch
    finally:
        server.stop()
