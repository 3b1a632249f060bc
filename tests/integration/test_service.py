"""The public API against a real server (front + 2 shards) over loopback gRPC."""

from __future__ import annotations

import threading
import time
from collections import Counter

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, parse_stream_spec
from cesar.perf.serverproc import (
    QUERIES,
    STOCK,
    Server,
    alert_line,
    collect,
    expected_lines,
    normalized,
    publish,
    sample_events,
    status_of,
    subscribe,
)
from cesar.server.front.service import SCOPES
from cesar.server.wire.algebra_proto import to_algebra
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb

SOURCES = [(q.stem, q.read_text()) for q in QUERIES]


def _resume_all(subs: list[pb.Subscription]) -> pb.ListenRequest:
    return pb.ListenRequest(after_seq={s.id: 0 for s in subs})


def _last_seqs(conn) -> dict[str, int]:  # type: ignore[no-untyped-def]
    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    return {s.id: s.last_seq for s in listing.subscriptions}


def test_alerts_equal_cesar_run_and_seqs_count_from_one(server: Server) -> None:
    conn = server.connect()
    subs = [subscribe(conn, text) for _, text in SOURCES]
    assert [s.placement.key_attribute for s in subs] == ["Name", "Name", "Name"]
    events = sample_events()
    assert publish(conn, events) == len(events)
    expected = normalized(expected_lines(SOURCES, events))
    total = sum(expected.values())
    assert total > 100
    alerts = collect(conn, total, _resume_all(subs))
    assert Counter(alert_line(a) for a in alerts) == expected
    assert sum(_last_seqs(conn).values()) == total  # nothing beyond what cesar run prints
    for sub in subs:
        seqs = [a.seq for a in alerts if a.subscription == sub.id]
        assert seqs == list(range(1, len(seqs) + 1))


def test_unsubscribe_stops_alerts_and_spares_the_others(server: Server) -> None:
    conn = server.connect()
    rising = subscribe(conn, QUERIES[0].read_text())
    drops = subscribe(conn, QUERIES[1].read_text())
    events = sample_events()
    half = len(events) // 2
    while events[half].t1 == events[half - 1].t1:
        half += 1
    publish(conn, events[:half])
    seqs = _last_seqs(conn)
    assert seqs[drops.id] == sum(expected_lines(SOURCES[1:2], events[:half]).values()) > 0
    conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=drops.id), metadata=conn.metadata)
    publish(conn, events[half:])
    assert set(_last_seqs(conn)) == {rising.id}
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    rising_all = sum(expected_lines(SOURCES[:1], events).values())
    assert _last_seqs(conn)[rising.id] == rising_all
    assert stats.front["alerts"] == rising_all + seqs[drops.id]
    code, _ = status_of(
        conn.stub.Listen(pb.ListenRequest(subscriptions=[drops.id]), metadata=conn.metadata).next
    )
    assert code is grpc.StatusCode.NOT_FOUND


def test_errors_users_can_act_on(server: Server) -> None:
    conn = server.connect()
    md = conn.metadata
    code, details = status_of(
        conn.stub.Subscribe, pb.SubscribeRequest(query="FILTER{Price >} Stock"), metadata=md
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "line 1, column 15" in details and "expected" in details
    code, details = status_of(
        conn.stub.Subscribe, pb.SubscribeRequest(query="FILTER{Pryce > 1} Stock"), metadata=md
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "Pryce" in details
    rising = subscribe(conn, QUERIES[0].read_text())
    code, details = status_of(
        conn.stub.Subscribe, pb.SubscribeRequest(query=QUERIES[0].read_text()), metadata=md
    )
    assert code is grpc.StatusCode.ALREADY_EXISTS
    assert f"subscription {rising.id} of client anonymous" in details
    subscribe(conn, QUERIES[1].read_text())
    reader = subscribe(conn, QUERIES[2].read_text())
    code, details = status_of(
        conn.stub.Unsubscribe, pb.UnsubscribeRequest(id=rising.id), metadata=md
    )
    assert code is grpc.StatusCode.FAILED_PRECONDITION and reader.id in details
    code, _ = status_of(conn.stub.Unsubscribe, pb.UnsubscribeRequest(id="s999"), metadata=md)
    assert code is grpc.StatusCode.NOT_FOUND
    code, details = status_of(
        conn.stub.DefineStream, pb.DefineStreamRequest(spec="Stock(A:int)"), metadata=md
    )
    assert code is grpc.StatusCode.ALREADY_EXISTS and "input stream" in details
    code, _ = status_of(conn.stub.DefineStream, pb.DefineStreamRequest(spec="Bad("), metadata=md)
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=reader.id), metadata=md)
    conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=rising.id), metadata=md)


