"""The server a load test drives: one it starts on loopback, or a running one's tokens.

:func:`serve` starts ``cesar serve`` in a scratch folder with a tokens file of
one client per subscriber and one for the publishers (scope ``client,admin``,
for the server-wide Stats); :func:`running_tokens` reads a running server's
tokens file, the subscribers' first and the publishers' last. A load test
floods its target, so it drives only loopback addresses (:func:`loopback`).
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import grpc

from cesar.perf.loadcli import Settings
from cesar.server.wire.client import Connection
from cesar.v1 import cesar_pb2 as pb

CESAR = Path(sys.executable).with_name("cesar")


def loopback(address: str) -> str:
    """``address`` (HOST:PORT) if HOST is a loopback address; else SystemExit with the reason.

    A load test floods its target: it only drives servers on this machine.

    >>> loopback("127.0.0.1:50051"), loopback("[::1]:7")
    ('127.0.0.1:50051', '[::1]:7')
    """
    host = address.rpartition(":")[0].strip("[]")
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror as exc:
        raise SystemExit(f"cesar loadtest: cannot resolve {host}: {exc}") from None
    if not infos or not all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos):
        raise SystemExit(
            f"cesar loadtest: {address} is not a loopback address; it drives local servers only"
        )
    return address


def define(conn: Connection, spec: str) -> None:
    """Define the workload's input stream (kept if the server has it already)."""
    try:
        conn.stub.DefineStream(pb.DefineStreamRequest(spec=spec), metadata=conn.metadata)
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise


def serve(settings: Settings, data: Path) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start ``cesar serve`` with one token per subscriber and one for the publishers."""
    tokens = [secrets.token_hex(8) for _ in range(settings.subscribers + 1)]
    names = [f"sub{i}" for i in range(settings.subscribers)] + ["publisher scope=client,admin"]
    (data / "tokens").write_text("".join(f"{t} {n}\n" for t, n in zip(tokens, names, strict=True)))
    process = subprocess.Popen(
        [str(CESAR), "serve", "--data-dir", str(data / "server"), "--port", "0",
         "--shards", str(settings.serve), "--tokens", str(data / "tokens"),
         "--max-subscriptions", str(settings.per_subscriber * 2 + 10_000),
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert process.stdout is not None
    address = process.stdout.readline().split()[1]
    return process, address, tokens


def running_tokens(settings: Settings) -> list[str]:
    """The subscribers' tokens of a running server's tokens file, then the publishers'
    (its last); SystemExit if it holds too few."""
    path = Path(settings.tokens)
    tokens = [line.split()[0] for line in path.read_text().splitlines()
              if line.strip() and not line.startswith("#")]  # fmt: skip
    if len(tokens) < settings.subscribers + 1:
        raise SystemExit(f"cesar loadtest: {path} needs {settings.subscribers + 1} tokens")
    return [*tokens[: settings.subscribers], tokens[-1]]
