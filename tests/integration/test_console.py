"""The web console's HTTP API against a real server (front + 2 shards): every page and
endpoint shows a token only its own subscriptions and streams, errors are JSON with the
status of their code, and hostile requests are refused without hurting the server."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.schema import Event, parse_stream_spec
from cesar.client import Client
from cesar.perf.serverproc import (
    CESAR,
    QUERIES,
    STOCK,
    Server,
    expected_lines,
    normalized,
    sample_events,
)
from cesar.server.engine.workload import Workload
from cesar.server.wire.eventfile import event_json
from cesar.v1 import cesar_pb2 as pb

DROPS = QUERIES[1].read_text()


@pytest.fixture
def console(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    tokens = tmp_path / "tokens"
    tokens.write_text(
        "tok-a alice\ntok-b bob\ntok-root root scope=admin\ntok-feed spark scope=feed\n"
    )
    server = Server(tmp_path / "data", "--tokens", str(tokens), "--console-port", "0").start()
    try:
        yield server, console_url(server)
    finally:
        server.stop()


def console_url(server: Server) -> str:
    """The console's address, as the server printed it when it started."""
    assert server.process is not None and server.process.stdout is not None
    line = server.process.stdout.readline().split()
    assert line[0] == "console", line
    return line[1].rstrip("/")


