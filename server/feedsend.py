"""Delivery: the feed's released rows to the front, one PublishBatch per (micro-batch, shard).

:func:`send` is the ``mapInArrow`` step that runs on executors after the rows
are partitioned by shard and sorted by ``(shard, t1, batch, arrival)``.  Each
shard's rows become Arrow IPC payloads (:mod:`server.arrowevents`) of at most
``max_rows`` events, cut only between epochs when the shard has more rows than
that, each with the idempotency key ``FEED:LABEL:SHARD:CHUNK`` (LABEL: the batch
id, or ``N.close`` for the closing release of ``--available-now``): a micro-batch
that Spark runs again after a crash sends the same keys, and the front applies
each key once.  The last payload of a shard carries the micro-batch's
watermark, so the front processes every epoch at once.

The function yields one row per payload (its acknowledgement) and one per
event the front rejected, with the reason, for the driver's counters and dead
letter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pyarrow as pa
import pyarrow.compute as pc

from cesar.v1 import cesar_pb2 as pb
from server.arrowevents import encode
from server.client import Connection

ACKS = (
    "shard int, chunk int, accepted bigint, duplicate boolean, field string, reason string, "
    "raw string"
)
ACK_SCHEMA = pa.schema(
    [
        ("shard", pa.int32()),
        ("chunk", pa.int32()),
        ("accepted", pa.int64()),
        ("duplicate", pa.bool_()),
        ("field", pa.string()),
        ("reason", pa.string()),
        ("raw", pa.string()),
    ]
)
RETRY_SECONDS = 120.0


@dataclass(frozen=True)
class Target:
    """Where and how executors reach the front; plain data shipped with the task."""

    address: str
    token: str | None
    tls_ca: str | None
    shards: int
    feed: str
    max_rows: int

    def connect(self) -> Connection:
        return Connection.open(self.address, self.token, Path(self.tls_ca) if self.tls_ca else None)


def send(
    batches: Iterator[pa.RecordBatch], target: Target, label: str, watermark: int
) -> Iterator[pa.RecordBatch]:
    """Publish this partition's rows; yield acknowledgements and rejections (module docstring)."""
    parts = [b for b in batches if b.num_rows]
    if not parts:
        return
    table = pa.Table.from_batches(parts)
    connection = target.connect()
    try:
        for shard in pc.unique(table.column("shard")).to_pylist():
            rows = table.filter(pc.equal(table.column("shard"), shard))
            chunks = list(_chunks(rows, target.max_rows))
            for number, chunk in enumerate(chunks):
                request = pb.PublishRequest(
                    arrow_events=encode(_events(chunk)),
                    shard=shard,
                    shards=target.shards,
                    idempotency_key=f"{target.feed}:{label}:{shard}:{number}",
                    watermark=watermark if number == len(chunks) - 1 else 0,
                )
                response = _publish(connection, request)
                yield _ack(shard, number, response, chunk)
    finally:
        connection.close()


def _chunks(rows: pa.Table, max_rows: int) -> Iterator[pa.Table]:
    """``rows`` in pieces of at most ``max_rows``, cut between epochs (an epoch stays whole)."""
    start = 0
    t1 = rows.column("t1").to_numpy()
    while start < rows.num_rows:
        end = min(start + max_rows, rows.num_rows)
        if end < rows.num_rows:
            cut = end
            while cut > start and t1[cut] == t1[cut - 1]:
                cut -= 1
            end = cut if cut > start else end
        yield rows.slice(start, end - start)
        start = end


def _events(rows: pa.Table) -> pa.Table:
    """The event columns of ``rows``: stream, t0, t1 and the attributes of streams present."""
    present = set(pc.unique(rows.column("stream")).to_pylist())
    keep = ["stream", "t0", "t1"]
    keep += [name for name in rows.column_names if name.partition("/")[0] in present]
    return rows.select(keep)


def _publish(connection: Connection, request: pb.PublishRequest) -> pb.PublishResponse:
    """PublishBatch, retried while the server is unavailable (restarting) for a while."""
    deadline = time.monotonic() + RETRY_SECONDS
    pause = 0.2
    while True:
        try:
            return connection.stub.PublishBatch(request, metadata=connection.metadata, timeout=300)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 5.0)


def _ack(shard: int, chunk: int, response: pb.PublishResponse, rows: pa.Table) -> pa.RecordBatch:
    records = [
        {
            "shard": shard,
            "chunk": chunk,
            "accepted": response.accepted,
            "duplicate": response.duplicate,
            "field": None,
            "reason": None,
            "raw": None,
        }
    ]
    for rejected in response.rejected:
        event = {
            k: v for k, v in rows.slice(rejected.index, 1).to_pylist()[0].items() if v is not None
        }
        records.append(
            {
                "shard": shard,
                "chunk": chunk,
                "accepted": 0,
                "duplicate": False,
                "field": rejected.field,
                "reason": f"rejected by the server: {rejected.reason}",
                "raw": json.dumps(event, sort_keys=True),
            }
        )
    return pa.RecordBatch.from_pylist(records, schema=ACK_SCHEMA)
