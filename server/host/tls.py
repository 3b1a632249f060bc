"""TLS server credentials from PEM files, checked: a key that is not its certificate's is refused.

Used by the front (``cesar serve --tls-cert/--tls-key``) and by a shard on its
own (``cesar shard --tls-cert/--tls-key``).
"""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc


class TlsError(ValueError):
    """Certificate and key files that cannot serve TLS; the message says why."""


def server_credentials(cert: Path | None, key: Path | None) -> grpc.ServerCredentials | None:
    """Credentials for ``cert`` and ``key`` (None when both are None)."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise TlsError("--tls-cert and --tls-key go together")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
        key_bytes, cert_bytes = key.read_bytes(), cert.read_bytes()
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(
            f"--tls-cert {cert} and --tls-key {key}: {exc} (is the key the certificate's?)"
        ) from None
    return grpc.ssl_server_credentials([(key_bytes, cert_bytes)])
