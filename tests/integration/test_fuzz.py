"""Fuzzing every write RPC of a real server: never UNKNOWN or INTERNAL, never dead, never hung.

Hypothesis sends Subscribe, SubscribeBatch, Explain, DefineStream, Publish and
PublishBatch (events and Arrow rows, plain, zstd and lz4, up to compression
bombs), with CEL text drawn from CEL's own tokens, deep and long structures
(NEXT and UNION chains, long SEQs, Kleene closures with aggregates, PLAN pins),
Algebra messages, and byte-level mutations of valid requests sent raw (so
undecodable requests are covered too).  Every answer must be OK or a status a
client can act on; the server must stay up and answer the next call within its
deadline, and restart afterwards with every subscription it accepted.
``pytest -m long -s tests/integration/test_fuzz.py`` runs 100,000 mutated requests and
prints the count of each status.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import grpc
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.perf.serverproc import Server
from cesar.server.wire.arrowevents import encode
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import cesar_pb2_grpc
from tests.integration.arrowfaults import FAULTS, WRONG_TYPE, arrow_request

ALLOWED = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.OUT_OF_RANGE,
}
DEADLINE = 20.0
TOKENS = [
    "SELECT", "FROM", "PUBLISH", "FILTER", "NEXT", "FOLD", "UNION", "AS", "AND", "OR", "NOT",
    "DUR", "TRUE", "FALSE", "Stock", "Price", "Name", "Volume", "$1.Price", "$2.Name", "$.Price",
    "x", "*", "{", "}", "(", ")", ",", "=", "!=", "<", "<=", ">", ">=", "+", "-", "/", "%", "^",
    "0", "1", "-1", "9223372036854775808", "1.5", "1e999", "'IBM'", "'it''s'", "'", "5 MIN",
    "ABS(", "ROUND(", "POW(", "LEAST(", "SQRT(", "EXP(", "LN(", "LOWER(", "LENGTH(",
    "STARTS_WITH(", "--", "\n", "\u00e9", "\x00", "AVG_OVER(", "COUNT_OVER(", "MIN_OVER(",
    "HOUR(", "DATE(", "t1", "$1.t0", "9223372036854775807",
]  # fmt: skip
cel = st.lists(st.sampled_from(TOKENS), max_size=25).map(" ".join) | st.text(max_size=60)
PATTERN_TOKENS = [
    "SEQ", "AND", "ANY", "(", ")", ",", "Stock", "Stock+", "a", "b", "a[]", "!", "∼", "[", "]",
    "WHERE", "skip_till_next_match", "skip_till_any_match", "strict_contiguity",
    "partition_contiguity", "{", "}", "[Name]", "a[1].Price", "a[i].Price", "a[i-1].Price",
    "a[a.LEN].Price", "avg(a[..i-1].Price)", "sum(a[].Volume)", "max(a[].Price)", "a.LEN",
    "b.Price", "b.Name", ">", "=", "<", "80%", "*", "1", "1e999", "'IBM'", "‘x’", "WITHIN",
    "1 HOUR", "0", "RETURN", "AS", "PUBLISH", "P", "/*", "*/", "--", "\n", "..", "i-1",
    "PLAN", "chain", "tree", "recompute", "eager", "auto", "chain(b, a)", "tree(a)",
    "ROUND(", "GREATEST(", "POW(", "UPPER(", "ABS(", "AFTER MATCH SKIP", "PAST LAST ROW",
    "TO NEXT ROW", "TO FIRST", "TO LAST", "SUM_OVER(b.Volume, 5 MIN, b.Name)", "HOUR(b.t1)",
    "OR", "OR(", "SEQ(", "AND(", "!(Stock n)", "ALTERNATIVE()", "ALTERNATIVE(",
]  # fmt: skip
patterns = st.lists(st.sampled_from(PATTERN_TOKENS), max_size=30).map(
    lambda tokens: "PATTERN " + " ".join(tokens)
)
structures = st.one_of(  # deep and long: each near or past a budget
    st.integers(1, 40).map(lambda n: "Stock" + " NEXT{$1.Name = $2.Name} Stock" * n),
    st.integers(1, 120).map(lambda n: " UNION ".join(["FILTER{Price > 1} Stock"] * n)),
    st.integers(1, 40).map(lambda n: "(" * n + "Stock" + ")" * n),
    st.tuples(st.integers(1, 90), st.sampled_from(["", " PLAN recompute", " PLAN tree"])).map(
        lambda pair: (
            "PATTERN SEQ("
            + ", ".join(f"Stock a{i}" for i in range(pair[0]))
            + ") WHERE skip_till_any_match("
            + ", ".join(f"a{i}" for i in range(pair[0]))
            + ") { [Name] } WITHIN 10"
            + pair[1]
        )
    ),
    st.sampled_from(["", " PLAN recompute", " PLAN eager", " PLAN chain(b, a)"]).map(
        lambda plan: (
            "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_any_match(a[], b) "
            "{ [Name] AND a[i].Price > avg(a[..i-1].Price) AND b.Volume > sum(a[].Volume) } "
            "WITHIN 19" + plan
        )
    ),
    st.sampled_from(  # every function at the edge of its domain, run on the fuzzed events
        [
            "FILTER{POW(Volume, 999) > EXP(Price) AND ROUND(Price, -400) < LEAST(1, Volume, 2.5)}"
            " Stock",
            "SELECT ROUND(Price, 400) AS r, SQRT(Price) AS s, LN(Volume) AS l, ABS(Volume) AS a,"
            " LOWER(Name) AS n, LENGTH(Name) AS k FROM Stock",
            "PATTERN SEQ(Stock a, Stock b) WHERE STARTS_WITH(UPPER(a.Name), b.Name) = 1 AND "
            "GREATEST(a.Price, b.Price, POW(2, b.Volume)) > 1 RETURN LOG(b.Price) AS g WITHIN 5",
        ]
    ),
    st.integers(250, 300).map(
        lambda n: "SELECT " + ", ".join(f"Price AS p{i}" for i in range(n)) + " FROM Stock"
    ),
    st.sampled_from(  # windows, time functions and after-match policies at their edges
        [
            "SELECT SUM_OVER(Price, 9223372036854775807) AS s, AVG_OVER(Volume, 1, Name) AS a,"
            " SUM_OVER(Volume, 3, Name) AS v, MAX_OVER(Name, 2) AS m, HOUR(t1) AS h,"
            " DATE(t0) AS d FROM Stock",
            "Stock NEXT{$1.Name = $2.Name AND COUNT_OVER(5 MIN, $2.Name) > DAY_OF_WEEK($1.t0)}"
            " Stock",
            "PATTERN SEQ(Stock+ a[], Stock b) WHERE [Name] AND b.Price < MIN_OVER(b.Price,"
            " 10 MIN, b.Name) WITHIN 9 AFTER MATCH SKIP TO LAST a",
            "PATTERN SEQ(Stock a, Stock b) WHERE [Name] WITHIN 9223372036854775807"
            " AFTER MATCH SKIP PAST LAST ROW",
            "SELECT SUM_TUMBLING(Price, 9223372036854775807) AS s, AVG_TUMBLING(Volume, 1, Name)"
            " AS a, MIN_TUMBLING(Name, 2) AS m, COUNT_TUMBLING(1, Name, Price) AS c, TICKS(t0)"
            " AS t FROM Stock",
            "PATTERN AND(Stock a, Stock b, !(Stock n)) WHERE n.Price > MAX_TUMBLING(a.Price, 3,"
            " a.Name) WITHIN 2",
        ]
    ),
    st.integers(1, 40).map(  # OR and nesting: deep, and wide past the alternatives' budget
        lambda n: "PATTERN " + "OR(SEQ(Stock a, " * n + "Stock z" + "))" * n + " WITHIN 5"
    ),
    st.integers(1, 12).map(
        lambda n: (
            "PATTERN SEQ("
            + ", ".join(
                f"OR(Stock a{i}, SEQ(Stock b{i}, !(Stock n{i}), Stock c{i}))" for i in range(n)
            )
            + ") WHERE [Name] WITHIN 3"
        )
    ),
    st.sampled_from(
        [
            "PATTERN AND(SEQ(Stock a, Stock b), SEQ(Stock c, !(Stock n), Stock d)) WITHIN 4",
            "PATTERN OR(SEQ(Stock a, Stock b), SEQ(Stock b, Stock a)) WHERE a.Price > b.Price"
            " WITHIN 2 RETURN a.Price AS p",
            # policies, ALTERNATIVE() and variables one alternative binds, at their edges
            "PATTERN SEQ(Stock a, OR(SEQ(Stock b, Stock c), Stock d)) WHERE [Name] WITHIN"
            " 9223372036854775807 AFTER MATCH SKIP PAST LAST ROW RETURN ALTERNATIVE() AS w,"
            " c.Price / 0 AS z, d.Volume",
            "PATTERN OR(SEQ(Stock a, Stock b), AND(Stock c, Stock d)) WITHIN 3"
            " AFTER MATCH SKIP TO LAST b",
            "PATTERN OR(Stock a, Stock b) WITHIN 1 RETURN ALTERNATIVE(a.Price) AS n",
            "PATTERN OR(SEQ(Stock a, Stock b), Stock c) WITHIN 2 PLAN chain(b, a)",
            "PATTERN AND(SEQ(Stock a, Stock b), SEQ(Stock c, Stock d)) WHERE [Name] WITHIN 4"
            " RETURN ALTERNATIVE() AS w",
        ]
    ),
)
names = st.sampled_from(["", "Q", "Stock", "bad name", "select", "x" * 300]) | st.text(max_size=12)
values = st.one_of(
    st.builds(pb.Value, int_value=st.integers(-(2**63), 2**63 - 1)),
    st.builds(pb.Value, float_value=st.floats()),
    st.builds(pb.Value, string_value=st.text(max_size=8)),
    st.builds(pb.Value, bool_value=st.booleans()),
    st.just(pb.Value()),
)
times = st.integers(-(2**63), 2**63 - 1) | st.integers(0, 50)
events = st.builds(
    pb.Event,
    stream=st.sampled_from(["Stock", "Nope", ""]) | st.text(max_size=6),
    t0=times,
    t1=times,
    attributes=st.dictionaries(st.sampled_from(["Name", "Price", "Volume", "x"]), values),
)


def algebra_seed() -> pb.Algebra:
    message = pb.Algebra()
    select = message.select
    select.input.stream.name = "Stock"
    compare = select.predicate.compare
    compare.op = ">"
    compare.left.attribute.name = "Price"
    compare.right.constant.float_value = 100.0
    return message


def arrow_rows(count: int, compression: str | None = None, width: int = 3) -> bytes:
    """``count`` Stock rows as an Arrow IPC stream, compressed or not, names ``width`` long."""
    table = pa.table(
        {
            "stream": ["Stock"] * count,
            "t0": pa.array(range(count), pa.int64()),
            "t1": pa.array(range(count), pa.int64()),
            "Stock/Name": ["I" * width] * count,
            "Stock/Price": pa.array([1.0] * count, pa.float64()),
            "Stock/Volume": pa.array([1] * count, pa.int64()),
        }
    )
    if compression is None:
        return encode(table)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


EXACT = pb.PublishRequest(
    events=[
        pb.Event(
            stream="Stock",
            t0=t,
            t1=t + 1,
            attributes={
                "Name": pb.Value(string_value="IBM"),
                "Price": pb.Value(float_value=9.5),
                "Volume": pb.Value(int_value=t),
            },
        )
        for t in (1, 2, 3)
    ],
    watermark=5,
)
VOLUME = pb.Event(attributes={"Volume": pb.Value(int_value=7)})
"""Protobuf events exactly of Stock's schema (read from the bytes: protocolumns), and an event
of one map entry and nothing else, which mutations merge into its neighbours."""

SEEDS: dict[str, list[bytes]] = {
    "Subscribe": [
        pb.SubscribeRequest(query="FILTER{Price > 10} Stock", name="Q").SerializeToString(),
        pb.SubscribeRequest(
            query="FILTER{Price > 10} Stock", idempotency_key="k-1"
        ).SerializeToString(),
        pb.SubscribeRequest(algebra=algebra_seed()).SerializeToString(),
        pb.SubscribeRequest(
            query="PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_next_match(a[], b) "
            "{ [Name] AND a[i].Price > avg(a[..i-1].Price) AND b.Volume < 80% * "
            "a[a.LEN].Volume } WITHIN 1 HOUR PUBLISH P"
        ).SerializeToString(),
    ],
    "SubscribeBatch": [
        pb.SubscribeBatchRequest(
            subscriptions=[pb.SubscribeRequest(query="Stock NEXT{$1.Name = $2.Name} Stock")]
        ).SerializeToString(),
        pb.SubscribeBatchRequest(
            subscriptions=[
                pb.SubscribeRequest(query="FILTER{Price > 1} Stock", idempotency_key="k"),
                pb.SubscribeRequest(query="FILTER{Price > 2} Stock", idempotency_key="k"),
            ]
        ).SerializeToString(),
    ],
    "Explain": [pb.ExplainRequest(query="Stock FOLD{,,} Stock", dot=True).SerializeToString()],
    "DefineStream": [pb.DefineStreamRequest(spec="T(a:int,b:string)[ms]").SerializeToString()],
    "PublishBatch": [
        pb.PublishRequest(
            events=[
                pb.Event(stream="Stock", t0=1, t1=2, attributes={"Price": pb.Value(float_value=1)})
            ],
            watermark=3,
        ).SerializeToString(),
        pb.PublishRequest(arrow_events=arrow_rows(3), shard=0, shards=2).SerializeToString(),
        pb.PublishRequest(arrow_events=arrow_rows(3, "zstd")).SerializeToString(),
        pb.PublishRequest(
            arrow_events=arrow_rows(2, "lz4", 500), shard=1, shards=2
        ).SerializeToString(),
        *(  # a row failing each of the front's vectorized checks, unrouted and routed
            arrow_request(bad, shard).SerializeToString()
            for bad, _, _ in FAULTS.values()
            for shard in (None, 0)
        ),
        WRONG_TYPE.SerializeToString(),
        EXACT.SerializeToString(),
        EXACT.SerializeToString() + pb.PublishRequest(events=[VOLUME]).SerializeToString(),
    ],
}
mutations = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 255), st.booleans()), max_size=6
)


def mutate(data: bytes, edits: list[tuple[int, int, bool]]) -> bytes:
    out = bytearray(data)
    for position, byte, insert in edits:
        at = position % (len(out) + 1)
        if insert or at == len(out):
            out.insert(at, byte)
        else:
            out[at] = byte
    return bytes(out)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, grpc.Channel]]:
    server = Server(tmp_path_factory.mktemp("fuzz") / "data").start()
    channel = grpc.insecure_channel(server.address)
    yield server, channel
    channel.close()
    server.stop()
    print("fuzz outcomes:", dict(sorted(OUTCOMES.items())))  # the long run's figures


OUTCOMES: Counter[str] = Counter()


def check(server: Server, call) -> None:  # type: ignore[no-untyped-def]
    """Run ``call``; its status must be allowed and the server alive."""
    try:
        call()
        code = grpc.StatusCode.OK
        details = ""
    except grpc.RpcError as exc:
        code, details = exc.code(), exc.details()
    OUTCOMES[code.name] += 1
    assert code in ALLOWED, f"{code.name}: {details}"
    assert server.process is not None and server.process.poll() is None, "the server died"


def raw(channel: grpc.Channel, method: str):  # type: ignore[no-untyped-def]
    return channel.unary_unary(
        f"/cesar.v1.Cesar/{method}",
        request_serializer=lambda data: data,
        response_deserializer=lambda data: data,
    )


FUZZ = settings(
    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@FUZZ
@given(method=st.sampled_from(sorted(SEEDS)), data=st.data(), edits=mutations)
def test_mutated_requests(target, method: str, data: st.DataObject, edits) -> None:  # type: ignore[no-untyped-def]
    server, channel = target
    seed = data.draw(st.sampled_from(SEEDS[method]))
    request = mutate(seed, edits)
    check(server, lambda: raw(channel, method)(request, timeout=DEADLINE))


@FUZZ
@given(query=cel | patterns | structures, name=names, dot=st.booleans())
def test_cel_and_pattern_text(target, query: str, name: str, dot: bool) -> None:  # type: ignore[no-untyped-def]
    server, channel = target
    stub = pb_stub(channel)
    check(
        server,
        lambda: stub.Subscribe(pb.SubscribeRequest(query=query, name=name), timeout=DEADLINE),
    )
    check(server, lambda: stub.Explain(pb.ExplainRequest(query=query, dot=dot), timeout=DEADLINE))
    batch = pb.SubscribeBatchRequest(
        subscriptions=[pb.SubscribeRequest(query=query, name=name, idempotency_key=name)] * 2
    )
    check(server, lambda: stub.SubscribeBatch(batch, timeout=DEADLINE))


@FUZZ
@given(
    spec=st.text(max_size=40)
    | st.builds(lambda n, a: f"{n}({a})", names, st.text(max_size=30))
    | st.builds(lambda z: f"Zoned(a:int)[min, {z}]", st.text(max_size=30))
    | st.sampled_from(
        ["Z(a:int)[min, ../../etc/passwd]", "Z(a:int)[day, UTC]", "Z(a:int)[ns, EST]"]
    )
)
def test_stream_specs(target, spec: str) -> None:  # type: ignore[no-untyped-def]
    server, channel = target
    stub = pb_stub(channel)
    check(server, lambda: stub.DefineStream(pb.DefineStreamRequest(spec=spec), timeout=DEADLINE))


@FUZZ
@given(
    batch=st.lists(events, max_size=8),
    watermark=times,
    key=st.text(max_size=8),
    shard=st.none() | st.integers(0, 3),
    shards=st.integers(0, 3),
    rows=st.integers(0, 5),
    compression=st.sampled_from([None, "zstd", "lz4"]),
    width=st.sampled_from([3, 100_000, 40_000_000]),
    garbage=st.binary(max_size=40),
)
def test_publish(
    target, batch, watermark, key, shard, shards, rows, compression, width, garbage
) -> None:  # type: ignore[no-untyped-def]
    server, channel = target
    stub = pb_stub(channel)
    request = pb.PublishRequest(events=batch, watermark=watermark, idempotency_key=key)
    if shard is not None:
        request.shard, request.shards = shard, shards
    if width > 1_000_000:  # a bomb: hundreds of MB that compress to a few KB
        compression = compression or "zstd"
    request.arrow_events = arrow_rows(rows, compression, width) if rows else garbage
    check(server, lambda: stub.PublishBatch(request, timeout=DEADLINE))
    check(server, lambda: list(stub.Publish(iter([request, request]), timeout=DEADLINE)))


def pb_stub(channel: grpc.Channel) -> cesar_pb2_grpc.CesarStub:
    return cesar_pb2_grpc.CesarStub(channel)


def test_the_server_still_serves_after_the_fuzz(target) -> None:  # type: ignore[no-untyped-def]
    server, channel = target
    assert server.process is not None and server.process.poll() is None
    stub = pb_stub(channel)
    stats = stub.Stats(pb.StatsRequest(), timeout=DEADLINE)
    assert stats.front["batches"] >= 0 and len(stats.shards) == 2
    assert OUTCOMES, "the fuzz ran no call"


def test_the_server_restarts_after_the_fuzz_with_what_it_accepted(target) -> None:  # type: ignore[no-untyped-def]
    server, channel = target
    before = pb_stub(channel).ListSubscriptions(pb.ListSubscriptionsRequest(), timeout=DEADLINE)
    assert server.stop() == 0
    server.start()
    with grpc.insecure_channel(server.address) as again:
        stub = pb_stub(again)
        after = stub.ListSubscriptions(pb.ListSubscriptionsRequest(), timeout=DEADLINE)
        assert [(s.id, s.last_seq) for s in after.subscriptions] == [
            (s.id, s.last_seq) for s in before.subscriptions
        ]
        stub.Subscribe(pb.SubscribeRequest(query="FILTER{Price > 1} Stock"), timeout=DEADLINE)


@pytest.mark.long
@settings(FUZZ, max_examples=100_000)
@given(method=st.sampled_from(sorted(SEEDS)), data=st.data(), edits=mutations)
def test_long_mutated_requests(target, method: str, data: st.DataObject, edits) -> None:  # type: ignore[no-untyped-def]
    test_mutated_requests.hypothesis.inner_test(target, method, data, edits)
