"""The feed's routing, in-process on the shared Spark session, into a sink that only acknowledges.

The routing table comes from a real server's GetRouting; the oracle is the
front's own rule: ``shard_of`` for key lanes and the static-interest index
(:class:`cesar.index.static.ConjunctIndex`, built from the same compiled queries)
for global ones.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from cesar.automata.compiler import compile_query
from cesar.automata.normal import static_atoms
from cesar.automata.partition import static_interest
from cesar.automata.schema import Event, parse_stream_spec
from cesar.index.static import ConjunctIndex
from cesar.perf.acksink import AckSink
from cesar.perf.serverproc import (
    QUERIES,
    SAMPLE,
    STOCK,
    Server,
    sample_events,
    subscribe,
)
from cesar.server.feed.job import Feed, Options
from cesar.server.feed.synthetic import tick
from cesar.server.wire.eventfile import Ingest, input_line, read_events
from cesar.server.wire.routing import shard_of
from cesar.v1 import cesar_pb2 as pb

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
    lines = [input_line(e) for e in events]
    (source / "events.jsonl").write_text("\n".join(lines) + "\n")
    options = Options(
        server=sink.address,
        source=str(source),
        checkpoint=str(tmp / "checkpoint"),
        dead_letter=str(tmp / "dead"),
        available_now=True,
        max_rows=500,
    )
    try:
        run_available_now(spark, options)
    finally:
        sink.stop()
    return sink


def run_available_now(spark: SparkSession, options: Options) -> None:
    """Run the feed over what its source holds, then close every epoch (``--available-now``)."""
    feed = Feed(spark, replace(options, available_now=True))
    try:
        feed.start().awaitTermination()
        feed.finish()
    finally:
        feed.close()


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
    registry: ConjunctIndex[str] = ConjunctIndex()
    for stream, conjuncts in static_interest(query.automata).items():
        registry.add(stream, stream, tuple(static_atoms(c) for c in conjuncts))
    admitted = [e for e in events if registry.probe(e.stream, e.attrs())]
    assert 0 < len(admitted) < len(events)
    got = received(sink)
    assert not placed.placement.key_attribute
    assert set(got) == {placed.placement.shard}
    expected = Counter((e.t1, e.attrs()["Name"], e.attrs()["Price"]) for e in admitted)
    assert Counter(got[placed.placement.shard]) == expected


def key_table(shards: int = 2) -> pb.RoutingTable:
    table = pb.RoutingTable(shards=shards, version=1)
    table.streams.add(stream="Stock", key_attributes=["Name"])
    return table


STREAMS = [pb.StreamInfo(name="Stock", spec=STOCK)]


def wait_for(query: StreamingQuery, until: Callable[[], bool], deadline: float) -> None:
    """Until ``until()`` holds, while the query runs without an error, up to ``deadline``."""
    while not until():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, "the feed did not get there in time"
        time.sleep(0.1)


def run_query(spark: SparkSession, options: Options, until) -> Feed:  # type: ignore[no-untyped-def]
    """Run the feed's streaming query until ``until()`` holds, then stop it and close epochs."""
    feed = Feed(spark, options)
    query = feed.start()
    try:
        wait_for(query, until, time.monotonic() + 120)
    finally:
        query.stop()
    feed.finish()
    feed.close()
    return feed


