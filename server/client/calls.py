"""The requests the clients send, built once for the blocking and the asyncio client.

Each function turns a client method's arguments into its request message; the
clients send it and turn the answer into :mod:`cesar.client.model` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from cesar.automata.schema import SchemaError, StreamSchema, parse_stream_spec
from cesar.client.model import event_message
from cesar.server.front.limits import MAX_SUBSCRIBE_BATCH
from cesar.v1 import cesar_pb2 as pb

PUBLISH_BATCH = 1_000
"""Events per Publish request, by default."""


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
) -> Iterator[pb.PublishRequest]:
    """``events`` of ``schema``'s stream in requests of ``batch`` events; the k-th keyed
    ``<idempotency_key>/<k>`` when a key is given, the last closing its epoch with a
    watermark at the greatest ``t1`` when ``close``.

    The requests are made as they are sent, so an iterator of any length streams.
    """
    if batch < 1:
        raise ValueError(f"batch is at least 1, not {batch}")
    pending: list[pb.Event] = []
    held: pb.PublishRequest | None = None
    number = 0
    newest = 0
    for row in events:
        message = event_message(schema, row)
        newest = max(newest, message.t1)
        pending.append(message)
        if len(pending) < batch:
            continue
        if held is not None:
            yield held
        number += 1
        held = _keyed(pending, idempotency_key, number)
        pending = []
    if pending:
        if held is not None:
            yield held
        number += 1
        held = _keyed(pending, idempotency_key, number)
    if held is not None:
        if close:
            held.watermark = newest
        yield held


def _keyed(events: list[pb.Event], key: str, number: int) -> pb.PublishRequest:
    return pb.PublishRequest(events=events, idempotency_key=f"{key}/{number}" if key else "")


def stream_schema(spec: str) -> StreamSchema:
    """The schema of a spec the server printed."""
    try:
        return parse_stream_spec(spec)
    except SchemaError as exc:
        raise ValueError(f"the server's stream spec {spec!r}: {exc}") from None