def call(
    url: str, token: str | None = None, body: bytes | None = None
) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON or text, headers) of one request."""
    request = urllib.request.Request(url, data=body)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, raw, got = response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        status, raw, got = exc.code, exc.read(), dict(exc.headers)
    kind = got.get("Content-Type", "")
    return status, json.loads(raw) if kind == "application/json" else raw.decode(), got


def test_the_page_and_its_files_are_served_with_a_strict_policy(console) -> None:  # type: ignore[no-untyped-def]
    _, url = console
    status, page, headers = call(url + "/")
    assert status == 200 and "<title>cesar console</title>" in page
    assert headers["Content-Security-Policy"].startswith("default-src 'self'")
    assert '<script src="/static/console.js"' in page and "http" not in page.split("<body>")[0]
    for name in ("console.js", "console.css"):
        assert call(f"{url}/static/{name}")[0] == 200
    assert call(f"{url}/static/app.py", "tok-a")[0] == 404


def test_a_token_sees_only_its_own_subscriptions_and_streams(console) -> None:  # type: ignore[no-untyped-def]
    server, url = console
    with Client(server.address, token="tok-a") as alice:
        mine = alice.subscribe(DROPS)
    with Client(server.address, token="tok-b") as bob:
        theirs = bob.subscribe("FILTER{Price > 100}(Stock) PUBLISH Big")
    status, rows, _ = call(url + "/api/subscriptions", "tok-a")
    assert status == 200 and [r["id"] for r in rows] == [mine.id]
    assert rows[0]["placement"] == "key:Name" and rows[0]["owner"] == "alice"
    assert [r["id"] for r in call(url + "/api/subscriptions", "tok-b")[1]] == [theirs.id]
    assert [r["id"] for r in call(url + "/api/subscriptions", "tok-root")[1]] == [
        mine.id,
        theirs.id,
    ]
    status, error, _ = call(f"{url}/api/subscriptions/{mine.id}", "tok-b")
    assert (status, error["code"]) == (404, "NOT_FOUND")
    names = {s["name"] for s in call(url + "/api/streams", "tok-b")[1]}
    assert "Big" in names and "Drops" not in names and "Stock" in names
    over_drops = json.dumps({"query": "FILTER{After > 1}(Drops) PUBLISH Mine"}).encode()
    status, error, _ = call(url + "/api/explain", "tok-b", over_drops)  # alice's, private
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT") and "Drops" in error["message"]
    assert call(url + "/api/explain", "tok-a", over_drops)[0] == 200
    front = call(url + "/api/shards", "tok-b")[1]["front"]
    assert front["subscriptions"] == 1 and "events_accepted" not in front  # bob's own share
    assert call(url + "/api/whoami", "tok-root")[1] == {"client": "root", "admin": True}
    assert call(url + "/api/subscriptions")[0] == 401
    status, error, _ = call(url + "/api/subscriptions", "tok-feed")
    assert (status, error["code"]) == (403, "PERMISSION_DENIED")
    assert call(url + "/api/subscriptions", "tok-nobody")[0] == 401


def test_a_subscription_shows_the_automata_explain_json_shows(console, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server, url = console
    with Client(server.address, token="tok-a") as alice:
        sub = alice.subscribe(DROPS)
    status, shown, _ = call(f"{url}/api/subscriptions/{sub.id}", "tok-a")
    assert status == 200 and shown["query"] == DROPS and shown["stream"] == "Drops"
    explained = subprocess.run(
        [str(CESAR), "explain", "--json", "--stream", STOCK, str(QUERIES[1])],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    expected = json.loads(explained.stdout)
    for got, want in zip(shown["compiled"]["automata"], expected["automata"], strict=True):
        assert (got["nodes"], got["edges"]) == (want["nodes"], want["edges"])
    # its place in the merged DAG: key-partitioned, so on both shards, its edges alone
    assert {e["shard"] for e in shown["dag"]} == {0, 1}
    assert {e["sharers"] for e in shown["dag"]} == {1}
    with Client(server.address, token="tok-b") as bob:  # bob's drops by 1 %: the same shape
        bob.subscribe(DROPS.replace("0.998", "0.99").replace("Drops", "BigDrops"))
    shared = call(f"{url}/api/subscriptions/{sub.id}", "tok-a")[1]["dag"]
    kinds = [(e["kind"], e["stream"]) for e in shown["dag"]]
    assert [(e["kind"], e["stream"]) for e in shared] == kinds
    assert {e["sharers"] for e in shared} == {2}  # every edge shared, bob's id never shown
    assert "s2" not in json.dumps(shared)


def test_try_a_query_shows_the_compiled_form_or_the_error_with_its_caret(console) -> None:  # type: ignore[no-untyped-def]
    _, url = console
    body = json.dumps({"query": "FILTER{Price > 3}(Stock) PUBLISH Big"}).encode()
    status, compiled, _ = call(url + "/api/explain", "tok-a", body)
    assert status == 200 and compiled["publishes"].startswith("Big(")
    assert len(compiled["automata"][0]["nodes"]) >= 2
    body = json.dumps({"query": "FILTER{Price >}(Stock)"}).encode()
    status, error, _ = call(url + "/api/explain", "tok-a", body)
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT")
    assert error["message"].startswith("line 1, column 15: unexpected '}'; expected a term")
    assert error["message"].endswith("\n                ^")


def test_subscribing_from_the_console_is_subscribing_as_the_token(console) -> None:  # type: ignore[no-untyped-def]
    server, url = console
    body = json.dumps({"query": DROPS}).encode()
    status, made, _ = call(url + "/api/subscribe", "tok-a", body)
    assert status == 200 and (made["id"], made["owner"], made["stream"]) == ("s1", "alice", "Drops")
    with Client(server.address, token="tok-a") as alice:
        assert [s.id for s in alice.subscriptions()] == ["s1"]
    status, error, _ = call(url + "/api/subscribe", "tok-b", body)  # Drops is taken
    assert (status, error["code"]) == (409, "ALREADY_EXISTS")
    bad = json.dumps({"query": "FILTER{"}).encode()
    assert call(url + "/api/subscribe", "tok-a", bad)[1]["code"] == "INVALID_ARGUMENT"


def test_a_query_runs_on_the_bundled_sample_as_cesar_run_runs_it(console) -> None:  # type: ignore[no-untyped-def]
    _, url = console
    want = normalized(expected_lines([("drops", DROPS)], sample_events()))
    status, ran, _ = call(url + "/api/try", "tok-a", json.dumps({"query": DROPS}).encode())
    assert status == 200 and ran["quotes"] == 2340 and ran["alerts"] == sum(want.values())
    got: Counter[str] = Counter(json.dumps(alert) for alert in ran["shown"])
    assert normalized(got) == want
    many = json.dumps({"query": "FILTER{Price > 0}(Stock)"}).encode()
    status, ran, _ = call(url + "/api/try", "tok-a", many)
    assert (ran["alerts"], len(ran["shown"])) == (2340, 100)
    bad = json.dumps({"query": "FILTER{Price > 0}(Quote)"}).encode()
    status, error, _ = call(url + "/api/try", "tok-a", bad)
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT") and "Quote" in error["message"]


def test_a_query_runs_on_the_servers_recent_events_of_its_own_streams(console) -> None:  # type: ignore[no-untyped-def]
    """A stream the caller defined, quotes published to it: "Run on recent events" gives what
    cesar run gives on them (the issue's query over Quote, which the sample cannot run)."""
    server, url = console
    quote = "Quote(Name:string,Price:float,Volume:int)[min]"
    query = DROPS.replace("Stock", "Quote")
    events = [Event("Quote", e.t0, e.t1, e.values) for e in sample_events()]
    with Client(server.address, token="tok-a") as alice:
        alice.define_stream(quote)
        rows = [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in events]
        assert alice.publish("Quote", rows, batch=700).rejected == ()
        alice.subscribe(query)
    program = Workload.build([parse_stream_spec(quote)], [("drops", query)])
    schemas = {q.name: q.output for q in program.queries}
    want = Counter(event_json(e, schemas[e.stream]) for e in program.run(events, engine="engine"))
    body = json.dumps({"query": query.replace("PUBLISH Drops", "PUBLISH Tried"), "on": "recent"})
    status, ran, _ = call(url + "/api/try", "tok-a", body.encode())
    assert status == 200, ran
    assert (ran["source"], ran["quotes"], ran["alerts"]) == ("recent", 2340, sum(want.values()))
    shown = Counter(json.dumps({**a, "stream": "Drops"}) for a in ran["shown"])
    assert normalized(shown) == normalized(want)
    on_drops = json.dumps({"query": "FILTER{After < 100} Drops", "on": "recent"}).encode()
    status, error, _ = call(url + "/api/try", "tok-a", on_drops)
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT")
    assert error["message"].startswith("the query reads Drops, which subscription s1 publishes")
    status, error, _ = call(url + "/api/try", "tok-b", on_drops)  # Drops is alice's
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT") and "unknown stream Drops" in error[
        "message"
    ]


