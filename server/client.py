"""A client connection to a cesar server: channel, credentials and bearer token.

>>> conn = Connection.open("127.0.0.1:1", token="t")  # connects lazily
>>> conn.metadata
(('authorization', 'Bearer t'),)
>>> conn.close()
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from cesar.v1 import cesar_pb2_grpc
from server.shard import GRPC_OPTIONS


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
