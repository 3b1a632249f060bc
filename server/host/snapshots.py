"""Snapshot files: plain data, a versioned header and a checksum, written atomically.

A shard saves its run state (:mod:`cesar.server.engine.snapshot`) and the
front its epoch gate as snapshots, so a restart starts from the latest one
and replays only the event log after it (docs/operations.md, "Snapshots and
restart").  This module is their one format::

    CESAR-SNAPSHOT\\n
    {"format": 1, "version": "0.1.0", "position": 1200, "bytes": 5321, "sha256": "…"}\\n
    <pickle of plain data: dict, list, tuple, str, int, float, bool, None, bytes>

:func:`decode` refuses, with a :class:`SnapshotError` saying why, a blob of
another format or cesar version, a damaged one (length or checksum) and one
whose payload names anything but plain data — the reader never runs code
from the file.  :func:`write` replaces ``snapshot-<position>.snap`` in a
directory atomically (a temporary file, fsync, rename, fsync of the
directory): a crash leaves the old file or the new one, never half of one.

>>> blob = encode({"lanes": [1, 2.5, "x", None]}, position=7)
>>> decode(blob, position=7)
{'lanes': [1, 2.5, 'x', None]}
>>> decode(blob[:-1], position=7)
Traceback (most recent call last):
...
cesar.server.host.snapshots.SnapshotError: damaged: 42 bytes of payload, the header says 43
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
from importlib import metadata
from pathlib import Path
from typing import Any

MAGIC = b"CESAR-SNAPSHOT\n"
FORMAT = 1
SUFFIX = ".snap"


def _version() -> str:
    try:
        return metadata.version("cesar")
    except metadata.PackageNotFoundError:
        return "unknown"


VERSION = _version()


class SnapshotError(ValueError):
    """A snapshot that cannot be used; the message says why."""


class _PlainUnpickler(pickle.Unpickler):
    """Builds only the built-in containers and scalars; any class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise SnapshotError(f"the payload names {module}.{name}; a snapshot holds plain data only")


def encode(data: Any, position: int) -> bytes:
    """``data`` (plain values only) as a snapshot blob taken at log ``position``."""
    payload = pickle.dumps(data, protocol=5)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "position": position,
        "bytes": len(payload),
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    return MAGIC + json.dumps(header).encode() + b"\n" + payload


def decode(blob: bytes, position: int) -> Any:
    """The data of a blob :func:`encode` made at ``position``; SnapshotError if unusable."""
    if not blob.startswith(MAGIC):
        raise SnapshotError("not a cesar snapshot")
    end = blob.find(b"\n", len(MAGIC))
    try:
        header = json.loads(blob[len(MAGIC) : end])
        fmt, version, at, size, digest = (
            header[k] for k in ("format", "version", "position", "bytes", "sha256")
        )
    except (ValueError, KeyError, TypeError):
        raise SnapshotError("damaged: the header cannot be read") from None
    if fmt != FORMAT or version != VERSION:
        raise SnapshotError(
            f"written by cesar {version} (format {fmt}); this is cesar {VERSION} (format {FORMAT})"
        )
    if at != position:
        raise SnapshotError(f"taken at batch {at}, not {position}")
    payload = blob[end + 1 :]
    if len(payload) != size:
        raise SnapshotError(f"damaged: {len(payload)} bytes of payload, the header says {size}")
    if hashlib.sha256(payload).hexdigest() != digest:
        raise SnapshotError("damaged: the checksum does not match")
    try:
        return _PlainUnpickler(io.BytesIO(payload)).load()
    except SnapshotError:
        raise
    except Exception as exc:  # any unpickling failure of a payload that passed its checksum
        raise SnapshotError(f"damaged: {exc}") from None


def path_of(directory: Path, position: int) -> Path:
    """Where the snapshot taken at ``position`` lives in ``directory``."""
    return directory / f"snapshot-{position:012d}{SUFFIX}"


def write(directory: Path, position: int, data: Any) -> int:
    """Write ``data`` as the snapshot at ``position``, atomically; its size in bytes."""
    blob = encode(data, position)
    final = path_of(directory, position)
    temporary = final.with_suffix(".tmp")
    with open(temporary, "wb") as handle:
        handle.write(blob)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, final)
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return len(blob)


def read(directory: Path, position: int) -> Any:
    """The data of the snapshot at ``position`` in ``directory``; SnapshotError if unusable."""
    try:
        blob = path_of(directory, position).read_bytes()
    except OSError as exc:
        raise SnapshotError(f"cannot be read: {exc.strerror}") from None
    return decode(blob, position)


def prune(directory: Path, keep: set[int]) -> list[int]:
    """Delete the snapshots (and leftover temporary files) not at a ``keep`` position."""
    removed = []
    for path in directory.glob("snapshot-*"):
        stem = path.name.removeprefix("snapshot-").split(".")[0]
        if path.suffix == SUFFIX and stem.isdigit() and int(stem) in keep:
            continue
        path.unlink(missing_ok=True)
        if stem.isdigit():
            removed.append(int(stem))
    return sorted(removed)
