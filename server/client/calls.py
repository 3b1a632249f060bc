"""The requests the clients send, built once for the blocking and the asyncio client.

Each function turns a client method's arguments into its request message; the
clients send it and turn the answer into :mod:`cesar.client.model` values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cesar.automata.schema import SchemaError, StreamSchema, parse_stream_spec
from cesar.client.model import Published, Rejection, event_message
from cesar.server.front.limits import MAX_SUBSCRIBE_BATCH
from cesar.server.wire.eventcolumns import StreamColumns, arrow_bytes
from cesar.v1 import cesar_pb2 as pb

PUBLISH_BATCH = 1_000
"""Events per Publish request, by default."""

LOG = logging.getLogger("cesar.client")
"""Where a publish call that had events refused says so (a warning), besides its result."""


def subscribe_requests(
    queries: Sequence[str], keys: Sequence[str] | None
) -> Iterator[pb.SubscribeBatchRequest]:
    """``queries`` (with their idempotency ``keys``) in SubscribeBatch requests of at most
    MAX_SUBSCRIBE_BATCH each."""
    if keys is not None and len(keys) != len(queries):
        raise ValueError(f"{len(keys)} idempotency keys for {len(queries)} queries")
    for start in range(0, len(queries), MAX_SUBSCRIBE_BATCH):
        chunk = range(start, min(start + MAX_SUBSCRIBE_BATCH, len(queries)))
        yield pb.SubscribeBatchRequest(
            subscriptions=[
                pb.SubscribeRequest(
                    query=queries[i], idempotency_key="" if keys is None else keys[i]
                )
                for i in chunk
            ]
        )


def publish_requests(
    schema: StreamSchema,
    events: Iterable[Mapping[str, Any]],
    batch: int,
    close: bool,
    idempotency_key: str,
) -> list[pb.PublishRequest]:
    """``events`` of ``schema``'s stream in requests of ``batch`` events; the k-th (from 1)
    keyed ``<idempotency_key>/<k>`` when a key is given, the last closing its epoch with a
    watermark at the greatest ``t1`` when ``close``.  Every event is converted before any
    request is sent, so a malformed one (ValueError, TypeError) sends nothing.

    A request goes as Arrow columns (``arrow_events``, which the server takes without a
    Python object per event) when each of its events has exactly its schema's attributes
    and types; otherwise as protobuf events, so that the server names each one it refuses,
    and why, at its index.
    """
    if batch < 1:
        raise ValueError(f"batch is at least 1, not {batch}")
    messages = [event_message(schema, row) for row in events]
    requests = []
    for start in range(0, len(messages), batch):
        chunk = messages[start : start + batch]
        request = pb.PublishRequest(
            idempotency_key=f"{idempotency_key}/{start // batch + 1}" if idempotency_key else ""
        )
        columns = StreamColumns(schema)
        if all(columns.take(i, message) for i, message in enumerate(chunk)):
            request.arrow_events = arrow_bytes([columns.table()])
        else:
            request.events.extend(chunk)
        requests.append(request)
    if requests and close:
        requests[-1].watermark = max(message.t1 for message in messages)
    return requests


def published(
    stream: str,
    requests: Sequence[pb.PublishRequest],
    answers: Iterable[pb.PublishResponse],
    batch: int,
) -> Published:
    """The sum of a publish call's ``answers``, one per request of ``batch`` events (the last
    may hold fewer): rejections indexed from the call's first event, and the ``t1`` the last
    request closed time through.  Refused events
    are also logged, once per call (a warning on ``cesar.client``): a late one's reason says
    which earlier close made it late."""
    accepted, duplicate, last = 0, True, 0
    rejected: list[Rejection] = []
    for number, answer in enumerate(answers):
        one = Published.of(answer)
        accepted += one.accepted
        rejected.extend(replace(r, index=r.index + number * batch) for r in one.rejected)
        duplicate = duplicate and one.duplicate
        last = one.batch
    closed = requests[-1].watermark if requests and requests[-1].watermark else None
    out = Published(accepted, tuple(rejected), duplicate and bool(requests), last, closed)
    if rejected:
        first = rejected[0]
        LOG.warning(
            "publish to %s: %s; the first, event %d: %s: %s",
            stream,
            out,
            first.index,
            first.field,
            first.reason,
        )
    return out


def stream_schema(spec: str) -> StreamSchema:
    """The schema of a spec the server printed."""
    try:
        return parse_stream_spec(spec)
    except SchemaError as exc:
        raise ValueError(f"the server's stream spec {spec!r}: {exc}") from None