def test_synthetic_source_is_deterministic_and_routing_follows_the_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = AckSink(key_table(), STREAMS, keep=True)
    options = Options(
        server=sink.address,
        source="synthetic:3000",
        checkpoint=str(tmp_path / "checkpoint"),
        dead_letter=str(tmp_path / "dead"),
        trigger_seconds=0.2,
    )
    amzn = pb.Predicate(
        compare=pb.Comparison(
            op="=",
            left=pb.Term(attribute=pb.AttributeRef(scope=pb.SCOPE_EVENT, name="Name")),
            right=pb.Term(constant=pb.Value(string_value="AMZN")),
        )
    )
    switched: list[int] = []  # the last micro-batch that may have used the first table

    def batch_of(key: str) -> int:
        return int(key.split(":")[1])

    def until() -> bool:
        batches = [batch_of(key) for key, _, _ in sink.received.log]
        if not switched and sum(sink.received.events.values()) >= 3000:
            table = pb.RoutingTable(shards=2, version=2)
            route = table.streams.add(stream="Stock", global_shards=[1])
            route.global_interest.add(shard=1).conjuncts.append(amzn)
            sink.routing = table  # as after a subscribe and an unsubscribe
            switched.append(max(batches) + 1)
        return bool(switched) and max(batches) > switched[0] + 2

    try:
        run_query(spark, options, until)
    finally:
        sink.stop()
    seen: Counter[tuple[int, int, str, float]] = Counter()
    for key, shard, table in sink.received.log:
        for row in table.to_pylist():
            seen[(shard, row["t1"], row["Stock/Name"], row["Stock/Price"])] += 1
            new = (shard, row["Stock/Name"]) == (1, "AMZN")
            old = shard == shard_of(row["Stock/Name"], 2)
            if batch_of(key) > switched[0]:
                assert new  # batches planned after the change follow the new table
            elif batch_of(key) < switched[0]:
                assert old
            else:
                assert new or old
    assert max(seen.values()) == 1  # nothing sent twice
    last = max(t1 for _, t1, _, _ in seen)
    generated = [json.loads(tick(i)) for i in range(6 * (last + 1))]
    rows = {(g["t"], g["Name"], g["Price"]) for g in generated}
    assert {(t1, name, price) for _, t1, name, price in seen} <= rows  # the generator's rows


