"""The feed's executor side: one partition of a micro-batch, read, checked, routed and published.

:func:`publish_partition` is the ``mapInArrow`` function of
:meth:`cesar.server.feed.job.Feed.process`.  For its partition's rows it

1. validates them (:mod:`cesar.server.feed.jsonl` for JSON Lines,
   :func:`cesar.server.feed.rows.validate` for CSV);
2. sets aside late rows: at or before the watermark of the previous
   micro-batch, whose epochs the shards have closed;
3. routes the rest (:func:`cesar.server.feed.rows.route`) and sends each shard its
   events as Arrow IPC in PublishBatch messages of at most ``max_rows``
   events, with the key ``FEED:BATCH:PARTITION:SHARD:CHUNK``.  The front keeps
   them pending on the shard in (t1, arrival) order until the driver closes
   the micro-batch with the new watermark (a PublishBatch per shard with no
   events), so the partitions' pieces may arrive in any order;
4. yields one summary row (counts, the largest ``t1`` the server accepted and the
   microseconds its PublishBatch calls waited for their acknowledgements) and one row per
   rejected or late input row, with field and reason, for the dead letter.

A micro-batch Spark runs again after a crash reads the same rows into the
same partitions and sends the same keys; the front applies each key once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

import grpc
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext

from cesar.server.feed.jsonl import check_json
from cesar.server.feed.rows import Plan, Router, route, validate
from cesar.server.wire.arrowevents import encode
from cesar.server.wire.client import Connection
from cesar.server.wire.eventfile import Ingest
from cesar.v1 import cesar_pb2 as pb

OUTPUT = (
    "kind string, rows bigint, rejected bigint, late bigint, accepted bigint, unrouted bigint, "
    "sent bigint, duplicates bigint, max_t1 bigint, waited_us bigint, field string, "
    "reason string, raw string"
)
OUTPUT_SCHEMA = pa.schema(
    [
        (name, pa.string() if typ == "string" else pa.int64())
        for name, typ in (item.split() for item in OUTPUT.split(", "))
    ]
)
RETRY_SECONDS = 120.0
Reply = TypeVar("Reply")


@dataclass(frozen=True)
class Target:
    """Where and how executors reach the front; plain data shipped with the task."""

    address: str
    token: str | None
    tls_ca: str | None
    feed: str
    max_rows: int
    lateness: int

    def connect(self) -> Connection:
        return Connection.open(self.address, self.token, Path(self.tls_ca) if self.tls_ca else None)


def publish_partition(
    batches: Iterator[pa.RecordBatch],
    plan: Plan,
    target: Target,
    batch: int,
    watermark: int | None,
    ingest: Ingest | None = None,
) -> Iterator[pa.RecordBatch]:
    """Validate (CSV rows read by ``ingest`` when given), set aside late rows, route and
    publish one partition (module docstring)."""
    router = Router.of(plan)
    counts = dict.fromkeys(("rows", "rejected", "late", "accepted", "unrouted"), 0)
    max_t1: int | None = None
    by_shard: dict[int, list[pa.Table]] = {}
    for record in batches:
        if not record.num_rows:
            continue
        if "m" in record.schema.names:
            checked = validate(record, router.schemas, ingest)
        else:
            checked = check_json(record, router.schemas)
        if not checked.num_rows:
            continue
        counts["rows"] += checked.num_rows
        good = pc.is_null(checked.column("reason"))
        rejected = checked.filter(pc.invert(good))
        valid = checked.filter(good)
        if watermark is not None:
            behind = pc.less_equal(valid.column("t1"), watermark)
            late = valid.filter(behind)
            valid = valid.filter(pc.invert(behind))
            if late.num_rows:
                counts["late"] += late.num_rows
                yield _dead(late, "t1", _late_reasons(late, watermark, target.lateness))
        if rejected.num_rows:
            counts["rejected"] += rejected.num_rows
            yield _dead(rejected, None, rejected.column("reason"))
        counts["accepted"] += valid.num_rows
        valid = valid.drop_columns(["field", "reason", "raw"])
        tables, unrouted = route(valid, router)
        counts["unrouted"] += unrouted
        for shard, table in tables.items():
            by_shard.setdefault(shard, []).append(table)
    sent = duplicates = 0
    waited = 0.0
    if by_shard:
        partition = TaskContext.get().partitionId()  # type: ignore[union-attr]
        connection = target.connect()
        try:
            for shard, pieces in sorted(by_shard.items()):
                events = _events(pa.concat_tables(pieces, promote_options="default"))
                for chunk, start in enumerate(range(0, events.num_rows, target.max_rows)):
                    piece = events.slice(start, target.max_rows)
                    request = pb.PublishRequest(
                        arrow_events=encode(piece),
                        shard=shard,
                        shards=plan.shards,
                        idempotency_key=f"{target.feed}:{batch}:{partition}:{shard}:{chunk}",
                    )
                    asked = time.perf_counter()
                    response = publish(connection, request)
                    waited += time.perf_counter() - asked
                    sent += response.accepted
                    duplicates += response.duplicate
                    top = _newest_accepted(piece, response)
                    if top is not None:
                        max_t1 = top if max_t1 is None else max(max_t1, top)
                    for rejection in response.rejected:
                        row = piece.slice(rejection.index, 1)
                        reason = f"rejected by the server: {rejection.reason}"
                        yield _dead(row, rejection.field, pa.array([reason]), raw=False)
        finally:
            connection.close()
    summary = {
        **counts,
        "sent": sent,
        "duplicates": duplicates,
        "max_t1": max_t1,
        "waited_us": round(waited * 1e6),
    }
    yield pa.RecordBatch.from_pylist([{"kind": "summary", **summary}], schema=OUTPUT_SCHEMA)


def _newest_accepted(piece: pa.Table, response: pb.PublishResponse) -> int | None:
    """The newest ``t1`` the server accepted of ``piece`` (None: none, or not known).

    Only accepted rows move the watermark: a row the server refused (a
    timestamp far in the future) must not close every epoch before it.  A
    duplicate answer lists no rejections, so a piece it did not accept whole
    is left out.
    """
    rejected = {r.index for r in response.rejected}
    if response.duplicate and response.accepted < piece.num_rows:
        return None
    if len(rejected) >= piece.num_rows:
        return None
    t1 = piece.column("t1")
    if rejected:
        t1 = t1.take(pa.array([i for i in range(piece.num_rows) if i not in rejected]))
    top: int = pc.max(t1).as_py()
    return top


def close_epochs(target: Target, plan: Plan, label: str, watermark: int) -> int:
    """Tell every shard the watermark (no events), all shards at once, so that each applies
    its epochs while the others do; the number of new acknowledgements."""
    connection = target.connect()
    requests = [
        pb.PublishRequest(
            shard=shard,
            shards=plan.shards,
            watermark=watermark,
            idempotency_key=f"{target.feed}:{label}:close:{shard}",
        )
        for shard in range(plan.shards)
    ]
    try:
        with ThreadPoolExecutor(len(requests), thread_name_prefix="close") as pool:
            responses = list(pool.map(lambda request: publish(connection, request), requests))
    finally:
        connection.close()
    return sum(not response.duplicate for response in responses)


def _late_reasons(late: pa.Table, watermark: int, lateness: int) -> pa.Array:
    return pc.binary_join_element_wise(
        "late: t1 = ",
        pc.cast(late.column("t1"), pa.string()),
        f" is not after the watermark {watermark} (allowed lateness {lateness})",
        "",
    )


def _dead(
    rows: pa.Table, field: str | None, reasons: pa.Array | pa.ChunkedArray, raw: bool = True
) -> pa.RecordBatch:
    """Dead-letter rows: field, reason and the input text (or the event, as JSON)."""
    count = rows.num_rows
    fields = rows.column("field") if field is None else pa.repeat(pa.scalar(field), count)
    if raw:
        texts = rows.column("raw")
    else:
        texts = pa.array([_json_row(r) for r in rows.to_pylist()], pa.string())
    columns = {name: pa.nulls(count, pa.int64()) for name in OUTPUT_SCHEMA.names}
    columns.update(
        kind=pa.repeat(pa.scalar("dead"), count),
        field=pc.fill_null(fields, ""),
        reason=reasons,
        raw=texts,
    )
    return pa.Table.from_pydict(columns, schema=OUTPUT_SCHEMA).combine_chunks().to_batches()[0]


def _json_row(row: dict[str, object]) -> str:
    return json.dumps({k: v for k, v in row.items() if v is not None}, sort_keys=True)


def _events(rows: pa.Table) -> pa.Table:
    """The event columns of ``rows``: stream, t0, t1, arrival and the streams' attributes."""
    present = set(pc.unique(rows.column("stream")).to_pylist())
    keep = ["stream", "t0", "t1", "arrival"]
    keep += [name for name in rows.column_names if name.partition("/")[0] in present]
    return rows.select(keep)


def publish(connection: Connection, request: pb.PublishRequest) -> pb.PublishResponse:
    """PublishBatch, retried while the server is unavailable (see :func:`retrying`)."""
    return retrying(
        lambda: cast(
            pb.PublishResponse,
            connection.stub.PublishBatch(request, metadata=connection.metadata, timeout=300),
        )
    )


def retrying(call: Callable[[], Reply]) -> Reply:
    """``call()``, again with backoff while it fails UNAVAILABLE (a server restarting), up to
    ``RETRY_SECONDS``; any other error, or the last one, is raised."""
    deadline = time.monotonic() + RETRY_SECONDS
    pause = 0.2
    while True:
        try:
            return call()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 5.0)