def test_a_subscriptions_runtime_shows_what_it_holds_against_its_budgets(console) -> None:  # type: ignore[no-untyped-def]
    """Half the day published: the rising runs alive are partial matches it holds on the
    shards (its key spreads it over both), against the server's default budgets."""
    server, url = console
    rising = QUERIES[0].read_text()
    events = sample_events()
    with Client(server.address, token="tok-a") as alice:
        sub = alice.subscribe(rising)
        rows = [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in events[: len(events) // 2]]
        alice.publish("Stock", rows)
        last_seq = alice.subscriptions()[0].last_seq
    status, now, _ = call(url + f"/api/subscriptions/{sub.id}/runtime", "tok-a")
    assert status == 200 and now["last_seq"] == last_seq > 0
    assert [r["shard"] for r in now["runtime"]] == [0, 1]
    assert sum(r["held"] for r in now["runtime"]) > 0
    assert sum(r["steps"] for r in now["runtime"]) > 0  # the latest epoch's, between epochs
    assert {(r["instance_limit"], r["step_limit"]) for r in now["runtime"]} == {(50_000, 50_000)}
    status, _, _ = call(url + f"/api/subscriptions/{sub.id}/runtime", "tok-b")
    assert status == 404  # bob's page of alice's subscription is no page at all


def test_hostile_requests_are_refused_and_the_server_serves_on(console) -> None:  # type: ignore[no-untyped-def]
    server, url = console
    huge = json.dumps({"query": "x" * 200_000}).encode()
    assert call(url + "/api/explain", "tok-a", huge)[1]["code"] == "PAYLOAD_TOO_LARGE"
    for body in (b"not json", b"[1, 2]", b'{"query": 5}', b"\xff\xfe"):
        status, error, _ = call(url + "/api/explain", "tok-a", body)
        assert (status, error["code"]) == (400, "INVALID_ARGUMENT"), body
    assert call(url + "/api/nothing", "tok-a")[0] == 404
    assert call(url + "/api/subscriptions/%00%2F..", "tok-a")[0] == 404
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as raw:
        raw.sendall(b"POST /api/explain HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")  # stalls
        assert call(url + "/api/whoami", "tok-a")[0] == 200  # others are served meanwhile
        assert raw.recv(100) == b""  # then its 10 s to send the request end: closed
    with Client(server.address, token="tok-a") as alice:
        assert alice.subscriptions() == []  # the gRPC side answers as before
    assert call(url + "/api/whoami", "tok-a")[0] == 200


def test_alert_streams_reset_before_their_headers_give_their_listen_slots_back(console) -> None:  # type: ignore[no-untyped-def]
    """64 browsers that ask for their alerts and reset the connection at once: each Listen
    slot comes back (before, each leaked for good and the 65th Listen was refused)."""
    server, url = console
    with Client(server.address, token="tok-a") as alice:
        alice.subscribe(DROPS)
    host, port = url.removeprefix("http://").split(":")
    request = b"GET /api/alerts HTTP/1.1\r\nAuthorization: Bearer tok-a\r\n\r\n"
    for _ in range(64):  # max_listens
        with socket.create_connection((host, int(port)), timeout=30) as raw:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            raw.sendall(request)  # and a reset at once: gone before the headers come
    deadline = time.monotonic() + 30
    while True:  # the console's threads see their peers gone, then give the slots back
        listens = call(url + "/api/shards", "tok-a")[1]["front"]["listens"]
        if listens == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert listens == 0
    with Client(server.address, token="tok-a") as alice, alice.listen(after=0, timeout=2) as one:
        assert list(one.batches()) == []  # a Listen is granted: nothing leaked
    assert server.stop() == 0
    server.start()
    assert call(console_url(server) + "/api/whoami", "tok-a")[0] == 200


def test_slow_connections_without_a_token_leave_the_console_answering(console) -> None:  # type: ignore[no-untyped-def]
    """40 connections each sending a header line every 2 s (more than the old 32 slots):
    others are answered meanwhile, and each slow one is cut once its request has taken
    10 s, however steadily it trickles."""
    server, url = console
    host, port = url.removeprefix("http://").split(":")
    slow = [socket.create_connection((host, int(port)), timeout=30) for _ in range(40)]
    try:
        for raw in slow:
            raw.sendall(b"GET /api/whoami HTTP/1.1\r\n")
        began = time.monotonic()
        cut = 0
        while time.monotonic() - began < 16 and cut < len(slow):
            assert call(url + "/api/whoami", "tok-a")[0] == 200  # answered meanwhile
            cut = 0
            for raw in slow:
                try:
                    raw.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    cut += 1
            time.sleep(1)
        assert cut == len(slow)  # each cut at its request's 10 s
    finally:
        for raw in slow:
            raw.close()
    status, error, _ = call(url + "/api/explain", "tok-a", b"[" * 30_000 + b"]" * 30_000)
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT") and "deep" in error["message"]
    status, error, _ = call(url + "/api/explain", "tok-a", b'{"query": "FILTER \\ud800"}')
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT") and "surrogate" in error["message"]
    runaway = json.dumps({"query": "PATTERN AND(Stock a, Stock b, Stock c, Stock d) PUBLISH F"})
    status, error, _ = call(url + "/api/try", "tok-a", runaway.encode())
    # Memory (512 MiB) or time (20 s), whichever comes first on a busy machine; each budget
    # alone: tests/unit/test_sample.py.
    assert (status, error["code"]) == (429, "RESOURCE_EXHAUSTED")
    assert "more than 512 MiB" in error["message"] or "more than 20 s" in error["message"]
    assert server.stop() == 0
    server.start()
    assert call(console_url(server) + "/api/whoami", "tok-a")[0] == 200


def test_live_alerts_stream_as_server_sent_events_resumed_after_a_seq(console) -> None:  # type: ignore[no-untyped-def]
    """The drops of the sample arrive as events whose data is ``cesar listen``'s line, in
    seq order; a stream resumed after seq 40 starts at 41; another token's subscription and a
    malformed resume point are refused before the stream starts."""
    server, url = console
    with Client(server.address, token="tok-a") as alice:
        sub = alice.subscribe(DROPS)
        rows = [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in sample_events()]
        alice.publish("Stock", rows)
    want = normalized(expected_lines([("drops", DROPS)], sample_events()))
    total = sum(want.values())

    def read(after: int, count: int) -> list[dict[str, Any]]:
        request = urllib.request.Request(f"{url}/api/alerts?after={sub.id}:{after}")
        request.add_header("Authorization", "Bearer tok-a")
        records: list[dict[str, Any]] = []
        with urllib.request.urlopen(request, timeout=30) as stream:
            assert stream.headers["Content-Type"] == "text/event-stream"
            while len(records) < count:
                line = stream.readline().decode()
                if line.startswith("data: "):
                    records.append(json.loads(line.removeprefix("data: ")))
        return records

    records = read(0, total)
    assert [r["seq"] for r in records] == list(range(1, total + 1))
    assert records[0]["time"].endswith("Z") and records[0]["stream"] == "Drops"
    got: Counter[str] = Counter()
    for record in records:
        line = {k: v for k, v in record.items() if k not in ("subscription", "seq")}
        got[json.dumps(line)] += 1
    assert normalized(got) == want
    assert [r["seq"] for r in read(40, total - 40)] == list(range(41, total + 1))
    page = call(f"{url}/api/subscriptions/{sub.id}", "tok-a")[1]
    assert [r["seq"] for r in page["recent"]] == list(range(total, total - 20, -1))
    assert page["recent"][0] == records[-1]  # the subscription's page shows the latest 20
    status, error, _ = call(f"{url}/api/alerts?subscription={sub.id}", "tok-b")
    assert (status, error["code"]) == (404, "NOT_FOUND")
    status, error, _ = call(f"{url}/api/alerts?after=s1", "tok-a")
    assert (status, error["code"]) == (400, "INVALID_ARGUMENT")


def query_body(query: str) -> bytes:
    return json.dumps({"query": query}).encode()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    post=st.booleans(),
    path=st.lists(
        st.sampled_from(["api", "subscriptions", "s1", "explain", "try", "subscribe", "alerts",
                         "static", "..", "%00", "whoami", "shards", "streams", "runtime",
                         "x" * 300]),
        max_size=4,
    ).map("/".join),
    query=st.text(max_size=30),
    body=st.binary(max_size=200)
    | st.text(max_size=80).map(query_body)
    | st.tuples(st.text(max_size=80), st.sampled_from(["recent", "sample", "x", ""])).map(
        lambda pair: json.dumps({"query": pair[0], "on": pair[1]}).encode()
    ),
)  # fmt: skip
def test_random_requests_never_fail_the_server(console, post, path, query, body) -> None:  # type: ignore[no-untyped-def]
    """Whatever a token's holder sends: an answer with a meaningful status, never a 500 or a
    dead server (a live stream's request is cut short by its timeout)."""
    _, url = console
    target = f"{url}/{path}?{urllib.request.quote(query)}"
    if path.startswith("api/alerts") and not post:
        return  # a live stream that would wait: its refusals are tested above
    status = call(target, "tok-a", body if post else None)[0]
    assert status in (200, 400, 401, 404, 409, 413, 429), (path, status)
    assert call(url + "/api/whoami", "tok-a")[0] == 200


def test_an_operator_sees_inflow_latency_backlog_and_checkpoints(tmp_path: Path) -> None:
    """The day published in batches of 500 with a checkpoint every 3, then a late event and
    one with a bad Price: the stream's events accepted and rejected by reason, the
    subscription's events in and alert latency, each shard's backlog and the checkpoints
    (the last two an admin's only)."""
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-a alice\ntok-root root scope=admin\n")
    server = Server(
        tmp_path / "data",
        "--tokens",
        str(tokens),
        "--console-port",
        "0",
        "--snapshot-every-batches",
        "3",
    ).start()
    try:
        url = console_url(server)
        events = sample_events()
        with Client(server.address, token="tok-a") as alice:
            sub = alice.subscribe(DROPS)
            rows = [{"t0": e.t0, "t1": e.t1, **e.attrs()} for e in events]
            assert alice.publish("Stock", rows, batch=500).rejected == ()
            last_seq = alice.subscriptions()[0].last_seq
        conn = server.connect("tok-a")
        late = pb.Event(stream="Stock", t0=events[0].t0, t1=events[0].t1)
        late.attributes["Name"].string_value = "IBM"
        late.attributes["Price"].float_value = 1.0
        late.attributes["Volume"].int_value = 1
        bad = pb.Event()
        bad.CopyFrom(late)
        bad.attributes["Price"].string_value = "high"
        reply = conn.stub.PublishBatch(
            pb.PublishRequest(events=[late, bad]), metadata=conn.metadata
        )
        assert [r.field for r in reply.rejected] == ["t1", "attributes.Price"]
        stock = {s["name"]: s for s in call(url + "/api/streams", "tok-a")[1]}["Stock"]
        assert stock["accepted"] == len(events)
        assert stock["settled_t1"] == events[-1].t1 == stock["newest_t1"]  # closed: the last
        assert stock["rejected"] == {"invalid attributes": 1, "late": 1}
        status, now, _ = call(url + f"/api/subscriptions/{sub.id}/runtime", "tok-a")
        assert status == 200 and now["events_in"] == len(events) and last_seq > 0
        latency = now["latency_ms"]
        assert 1 <= latency["batches"] <= 5 and 0 < latency["mean"] <= latency["peak"]
        assert latency["last"] <= latency["peak"]
        assert call(url + f"/api/subscriptions/{sub.id}", "tok-a")[1]["events_in"] == len(events)
        mine = call(url + "/api/shards", "tok-a")[1]
        assert "checkpoints" not in mine
        assert all("applies_in_flight" not in s.get("counters", {}) for s in mine["shards"])
        stats = call(url + "/api/shards", "tok-root")[1]
        positions = [c["position"] for c in stats["checkpoints"]]
        assert positions == sorted(positions, reverse=True) and positions[-1] == 3
        assert all(p % 3 == 0 for p in positions) and stats["checkpoints"][0]["bytes"] > 0
        assert stats["checkpoints"][0]["at"].endswith("Z")
        for shard in stats["shards"]:  # quiet now: nothing waits, nothing is in flight
            assert shard["counters"]["events_waiting"] == 0
            assert shard["counters"]["applies_in_flight"] == 0
    finally:
        server.stop()