def test_malformed_and_late_events_are_rejected_with_reasons_and_the_rest_applied(
    server: Server,
) -> None:
    conn = server.connect()
    drops = subscribe(conn, QUERIES[1].read_text())
    events = sample_events()[:600]
    good = [to_event(e) for e in events]
    bad = [
        pb.Event(stream="Stock", t0=1, t1=1, attributes={"Name": pb.Value(string_value="X")}),
        pb.Event(stream="Nope", t0=1, t1=1),
        pb.Event(
            stream="Stock",
            t0=5,
            t1=4,
            attributes={
                "Name": pb.Value(string_value="X"),
                "Price": pb.Value(float_value=1.0),
                "Volume": pb.Value(int_value=1),
            },
        ),
        pb.Event(
            stream="Stock",
            t1=events[0].t1,
            point=True,
            attributes={
                "Name": pb.Value(int_value=3),
                "Price": pb.Value(float_value=1.0),
                "Volume": pb.Value(int_value=1),
            },
        ),
        pb.Event(stream="Drops", t0=1, t1=1),
    ]
    first = conn.stub.PublishBatch(
        pb.PublishRequest(events=bad[:2] + good[:300] + bad[2:]), metadata=conn.metadata
    )
    assert first.accepted == 300
    reasons = {(r.index, r.field): r.reason for r in first.rejected}
    assert set(reasons) == {
        (0, "attributes.Price"),
        (1, "stream"),
        (302, "t0"),
        (303, "attributes.Name"),
        (304, "stream"),
    }
    assert reasons[(0, "attributes.Price")] == "missing"
    assert "unknown stream 'Nope'" in reasons[(1, "stream")]
    assert "expected a string" in reasons[(303, "attributes.Name")]
    assert "published by subscription" in reasons[(304, "stream")]
    late = pb.Event()
    late.CopyFrom(good[0])
    second = conn.stub.PublishBatch(
        pb.PublishRequest(events=[late, *good[300:]], watermark=events[-1].t1),
        metadata=conn.metadata,
    )
    assert second.accepted == 300
    assert [(r.index, r.field) for r in second.rejected] == [(0, "t1")]
    assert "late" in second.rejected[0].reason
    expected = sum(expected_lines(SOURCES[1:2], events).values())
    assert _last_seqs(conn)[drops.id] == expected
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    assert stats.front["events_rejected"] == 6 and stats.front["events_accepted"] == 600


def test_idempotency_key_applies_a_batch_once(server: Server) -> None:
    conn = server.connect()
    drops = subscribe(conn, QUERIES[1].read_text())
    events = sample_events()[:400]
    request = pb.PublishRequest(
        events=[to_event(e) for e in events], idempotency_key="feed-1/0", watermark=events[-1].t1
    )
    first = conn.stub.PublishBatch(request, metadata=conn.metadata)
    again = conn.stub.PublishBatch(request, metadata=conn.metadata)
    assert (first.accepted, first.duplicate) == (400, False)
    assert (again.accepted, again.duplicate, again.batch) == (400, True, first.batch)
    assert _last_seqs(conn)[drops.id] == sum(expected_lines(SOURCES[1:2], events).values())


def test_streaming_publish_acknowledges_every_message_in_order(server: Server) -> None:
    conn = server.connect()
    events = sample_events()
    requests = [
        pb.PublishRequest(events=[to_event(e) for e in events[i : i + 100]])
        for i in range(0, len(events), 100)
    ]
    acks = list(conn.stub.Publish(iter(requests), metadata=conn.metadata))
    assert [a.accepted for a in acks] == [len(r.events) for r in requests]
    assert [a.batch for a in acks] == list(range(1, len(requests) + 1))


