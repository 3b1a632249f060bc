"""A client connection to a cesar server: channel, credentials and bearer token.

>>> conn = Connection.open("127.0.0.1:1", token="t")  # connects lazily
>>> conn.metadata
(('authorization', 'Bearer t'),)
>>> conn.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from cesar.automata.schema import Event, StreamSchema
from cesar.server.wire.convert import to_event
from cesar.server.wire.eventcolumns import StreamColumns, arrow_bytes
from cesar.server.wire.transport import GRPC_OPTIONS
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import cesar_pb2_grpc


@dataclass
class Connection:
    """A channel, the Cesar stub on it, and the metadata every call carries."""

    channel: grpc.Channel
    stub: cesar_pb2_grpc.CesarStub
    metadata: tuple[tuple[str, str], ...]

    @staticmethod
    def open(target: str, token: str | None = None, tls_ca: Path | None = None) -> Connection:
        """Connect to ``target`` (HOST:PORT); TLS when ``tls_ca`` (PEM roots) is given."""
        if tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=tls_ca.read_bytes())
            channel = grpc.secure_channel(target, credentials, options=GRPC_OPTIONS)
        else:
            channel = grpc.insecure_channel(target, options=GRPC_OPTIONS)
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return Connection(channel, cesar_pb2_grpc.CesarStub(channel), metadata)

    def close(self) -> None:
        """Close the channel."""
        self.channel.close()


def list_streams(
    stub: cesar_pb2_grpc.CesarStub,
    metadata: Sequence[tuple[str, str]],
    timeout: float | None = None,
) -> list[pb.StreamInfo]:
    """Every stream the caller may use, page after page of ListStreams."""
    streams: list[pb.StreamInfo] = []
    token = ""
    while True:
        page = stub.ListStreams(
            pb.ListStreamsRequest(page_token=token), metadata=metadata, timeout=timeout
        )
        streams.extend(page.streams)
        token = page.next_page_token
        if not token:
            return streams


def alerts(batches: Iterable[pb.AlertBatch]) -> Iterator[pb.Alert]:
    """The alerts of a Listen stream, one by one (its messages carry many each)."""
    for batch in batches:
        yield from batch.alerts


def publish_requests(
    events: Sequence[Event], batch: int = 1000, close: bool = True
) -> list[pb.PublishRequest]:
    """``events`` (sorted by t1) as PublishRequests of ``batch`` events each.

    With ``close`` the last request carries a watermark at the last ``t1``, so
    the server processes the final epoch at once instead of waiting for a later
    event.

    >>> from cesar.automata.schema import Event
    >>> reqs = publish_requests([Event.of("S", t, t, {}) for t in range(5)], batch=2)
    >>> [(len(r.events), r.watermark) for r in reqs]
    [(2, 0), (2, 0), (1, 4)]
    """
    out = [
        pb.PublishRequest(events=[to_event(e) for e in events[i : i + batch]])
        for i in range(0, len(events), batch)
    ]
    if out and close:
        out[-1].watermark = events[-1].t1
    return out


def arrow_requests(
    events: Sequence[Event],
    schemas: Mapping[str, StreamSchema],
    batch: int = 1000,
    close: bool = True,
) -> list[pb.PublishRequest]:
    """:func:`publish_requests` with each request's events as Arrow columns
    (``arrow_events``): validated ``events`` (sorted by t1) of the streams in ``schemas``.

    >>> from cesar.automata.schema import parse_stream_spec
    >>> schemas = {"S": parse_stream_spec("S(x:int)")}
    >>> reqs = arrow_requests([Event.of("S", t, t, {"x": t}) for t in range(5)], schemas, 2)
    >>> [(len(r.events), bool(r.arrow_events), r.watermark) for r in reqs]
    [(0, True, 0), (0, True, 0), (0, True, 4)]
    """
    out = []
    for start in range(0, len(events), batch):
        columns: dict[str, StreamColumns] = {}
        for index, event in enumerate(events[start : start + batch]):
            found = columns.get(event.stream)
            if found is None:
                found = columns[event.stream] = StreamColumns(schemas[event.stream])
            found.add(index, event)
        tables = [found.table() for found in columns.values()]
        out.append(pb.PublishRequest(arrow_events=arrow_bytes(tables)))
    if out and close:
        out[-1].watermark = events[-1].t1
    return out


_INT64 = {
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED64,
}


def message_data(message: Message) -> dict[str, Any]:
    """A message as JSON data, fields by their proto names and 64-bit integers as numbers.

    (Protobuf's JSON mapping writes 64-bit integers as strings, for JavaScript.)

    >>> message_data(pb.StatsResponse(front={"events": 2**40}))
    {'front': {'events': 1099511627776}, 'shards': []}
    """
    data = MessageToDict(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
    )
    return _numbers(message.DESCRIPTOR, data)


def _numbers(descriptor: Descriptor, data: dict[str, Any]) -> dict[str, Any]:
    for field in descriptor.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        inner = field.message_type
        if inner is not None and inner.GetOptions().map_entry:
            of = inner.fields_by_name["value"]
            if of.message_type is not None:
                value = {k: _numbers(of.message_type, v) for k, v in value.items()}
            elif of.type in _INT64:
                value = {k: int(v) for k, v in value.items()}
        elif inner is not None:
            if field.is_repeated:
                value = [_numbers(inner, item) for item in value]
            else:
                value = _numbers(inner, value)
        elif field.type in _INT64:
            is_list = field.is_repeated
            value = [int(item) for item in value] if is_list else int(value)
        data[field.name] = value
    return data