def test_csv_files_with_bad_cells_go_to_the_dead_letter(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = AckSink(key_table(), STREAMS, keep=True)
    source = tmp_path / "in"
    source.mkdir()
    text = SAMPLE.read_text().splitlines()
    bad = ["26728651,IBM,cheap,100", "26728651,IBM,1.5"]
    (source / "quotes.csv").write_text("\n".join([*text, *bad]) + "\n")
    options = Options(
        server=sink.address,
        source=str(source),
        checkpoint=str(tmp_path / "checkpoint"),
        dead_letter=str(tmp_path / "dead"),
        available_now=True,
        format="csv",
    )
    try:
        run_available_now(spark, options)
    finally:
        sink.stop()
    assert sum(sink.received.events.values()) == len(sample_events())
    dead = [
        json.loads(line)
        for path in (tmp_path / "dead").rglob("*.json")
        for line in path.read_text().splitlines()
    ]
    assert sorted((d["field"], d["reason"]) for d in dead) == [
        ("Price", "expected a float, got 'cheap'"),
        ("Volume", "missing"),
    ]


def test_socket_source(spark: SparkSession, tmp_path: Path) -> None:
    sink = AckSink(key_table(), STREAMS, keep=True)
    events = sample_events()[:600]
    lines = [input_line(e) for e in events]
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.sendall(("\n".join(lines) + "\n").encode())
            time.sleep(60)

    threading.Thread(target=serve, daemon=True).start()
    options = Options(
        server=sink.address,
        source=f"socket://127.0.0.1:{port}",
        checkpoint=str(tmp_path / "checkpoint"),
        dead_letter=str(tmp_path / "dead"),
        trigger_seconds=0.2,
    )
    try:
        run_query(spark, options, lambda: sum(sink.received.events.values()) >= len(events))
    finally:
        sink.stop()
        listener.close()
    got = Counter(
        (row["t1"], row["Stock/Name"])
        for tables in sink.received.tables.values()
        for table in tables
        for row in table.to_pylist()
    )
    assert got == Counter((e.t1, e.attrs()["Name"]) for e in events)


def quotes_file(tmp_path: Path, address: str) -> tuple[list[Event], Options]:
    """300 sample quotes in one JSON Lines file, and an available-now feed's options reading
    them into ``address``."""
    source = tmp_path / "in"
    source.mkdir()
    events = sample_events()[:300]
    (source / "quotes.jsonl").write_text("\n".join(input_line(e) for e in events) + "\n")
    options = Options(
        server=address,
        source=str(source),
        checkpoint=str(tmp_path / "checkpoint"),
        dead_letter=str(tmp_path / "dead"),
        available_now=True,
    )
    return events, options


def test_the_feed_waits_out_a_server_that_is_down(spark: SparkSession, tmp_path: Path) -> None:
    first = AckSink(key_table(), STREAMS)
    port = int(first.address.rsplit(":", 1)[1])
    first.stop()  # the server is down when the feed starts its first micro-batch
    events, options = quotes_file(tmp_path, first.address)
    feed = Feed(spark, options)
    query = feed.start()
    time.sleep(3)
    assert query.isActive  # waiting, not failed
    sink = AckSink(key_table(), STREAMS, port=port)  # back, on the same address
    try:
        query.awaitTermination(120)
        assert query.exception() is None
        feed.finish()
    finally:
        feed.close()
        sink.stop()
    assert sum(sink.received.events.values()) == len(events)


def test_a_restarted_feed_sends_its_newest_close_again(spark: SparkSession, tmp_path: Path) -> None:
    """A micro-batch ends with its close in flight; a feed that stopped then (the close maybe
    lost) sends it again when it starts, before reading anything new."""
    sink = AckSink(key_table(), STREAMS)
    events, options = quotes_file(tmp_path, sink.address)
    try:
        feed = Feed(spark, options)
        try:
            feed.start().awaitTermination(120)  # no finish: the newest epoch stays open
        finally:
            feed.close()
        closed = dict(sink.received.watermarks)
        assert closed and max(closed.values()) < events[-1].t1
        sink.received.watermarks.clear()
        again = Feed(spark, options)
        try:
            query = again.start()
            assert sink.received.watermarks == closed  # sent before the query ran
            query.awaitTermination(120)
        finally:
            again.close()
    finally:
        sink.stop()
    assert sum(sink.received.events.values()) == len(events)  # nothing sent twice


def test_a_row_the_server_refuses_does_not_move_the_watermark(
    spark: SparkSession, tmp_path: Path
) -> None:
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        subscribe(conn, QUERIES[1].read_text())  # key-partitioned: every row goes to a shard
        events = sample_events()
        half = len(events) // 2
        last = events[half - 1]
        wrong = Event(last.stream, 2**62, 2**62, last.values)  # a clock gone wild
        source = tmp_path / "in"
        source.mkdir()
        files = [source / "a.jsonl", source / "b.jsonl"]
        parts = ([*events[:half], wrong], events[half:])
        for number, (path, part) in enumerate(zip(files, parts, strict=True)):
            path.write_text("\n".join(input_line(e) for e in part) + "\n")
            os.utime(path, (time.time() - 60 + number, time.time() - 60 + number))
        options = Options(
            server=server.address,
            source=str(source),
            checkpoint=str(tmp_path / "checkpoint"),
            dead_letter=str(tmp_path / "dead"),
            available_now=True,
            max_files_per_trigger=1,  # two micro-batches: the second comes after a watermark
        )
        run_available_now(spark, options)
        stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
        assert stats.front["events_accepted"] == len(events)
        dead = [
            json.loads(line)
            for path in (tmp_path / "dead").rglob("*.json")
            for line in path.read_text().splitlines()
        ]
        assert [d["field"] for d in dead] == ["t1"]
        assert "rejected by the server" in dead[0]["reason"] and "jumps" in dead[0]["reason"]
    finally:
        server.stop()


def test_the_feed_reads_a_csv_not_written_for_cesar_as_cesar_run_does(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The bundled intraday file as its source wrote it (an ISO ``ts`` with its zone, extra
    columns, no stream) with ``run``'s ``--time-column``, ``--columns`` and ``--stream-name``:
    the events sent are those ``cesar run`` reads; without the options every row is refused,
    with its field and reason, and none accepted."""
    intraday = SAMPLE.with_name("intraday_sample.csv")
    spec = "Quote(symbol:string,close:float,volume:int)[min]"
    table = pb.RoutingTable(shards=2, version=1)
    table.streams.add(stream="Quote", key_attributes=["symbol"])
    ingest = Ingest("ts", "auto", ("symbol", "close", "volume"), "Quote")
    schemas = {"Quote": parse_stream_spec(spec)}
    with intraday.open() as handle:
        wanted = read_events(handle, str(intraday), schemas, ingest=ingest).events
    results = {}
    for label, given in (("read", ingest), ("raw", None)):
        sink = AckSink(table, [pb.StreamInfo(name="Quote", spec=spec)], keep=True)
        source = tmp_path / label / "in"
        source.mkdir(parents=True)
        (source / "quotes.csv").write_text(intraday.read_text())
        options = Options(
            server=sink.address,
            source=str(source),
            checkpoint=str(tmp_path / label / "checkpoint"),
            dead_letter=str(tmp_path / label / "dead"),
            available_now=True,
            format="csv",
            ingest=given,
        )
        feed = Feed(spark, options)
        try:
            feed.start().awaitTermination()
            feed.finish()
        finally:
            feed.close()
            sink.stop()
        results[label] = (sink, feed.last.totals)
    sink, totals = results["read"]
    sent = Counter(
        (r["t1"], r["Quote/symbol"], r["Quote/close"], r["Quote/volume"])
        for tables in sink.received.tables.values()
        for r in pa.concat_tables(tables).to_pylist()
    )
    assert sent == Counter(
        (e.t1, e.value("symbol"), e.value("close"), e.value("volume")) for e in wanted
    )
    assert totals["accepted"] == len(wanted) == 2340 and totals["rejected"] == 0
    _, raw = results["raw"]
    assert raw["rows"] == 2340 and raw["accepted"] == 0 and raw["rejected"] == 2340
    dead = {
        (json.loads(line)["field"], json.loads(line)["reason"])
        for path in (tmp_path / "raw" / "dead").rglob("*.json")
        for line in path.read_text().splitlines()
    }
    assert ("t0", "missing") in dead


def test_a_micro_batch_closes_while_the_close_before_it_is_applied(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Closes go two deep: micro-batch N+1 publishes and sends its close while N's is still
    unanswered (a shard applies the two back to back, not waiting for Spark between them);
    N+2 publishes, then waits for N's close before sending its own."""
    hold = threading.Event()
    sink = AckSink(key_table(1), STREAMS, hold=hold)
    source = tmp_path / "in"
    source.mkdir()
    events = sample_events()[:300]
    for number, start in enumerate(range(0, len(events), 100)):
        path = source / f"{number}.jsonl"
        path.write_text("\n".join(input_line(e) for e in events[start : start + 100]) + "\n")
        os.utime(path, (1_000_000 + number, 1_000_000 + number))  # read in this order
    options = Options(
        server=sink.address,
        source=str(source),
        checkpoint=str(tmp_path / "checkpoint"),
        dead_letter=str(tmp_path / "dead"),
        trigger_seconds=0.2,
        max_files_per_trigger=1,
    )
    feed = Feed(spark, options)
    query = feed.start()
    deadline = time.monotonic() + 120
    try:
        received = sink.received
        wait_for(
            query,
            lambda: sum(received.events.values()) == len(events) and received.closing == 2,
            deadline,
        )
        time.sleep(1.0)  # the third micro-batch has published and waits for the first close
        assert received.closing == 2
    finally:
        hold.set()
    try:
        wait_for(query, lambda: feed.micro_batches == 3, deadline)
    finally:
        query.stop()
        feed.close()
        sink.stop()
    assert sink.received.most_closing == 2
    assert sink.received.watermarks[0] == max(e.t1 for e in events) - 1
