"""The feed's routing, in-process on the shared Spark session, into a sink that only acknowledges.

The routing table comes from a real server's GetRouting; the oracle is the
front's own rule: ``shard_of`` for key lanes and the static-interest index
(:class:`index.static.ConjunctRegistry`, built from the same compiled queries)
for global ones.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from automata.compiler import compile_query
from automata.placement import static_interest
from automata.schema import Event, parse_stream_spec
from cesar.v1 import cesar_pb2 as pb
from index.static import ConjunctRegistry
from perf.acksink import AckSink
from server.feed import Feed, Options
from server.routing import shard_of
from tests.integration.serverproc import QUERIES, STOCK, Server, sample_events, subscribe

GLOBAL = "FILTER{Name = 'AMZN'} Stock NEXT{$2.Name = 'TSLA' AND $2.Price > 420} Stock PUBLISH G"


def run_feed(spark: SparkSession, server: Server, tmp: Path, events: list[Event]) -> AckSink:
    """Feed ``events`` (one JSON Lines file) to a sink serving ``server``'s routing table."""
    conn = server.connect()
    routing = conn.stub.GetRouting(pb.GetRoutingRequest(), metadata=conn.metadata)
    streams = conn.stub.ListStreams(pb.ListStreamsRequest(), metadata=conn.metadata).streams
    conn.close()
    sink = AckSink(routing, list(streams), keep=True)
    source = tmp / "in"
    source.mkdir()
    lines = [json.dumps({"stream": e.stream, "t": e.t1, **e.attrs()}) for e in events]
    (source / "events.jsonl").write_text("\n".join(lines) + "\n")
    options = Options(
        server=sink.address,
        source=str(source),
        checkpoint=str(tmp / "checkpoint"),
        dead_letter=str(tmp / "dead"),
        available_now=True,
        max_rows=500,
    )
    feed = Feed(spark, options)
    try:
        feed.start().awaitTermination()
        feed.finish()
    finally:
        feed.close()
        sink.stop()
    return sink


def received(sink: AckSink) -> dict[int, list[tuple[int, str, float]]]:
    """Per shard, the (t1, Name, Price) of each event it was sent."""
    out = {}
    for shard, tables in sink.received.tables.items():
        rows = pa.concat_tables(tables).to_pylist()
        out[shard] = [(r["t1"], r["Stock/Name"], r["Stock/Price"]) for r in rows]
    return out


def test_key_partitioned_subscriptions_each_shard_gets_only_its_keys(
    spark: SparkSession, server: Server, tmp_path: Path
) -> None:
    conn = server.connect()
    subscribe(conn, QUERIES[1].read_text(), "drops")  # key-partitioned on Name
    conn.close()
    events = sample_events()
    sink = run_feed(spark, server, tmp_path, events)
    got = received(sink)
    for shard in (0, 1):
        mine = [(e.t1, e.attrs()["Name"], e.attrs()["Price"]) for e in events]
        mine = [row for row in mine if shard_of(row[1], 2) == shard]
        assert sorted(got[shard]) == sorted(mine)  # exactly its keys
    assert sum(sink.received.events.values()) == len(events)
    assert max(sink.received.messages.values()) > 1  # max_rows=500 split the shards' batches
    assert sink.received.watermarks == {0: events[-1].t1, 1: events[-1].t1}  # all closed


def test_global_subscriptions_get_only_what_their_static_predicates_admit(
    spark: SparkSession, server: Server, tmp_path: Path
) -> None:
    conn = server.connect()
    placed = subscribe(conn, GLOBAL, "g")
    conn.close()
    events = sample_events()
    sink = run_feed(spark, server, tmp_path, events)
    query = compile_query(GLOBAL, {"Stock": parse_stream_spec(STOCK)}, "g")
    registry = ConjunctRegistry()
    for stream, conjuncts in static_interest(query.automata).items():
        registry.add("g", stream, conjuncts)
    admitted = [e for e in events if registry.probe(e.stream, e.attrs())]
    assert 0 < len(admitted) < len(events)
    got = received(sink)
    assert not placed.placement.key_attribute
    assert set(got) == {placed.placement.shard}
    expected = Counter((e.t1, e.attrs()["Name"], e.attrs()["Price"]) for e in admitted)
    assert Counter(got[placed.placement.shard]) == expected