def test_a_cancelled_publish_stream_frees_its_handler_and_the_server_stops_at_once(
    tmp_path,  # type: ignore[no-untyped-def]
) -> None:
    """A client that cancels a Publish stream mid-way: the handler waiting for its next batch
    returns, so it holds no thread of the pool and a stop is prompt (before the fix the
    handler waited forever, and shutdown exited hard after grace + 30 s)."""
    server = Server(tmp_path / "data").start()
    conn = server.connect()
    more = threading.Event()
    first = pb.PublishRequest(events=[to_event(e) for e in sample_events()[:10]])

    def requests():  # type: ignore[no-untyped-def]
        yield first
        more.wait(30)

    call = conn.stub.Publish(requests(), metadata=conn.metadata)
    assert next(call).accepted == 10
    call.cancel()
    more.set()
    started = time.monotonic()
    assert server.stop() == 0
    assert time.monotonic() - started < 15
    assert "shutdown did not finish" not in server.log.read_text()


def test_routing_key_partitioned_events_reach_one_shard_each(server: Server) -> None:
    conn = server.connect()
    subscribe(conn, QUERIES[1].read_text())
    glob = subscribe(conn, "Stock NEXT{$2.Price > 1.1 * $1.Price} Stock PUBLISH Jumps")
    assert glob.placement.key_attribute == ""
    table = conn.stub.GetRouting(pb.GetRoutingRequest(), metadata=conn.metadata)
    assert table.shards == 2
    [route] = table.streams
    assert (route.stream, list(route.key_attributes)) == ("Stock", ["Name"])
    assert list(route.global_shards) == [glob.placement.shard]
    events = sample_events()
    publish(conn, events)
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    per_shard = [s.counters["events"] for s in stats.shards]
    # every event once in the key lane of one shard, and once more in the global lane
    assert sum(per_shard) == 2 * len(events)
    assert min(per_shard) > 0


def test_explain_shows_placement(server: Server) -> None:
    conn = server.connect()
    response = conn.stub.Explain(
        pb.ExplainRequest(query=QUERIES[1].read_text(), dot=True), metadata=conn.metadata
    )
    assert response.placement.key_attribute == "Name"
    assert "placement: key-partitioned on Name" in response.text
    assert response.dot.startswith("digraph")


def test_slow_consumer_stalls_neither_publishing_nor_other_consumers(server: Server) -> None:
    conn = server.connect()
    every = subscribe(conn, "FILTER{Price > 0} Stock PUBLISH Every")
    sample = sample_events()
    span = sample[-1].t1 - sample[0].t1 + 1
    events = [
        Event(e.stream, e.t0 + k * span, e.t1 + k * span, e.values)
        for k in range(8)
        for e in sample
    ]  # about 2 MB of alerts: more than the stalled stream's flow-control window
    request = pb.ListenRequest(after_seq={every.id: 0})
    stalled = conn.stub.Listen(request, metadata=conn.metadata)
    publish(conn, events[:1000], close=False)
    next(stalled)  # opened and read once, then never again
    publish(conn, events[1000:])
    alerts = collect(server.connect(), len(events), request)
    assert [a.seq for a in alerts] == list(range(1, len(events) + 1))
    stalled.cancel()


