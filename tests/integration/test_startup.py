"""Whatever the server accepted, it restarts with (server/front/startup.py).

The invariant: after any sequence of calls — accepted or refused, ordinary or
hostile — the server stops, starts again from its data directory and serves:
the same subscriptions with the same last seqs, the same streams, and new
subscriptions and events work.  Hypothesis draws the sequences from the
calls a client may make, with queries near or past every budget.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.perf.serverproc import Server, quote
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import cesar_pb2_grpc

QUERIES = [
    "FILTER{Price > 100} Stock",
    "SELECT * FROM Stock NEXT{$1.Name = $2.Name AND $2.Price < $1.Price} Stock",
    "Stock" + " NEXT{} Stock" * 30,
    " UNION ".join(["Stock"] * 100),
    "Stock PUBLISH " + "P" * 200,
    "SELECT " + ", ".join(f"Price AS p{i}" for i in range(300)) + " FROM Stock",
    "PATTERN SEQ(Stock a, Stock b) WHERE skip_till_any_match(a, b) { [Name] AND "
    "b.Price > a.Price } WITHIN 5",
    "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_any_match(a[], b) { [Name] AND "
    "b.Volume > 999 } WITHIN 19 PLAN recompute",
    "PATTERN SEQ(" + ", ".join(f"Stock a{i}" for i in range(70)) + ") WITHIN 9",
    "Stock FOLD{,,} Stock",
    "FILTER{Name = 'IBM'} Stock PUBLISH Ibm",
    "FILTER{Price > 1} Ibm",
]
SPECS = ["T(a:int)", "T(a:int)[min]", "U(b:string,c:float)", "Stock(x:int)"]
CLOCK = [29_000_000]
"""The newest quote's minute, across examples (the server keeps its streams' time)."""


calls = st.lists(
    st.one_of(
        st.tuples(st.just("subscribe"), st.sampled_from(QUERIES)),
        st.tuples(st.just("batch"), st.lists(st.sampled_from(QUERIES), min_size=1, max_size=4)),
        st.tuples(st.just("unsubscribe"), st.integers(1, 12)),
        st.tuples(st.just("define"), st.sampled_from(SPECS)),
        st.tuples(st.just("delete"), st.sampled_from(["T", "U", "Stock"])),
        st.tuples(
            st.just("publish"),
            st.lists(st.tuples(st.integers(0, 3), st.sampled_from([10, 2000])), max_size=30),
        ),
    ),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    started = Server(tmp_path_factory.mktemp("startup") / "data").start()
    yield started
    started.stop()


def apply(stub: cesar_pb2_grpc.CesarStub, call: tuple, clock: list[int]) -> None:  # type: ignore[type-arg]
    """Make one call; any status a client can act on is fine (the fuzz checks which)."""
    kind, argument = call
    try:
        if kind == "subscribe":
            stub.Subscribe(pb.SubscribeRequest(query=argument), timeout=60)
        elif kind == "batch":
            requests = [pb.SubscribeRequest(query=q) for q in argument]
            stub.SubscribeBatch(pb.SubscribeBatchRequest(subscriptions=requests), timeout=60)
        elif kind == "unsubscribe":
            stub.Unsubscribe(pb.UnsubscribeRequest(id=f"s{argument}"), timeout=60)
        elif kind == "define":
            stub.DefineStream(pb.DefineStreamRequest(spec=argument), timeout=60)
        elif kind == "delete":
            stub.DeleteStream(pb.DeleteStreamRequest(name=argument), timeout=60)
        else:
            events = []
            for step, volume in argument:
                clock[0] += step
                events.append(quote(clock[0], 100.0 + clock[0] % 7, volume))
            stub.PublishBatch(pb.PublishRequest(events=events), timeout=60)
    except grpc.RpcError as exc:
        assert exc.code() not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), exc


def picture(stub: cesar_pb2_grpc.CesarStub) -> tuple[list[tuple[str, int, str]], list[str]]:
    subscriptions = stub.ListSubscriptions(pb.ListSubscriptionsRequest(), timeout=60)
    streams = stub.ListStreams(pb.ListStreamsRequest(), timeout=60)
    return (
        [(s.id, s.last_seq, s.query) for s in subscriptions.subscriptions],
        sorted(f"{s.name}:{s.spec}" for s in streams.streams),
    )


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=calls)
def test_after_any_calls_the_server_restarts_and_serves(server: Server, sequence) -> None:  # type: ignore[no-untyped-def]
    with grpc.insecure_channel(server.address) as channel:
        stub = cesar_pb2_grpc.CesarStub(channel)
        for call in sequence:
            apply(stub, call, CLOCK)
        before = picture(stub)
    assert server.stop() == 0, Path(server.log).read_text()[-3000:]
    server.start()
    with grpc.insecure_channel(server.address) as channel:
        stub = cesar_pb2_grpc.CesarStub(channel)
        assert picture(stub) == before
        stub.Subscribe(pb.SubscribeRequest(query="FILTER{Volume > 0} Stock"), timeout=60)
        stub.Stats(pb.StatsRequest(), timeout=60)
