"""Checkpoints: when the shards save snapshots, and which one a start resumes from.

A *checkpoint* at log position ``P`` (batches committed) is a snapshot of
every shard's run state (:mod:`cesar.server.engine.snapshot`, written by the
shard in its own data directory) plus the front's state at ``P`` (its epoch
gate and each stream's newest time), recorded in the catalog once every
shard has written its file.  The front takes one after a batch commits, under
its lock, when ``batches`` batches or ``seconds`` seconds have passed since
the last; the catalog keeps the newest ``keep`` and compacts the event log up
to the oldest of them (:meth:`~cesar.server.front.catalog.Catalog.add_checkpoint`).

On start, :meth:`Checkpoints.choose` tries the checkpoints newest first: one
every shard loads (same format and version, intact, taken with as many
shards, in the same place, by this server: the catalog's identity) is used;
the reasons for those refused are logged.  With none usable the log must be
whole to replay from the start; otherwise the start is refused with what to
do.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from cesar.server.front.catalog import Catalog
from cesar.server.host import snapshots
from cesar.server.host.snapshots import SnapshotError
from cesar.server.shard.pool import ShardPool

log = logging.getLogger("cesar.front")


class NoCheckpoint(RuntimeError):
    """No checkpoint can be used and the event log before them is compacted."""


@dataclass(frozen=True)
class SnapshotPolicy:
    """Take a checkpoint after ``batches`` batches or ``seconds`` seconds (whichever first,
    checked when a batch commits, and for ``seconds`` twice a second on an idle server too;
    0 turns that trigger off); keep the newest ``keep`` (≥ 1)."""

    batches: int = 1_000
    seconds: float = 60.0
    keep: int = 2

    @property
    def enabled(self) -> bool:
        return self.batches > 0 or self.seconds > 0


@dataclass(frozen=True)
class Taken:
    """One checkpoint this front took: when (Unix seconds), at which log position, how many
    bytes the shards' snapshots hold, how long it took, and where the log was compacted to."""

    at: float
    position: int
    bytes: int
    seconds: float
    compacted_to: int


HISTORY = 20
"""Checkpoints a front remembers (:attr:`Checkpoints.history`), newest last."""


class Checkpoints:
    """The front's checkpoints: :meth:`due`, :meth:`take`, :meth:`choose`."""

    def __init__(self, policy: SnapshotPolicy, catalog: Catalog, shards: ShardPool) -> None:
        self.policy = policy
        self.catalog = catalog
        self.shards = shards
        self.last_position = 0
        self.last_time = time.monotonic()
        self.taken = 0
        self.seconds = 0.0
        self.bytes = 0
        self.history: deque[Taken] = deque(maxlen=HISTORY)
        """The latest checkpoints taken since the front started, newest last."""

    def due(self, position: int) -> bool:
        """Whether a checkpoint is due after batch ``position`` committed."""
        policy = self.policy
        if not policy.enabled or position <= self.last_position:
            return False
        if policy.batches and position - self.last_position >= policy.batches:
            return True
        return bool(policy.seconds) and time.monotonic() - self.last_time >= policy.seconds

    def take(self, position: int, front: dict[str, Any]) -> None:
        """Every shard saves its snapshot at ``position``; then the catalog records it with
        the front's state (and the server's identity) and compacts the log.  A crash in
        between leaves the previous checkpoints in force (a shard's extra file is deleted by
        its next snapshot)."""
        started = time.monotonic()
        keep = [p for p, _, _ in self.catalog.checkpoints()][: self.policy.keep - 1]
        written = self.shards.snapshot(position, keep)
        compacted = self.catalog.add_checkpoint(
            position,
            self.shards.count,
            snapshots.encode({**front, "server": self.catalog.identity}, position),
            self.policy.keep,
        )
        self.last_position, self.last_time = position, time.monotonic()
        self.taken += 1
        self.seconds = self.last_time - started
        self.bytes = sum(r.bytes for r in written)
        self.history.append(Taken(time.time(), position, self.bytes, self.seconds, compacted))
        log.info(
            "checkpoint",
            extra={
                "position": position,
                "bytes": self.bytes,
                "seconds": round(self.seconds, 3),
                "compacted_to": compacted,
            },
        )

    def choose(self) -> tuple[int, dict[str, Any]] | None:
        """Load the newest usable checkpoint into the shards: (position, front state); None
        (the shards empty) when there is none and the log is whole.  Raises NoCheckpoint."""
        refused: list[str] = []
        identity = self.catalog.identity

        def refuse(reason: str) -> None:
            refused.append(reason)
            log.warning("checkpoint refused", extra={"reason": reason})

        for position, count, blob in self.catalog.checkpoints():
            if count != self.shards.count:
                refuse(f"batch {position}: taken with {count} shards")
                continue
            try:
                front = snapshots.decode(blob, position)
            except SnapshotError as exc:
                refuse(f"batch {position}: the front's state: {exc}")
                continue
            if front.get("server", identity) != identity:
                refuse(f"batch {position}: the front's state was written by another server")
                continue
            reasons = self.shards.load(position, identity)
            if not reasons:
                self.last_position = position
                return position, front
            refuse(f"batch {position}: {'; '.join(reasons)}")
        self.shards.load(0, identity)
        compacted = self.catalog.compacted()
        if compacted:
            raise NoCheckpoint(
                "no usable checkpoint ("
                + "; ".join(refused or ["none recorded"])
                + f") and the event log up to batch {compacted} is compacted: start the "
                "cesar version and --shards that wrote them, or restore DATA_DIR from a backup"
            )
        return None
