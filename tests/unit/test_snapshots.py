"""Snapshot files (server/host/snapshots.py): what is refused, and why; atomic replacement."""

import hashlib
import json
import os
import pickle
from pathlib import Path

import pytest

from cesar.server.host import snapshots
from cesar.server.host.snapshots import MAGIC, SnapshotError, decode, encode


def _with_header(blob: bytes, **changes: object) -> bytes:
    end = blob.find(b"\n", len(MAGIC))
    header = json.loads(blob[len(MAGIC) : end])
    header.update(changes)
    return MAGIC + json.dumps(header).encode() + blob[end:]


def test_a_snapshot_round_trips_plain_data() -> None:
    data = {"a": [1, 2.5, float("inf"), None, True], "b": (("x", "y"),), "c": b"\x00"}
    assert decode(encode(data, 12), 12) == data


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b"PK" + b, "not a cesar snapshot"),
        (lambda b: _with_header(b, version="0.0.9"), "written by cesar 0.0.9"),
        (lambda b: _with_header(b, format=99), "(format 99)"),
        (lambda b: _with_header(b, position=11), "taken at batch 11, not 12"),
        (lambda b: b[:-1], "damaged: "),
        (lambda b: b[:-1] + bytes([b[-1] ^ 1]), "damaged: the checksum does not match"),
        (lambda b: b[: len(MAGIC) + 3], "damaged: the header cannot be read"),
    ],
)
def test_another_version_or_a_damaged_snapshot_is_refused_saying_why(damage, reason) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SnapshotError) as caught:
        decode(damage(encode({"lanes": {}}, 12)), 12)
    assert reason in str(caught.value)


class Payload:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, ("echo pwned",))


def test_a_payload_naming_code_is_refused_without_running_it() -> None:
    payload = pickle.dumps({"x": Payload()}, protocol=5)
    blob = _with_header(encode(None, 3), bytes=len(payload))
    end = blob.find(b"\n", len(MAGIC))
    header = json.loads(blob[len(MAGIC) : end])
    header["sha256"] = hashlib.sha256(payload).hexdigest()
    forged = MAGIC + json.dumps(header).encode() + b"\n" + payload
    with pytest.raises(SnapshotError, match=r"names posix\.system"):
        decode(forged, 3)


def test_write_replaces_atomically_and_prune_keeps_what_is_asked(tmp_path: Path) -> None:
    for position in (3, 6, 9):
        snapshots.write(tmp_path, position, {"at": position})
    (tmp_path / "snapshot-000000000012.tmp").write_bytes(b"half")
    assert snapshots.prune(tmp_path, {6, 9}) == [3, 12]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "snapshot-000000000006.snap",
        "snapshot-000000000009.snap",
    ]
    assert snapshots.read(tmp_path, 9) == {"at": 9}
    with pytest.raises(SnapshotError, match="cannot be read"):
        snapshots.read(tmp_path, 3)