def test_health_and_reflection(server: Server) -> None:
    conn = server.connect()
    health = health_pb2_grpc.HealthStub(conn.channel)
    for service in ("", "cesar.v1.Cesar"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    stub = reflection_pb2_grpc.ServerReflectionStub(conn.channel)
    [reply] = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    names = {s.name for s in reply.list_services_response.service}
    assert {"cesar.v1.Cesar", "grpc.health.v1.Health"} <= names


@pytest.fixture
def secured(tmp_path) -> Server:  # type: ignore[no-untyped-def]
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-alice alice max_subscriptions=3\ntok-bob bob max_query_bytes=64\n")
    srv = Server(tmp_path / "data", "--tokens", str(tokens)).start()
    yield srv
    srv.stop()


def test_clients_see_and_remove_only_their_own_subscriptions(secured: Server) -> None:
    alice, bob = secured.connect("tok-alice"), secured.connect("tok-bob")
    mine = subscribe(alice, QUERIES[1].read_text())
    assert mine.owner == "alice"
    assert _last_seqs(bob) == {}
    code, _ = status_of(
        bob.stub.Unsubscribe, pb.UnsubscribeRequest(id=mine.id), metadata=bob.metadata
    )
    assert code is grpc.StatusCode.PERMISSION_DENIED
    code, _ = status_of(
        bob.stub.Listen(pb.ListenRequest(subscriptions=[mine.id]), metadata=bob.metadata).next
    )
    assert code is grpc.StatusCode.NOT_FOUND
    publish(bob, sample_events()[:300])
    assert collect(bob, 0) == []
    assert set(_last_seqs(alice)) == {mine.id}
    for token in (None, "wrong"):
        stranger = secured.connect(token)
        code, _ = status_of(
            stranger.stub.ListSubscriptions,
            pb.ListSubscriptionsRequest(),
            metadata=stranger.metadata,
        )
        assert code is grpc.StatusCode.UNAUTHENTICATED


def test_per_client_limits(secured: Server) -> None:
    alice, bob = secured.connect("tok-alice"), secured.connect("tok-bob")
    for n in range(3):
        subscribe(alice, f"FILTER{{Price > {n}}} Stock PUBLISH Over{n}")
    code, details = status_of(
        alice.stub.Subscribe,
        pb.SubscribeRequest(query="FILTER{Price > 9} Stock"),
        metadata=alice.metadata,
    )
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED and "3 subscriptions" in details
    long_query = "FILTER{Price > 1 AND Price > 2 AND Price > 3 AND Price > 4} Stock"
    code, details = status_of(
        bob.stub.Subscribe, pb.SubscribeRequest(query=long_query), metadata=bob.metadata
    )
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED and "limit for bob is 64" in details


def test_point_events_and_events_without_subscribers(server: Server) -> None:
    conn = server.connect()
    event = Event.of("Stock", 7, 7, {"Name": "A", "Price": 1.0, "Volume": 2})
    message = to_event(event)
    message.t0 = 0
    message.point = True
    assert (
        conn.stub.PublishBatch(pb.PublishRequest(events=[message]), metadata=conn.metadata).accepted
        == 1
    )


def test_subscribe_with_the_algebra_message(server: Server) -> None:
    conn = server.connect()
    stock = {"Stock": parse_stream_spec(STOCK)}
    drops = compile_query(QUERIES[1].read_text(), stock, "Drops")
    message = to_algebra(drops.algebra)
    made = conn.stub.Subscribe(
        pb.SubscribeRequest(algebra=message, name="AlgebraDrops"), metadata=conn.metadata
    )
    assert (made.stream, made.placement.key_attribute, made.query) == ("AlgebraDrops", "Name", "")
    events = sample_events()
    publish(conn, events)
    expected = sum(expected_lines(SOURCES[1:2], events).values())
    assert _last_seqs(conn)[made.id] == expected > 0
    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    assert listing.subscriptions[0].algebra == message

    broken = pb.Algebra()
    broken.CopyFrom(message)
    broken.select.predicate.compare.left.attribute.name = "Pryce"
    code, details = status_of(
        conn.stub.Subscribe, pb.SubscribeRequest(algebra=broken), metadata=conn.metadata
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert details.startswith("algebra.select.predicate: unknown attribute Pryce")
    code, details = status_of(
        conn.stub.Subscribe,
        pb.SubscribeRequest(query="Stock", algebra=message),
        metadata=conn.metadata,
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "exactly one" in details


def test_routing_global_shards_receive_only_events_their_static_interest_admits(
    server: Server,
) -> None:
    conn = server.connect()
    text = (
        "FILTER{Name = 'AAPL'} Stock NEXT{$2.Name = 'AMZN' AND $2.Price > 27 * $1.Price} Stock "
        "PUBLISH Pair"
    )
    pair = subscribe(conn, text)
    assert pair.placement.key_attribute == ""
    table = conn.stub.GetRouting(pb.GetRoutingRequest(), metadata=conn.metadata)
    [route] = table.streams
    [interest] = route.global_interest
    assert interest.shard == pair.placement.shard
    names = sorted(c.compare.right.constant.string_value for c in interest.conjuncts)
    assert names == ["AAPL", "AMZN"]
    events = sample_events()
    publish(conn, events)
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    admitted = sum(1 for e in events if dict(e.values)["Name"] in ("AAPL", "AMZN"))
    assert admitted < len(events)
    assert [s.counters["events"] for s in stats.shards if s.shard == pair.placement.shard] == [
        admitted
    ]
    assert _last_seqs(conn)[pair.id] == sum(expected_lines([("Pair", text)], events).values()) > 0


def test_a_pattern_is_a_subscription_like_a_cel_query(server: Server) -> None:
    """The same Subscribe RPC (the first word tells the language), the same placement and
    alerts as ``cesar run``; its errors are INVALID_ARGUMENT with line and column."""
    conn = server.connect()
    md = conn.metadata
    text = (QUERIES[0].parent / "rise_then_drop.sase").read_text()
    explained = conn.stub.Explain(pb.ExplainRequest(query=text), metadata=md)
    assert "SEQ under skip_till_next_match" in explained.text
    sub = subscribe(conn, text)
    assert sub.placement.key_attribute == "Name" and sub.stream == "RiseThenDrop"
    events = sample_events()
    publish(conn, events)
    expected = normalized(expected_lines([("rise_then_drop", text)], events))
    assert sum(expected.values()) == 62
    alerts = collect(conn, 62, _resume_all([sub]))
    assert Counter(alert_line(a) for a in alerts) == expected
    code, details = status_of(
        conn.stub.Subscribe,
        pb.SubscribeRequest(query="PATTERN SEQ(Stock a,, Stock b)"),
        metadata=md,
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "line 1, column 21" in details
    code, details = status_of(
        conn.stub.Subscribe,
        pb.SubscribeRequest(
            query="PATTERN SEQ(Stock a, !(Stock n), Stock b) WHERE n.Price = b.Price"
        ),
        metadata=md,
    )
    assert code is grpc.StatusCode.INVALID_ARGUMENT and "it needs WITHIN" in details


def test_an_and_pattern_pairs_simultaneous_quotes_through_the_server(server: Server) -> None:
    """AND over gRPC, placed globally (no key), pairs quotes of one minute as ``cesar run``
    does: 11 busy pairs on the sample."""
    conn = server.connect()
    text = (
        "PATTERN AND(Stock a, Stock b) "
        "WHERE a.Name < b.Name AND a.Volume > 300000 AND b.Volume > 300000 "
        "WITHIN 0 PUBLISH BusyTogether"
    )
    sub = subscribe(conn, text)
    assert sub.placement.key_attribute == "" and sub.stream == "BusyTogether"
    events = sample_events()
    publish(conn, events)
    expected = normalized(expected_lines([("busy_together", text)], events))
    assert sum(expected.values()) == 11
    alerts = collect(conn, 11, _resume_all([sub]))
    assert Counter(alert_line(a) for a in alerts) == expected


def test_patterns_planned_by_the_shards_give_cesar_runs_alerts(server: Server) -> None:
    """A pattern pinned to a lazy chain and one left to the planner (it starts on a tree) run
    on the shards beside the DAG: their alerts are ``cesar run``'s (eager), and the shards'
    stats count them planned and lazy."""
    conn = server.connect()
    texts = [
        (
            name,
            "PATTERN SEQ(Stock a, Stock b, Stock c) WHERE skip_till_any_match(a, b, c) { [Name] "
            "AND b.Price > a.Price AND c.Price < b.Price AND c.Volume > 400000 } WITHIN 20 MIN "
            f"{plan} PUBLISH {name}",
        )
        for name, plan in (("LoudPinned", "PLAN chain(c, b, a)"), ("LoudPlanned", ""))
    ]
    subs = [subscribe(conn, text) for _, text in texts]
    assert all(sub.placement.key_attribute == "Name" for sub in subs)
    events = sample_events()
    publish(conn, events)
    eager = [(name, text.replace("PLAN chain(c, b, a) ", "")) for name, text in texts]
    expected = normalized(expected_lines(eager, events))  # the DAG refuses the lazy pin
    assert sum(expected.values()) > 20
    alerts = collect(conn, sum(expected.values()), _resume_all(subs))
    assert Counter(alert_line(a) for a in alerts) == expected
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    planned = sum(shard.counters["planned"] for shard in stats.shards)
    lazy = sum(shard.counters["planned_lazy"] for shard in stats.shards)
    # The pin runs lazy on every shard holding it; the planner's own choice for the other
    # follows the plan constants the front measured at start, which a busy machine moves.
    assert planned >= 2 and lazy >= planned / 2
    plans = {sub: why for shard in stats.shards for sub, why in shard.plans.items()}
    assert plans[subs[0].id] == "plan chain(c, b, a): pinned by the pattern's PLAN"
    assert plans[subs[1].id].startswith("plan ")


def test_every_rpc_checks_the_scopes_of_its_table_with_every_scope(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tokens = tmp_path / "tokens"
    tokens.write_text("tc alice scope=client\ntf spark scope=feed\nta root scope=admin\n")
    server = Server(tmp_path / "data", "--tokens", str(tokens)).start()
    try:
        methods = {m.name for m in pb.DESCRIPTOR.services_by_name["Cesar"].methods}
        assert set(SCOPES) == methods
        requests = {
            "DefineStream": pb.DefineStreamRequest(spec="Scoped(a:int)"),
            "ListStreams": pb.ListStreamsRequest(),
            "DeleteStream": pb.DeleteStreamRequest(name="Nope"),
            "ShareStream": pb.ShareStreamRequest(stream="Nope"),
            "Subscribe": pb.SubscribeRequest(query="FILTER{Price > 1} Stock"),
            "SubscribeBatch": pb.SubscribeBatchRequest(
                subscriptions=[pb.SubscribeRequest(query="FILTER{Price > 2} Stock")]
            ),
            "Unsubscribe": pb.UnsubscribeRequest(id="s999"),
            "ListSubscriptions": pb.ListSubscriptionsRequest(),
            "Explain": pb.ExplainRequest(query="Stock"),
            "Listen": pb.ListenRequest(),
            "Publish": pb.PublishRequest(),
            "PublishBatch": pb.PublishRequest(),
            "GetRouting": pb.GetRoutingRequest(),
            "Stats": pb.StatsRequest(),
        }
        for token, scope in (("tc", "client"), ("tf", "feed"), ("ta", "admin")):
            conn = server.connect(token)
            for method in sorted(methods):
                call = getattr(conn.stub, method)
                request = requests[method]
                if method.startswith("Publish") and scope == "feed":  # the feed routes its own
                    request = pb.PublishRequest(shard=0, shards=2)
                try:
                    if method == "Listen":
                        stream = call(request, metadata=conn.metadata, timeout=1)
                        next(iter(stream), None)
                    elif method == "Publish":
                        list(call(iter([request]), metadata=conn.metadata, timeout=10))
                    else:
                        call(request, metadata=conn.metadata, timeout=30)
                    code = grpc.StatusCode.OK
                except grpc.RpcError as exc:
                    code = exc.code()
                allowed = scope == "admin" or scope in SCOPES[method]
                assert (code is grpc.StatusCode.PERMISSION_DENIED) != allowed, (
                    method,
                    scope,
                    code,
                )
                assert code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)
        feed = server.connect("tf")
        event = pb.Event(
            stream="Stock",
            t0=1,
            t1=1,
            attributes={
                "Name": pb.Value(string_value="IBM"),
                "Price": pb.Value(float_value=1.0),
                "Volume": pb.Value(int_value=1),
            },
        )
        code, details = status_of(
            feed.stub.PublishBatch, pb.PublishRequest(events=[event]), metadata=feed.metadata
        )
        assert code is grpc.StatusCode.PERMISSION_DENIED and "scope=client" in details
    finally:
        server.stop()


def test_stats_shows_a_client_only_what_is_its_own(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tokens = tmp_path / "tokens"
    tokens.write_text("ta alice\ntb bob\ntr root scope=admin\n")
    server = Server(tmp_path / "data", "--tokens", str(tokens)).start()
    try:
        alice, bob, root = (server.connect(t) for t in ("ta", "tb", "tr"))
        pattern = (
            "PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b) { [Name] } WITHIN 5"
        )
        mine = subscribe(alice, pattern + " PUBLISH Mine")
        theirs = subscribe(bob, pattern + " PUBLISH Theirs")
        publish(bob, sample_events()[:200], close=False)
        seen = alice.stub.Stats(pb.StatsRequest(), metadata=alice.metadata)
        (last,) = _last_seqs(alice).values()
        assert dict(seen.front) == {
            "subscriptions": 1,
            "streams": 0,
            "listens": 0,
            "alerts": last,
            "open_epoch_events": 0,
        }
        plans = {sub for shard in seen.shards for sub in shard.plans}
        assert plans == {mine.id}
        assert all(not shard.counters for shard in seen.shards)
        everything = root.stub.Stats(pb.StatsRequest(), metadata=root.metadata)
        assert everything.front["subscriptions"] == 2
        assert {sub for shard in everything.shards for sub in shard.plans} == {mine.id, theirs.id}
        assert everything.front["events_accepted"] == 200
        held = bob.stub.Stats(pb.StatsRequest(), metadata=bob.metadata).front["open_epoch_events"]
        assert held == everything.front["open_epoch_events"] > 0  # bob's last t1, still open
    finally:
        server.stop()
