"""A client connection to a cesar server: channel, credentials and bearer token.

>>> conn = Connection.open("127.0.0.1:1", token="t")  # connects lazily
>>> conn.metadata
(('authorization', 'Bearer t'),)
>>> conn.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from cesar.automata.schema import Event
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import cesar_pb2_grpc

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),
    ("grpc.max_send_message_length", 256 << 20),
]
"""Channel and server options of every cesar process: messages up to 256 MiB each way."""


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
