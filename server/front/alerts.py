"""Listen streams: alerts read back from the catalog, resumable by sequence number.

Every alert is committed to the catalog (:mod:`cesar.server.front.catalog`) before the
batch that made it is acknowledged.  A Listen stream reads them on its own
read-only SQLite connection: first the alerts after each requested resume
point (from the retention window), then live ones in commit order, woken by
:meth:`Listeners.notify`.  Publishing never waits for a consumer, and a
consumer holds at most one page of alerts in memory.

A stream sends :class:`~cesar.v1.cesar_pb2.AlertBatch` messages: the alerts one
read of the catalog found (up to ``PAGE``, at most ``BATCH_BYTES``), built by
framing the stored alert payloads — an alert is never decoded and encoded
again on its way out (the servicer sends the bytes as they are).

Overflow policy: alerts older than the retention window are pruned.  A resume
point before the window, or a live consumer that falls behind it, ends the
stream with OUT_OF_RANGE naming the seq to resume from; the front counts
these (``listen_out_of_range``, ``listen_overruns``).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Generator, Mapping
from pathlib import Path

from cesar.server.front.catalog import connect
from cesar.server.front.errors import OutOfRange

PAGE = 1000
"""Alerts read from the catalog at a time, per stream."""

BATCH_BYTES = 1 << 20
"""An AlertBatch message holds at most this many bytes of alerts (one larger alert goes alone)."""


def _framed(payload: bytes) -> bytes:
    """``payload`` (a serialized Alert) as one element of AlertBatch's field 1."""
    size = len(payload)
    head = bytearray(b"\x0a")
    while size > 0x7F:
        head.append(size & 0x7F | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head) + payload


class _Batches:
    """Serialized AlertBatch messages of at most ``BATCH_BYTES``, filled in order."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.ready: list[bytes] = []

    def add(self, payload: bytes) -> None:
        framed = _framed(payload)
        if self.parts and self.size + len(framed) > BATCH_BYTES:
            self.flush()
        self.parts.append(framed)
        self.size += len(framed)

    def flush(self) -> None:
        if self.parts:
            self.ready.append(b"".join(self.parts))
            self.parts, self.size = [], 0

    def take(self) -> list[bytes]:
        """The complete messages (what was added, flushed)."""
        self.flush()
        ready, self.ready = self.ready, []
        return ready


class Listeners:
    """The wake-up signal for Listen streams, the streams themselves, and how far behind
    the furthest-behind live stream is (:meth:`lag`)."""

    def __init__(self, path: Path, counters: Counter[str]) -> None:
        self.path = path
        self.counters = counters
        self.condition = threading.Condition()
        self.last_alert = 0
        self.closed = False
        self.cursors: dict[int, int] = {}
        """Per open stream (a number of this object's), the last alert id it has read."""
        self.commits: deque[tuple[int, float]] = deque()
        """``(last alert id, monotonic seconds)`` of each notify still needed by :meth:`lag`."""
        self._numbers = itertools.count()

    def notify(self, last_alert: int) -> None:
        """Alerts up to id ``last_alert`` are committed: wake every stream."""
        with self.condition:
            if last_alert > self.last_alert:
                self.commits.append((last_alert, time.monotonic()))
            self.last_alert = last_alert
            self._forget()
            self.condition.notify_all()

    def lag(self) -> tuple[int, float]:
        """``(alert ids, seconds)`` the furthest-behind live stream is behind the catalog.

        Alert ids: committed alerts after the last one that stream has read (of
        every owner: an upper bound on its own).  Seconds: since the first of
        them was committed.  ``(0, 0.0)`` when every stream is up to date.
        O(log commits) under the lock.
        """
        with self.condition:
            if not self.cursors:
                return 0, 0.0
            oldest = min(self.cursors.values())
            behind = self.last_alert - oldest
            if behind <= 0:
                return 0, 0.0
            first = bisect.bisect_right(self.commits, oldest, key=lambda commit: commit[0])
            since = self.commits[first][1] if first < len(self.commits) else time.monotonic()
            return behind, time.monotonic() - since

    def _forget(self) -> None:
        """Drop the commits every open stream has read past (the condition is held)."""
        oldest = min(self.cursors.values(), default=self.last_alert)
        while self.commits and self.commits[0][0] <= oldest:
            self.commits.popleft()

    def _read(self, number: int, cursor: int) -> None:
        """Stream ``number`` has read every alert up to id ``cursor``."""
        with self.condition:
            self.cursors[number] = cursor

    def close(self) -> None:
        """End every stream (server shutdown)."""
        with self.condition:
            self.closed = True
            self.condition.notify_all()

    def stream(
        self,
        owner: str,
        wanted: set[str],
        after_seq: Mapping[str, int],
        active: Callable[[], bool],
    ) -> Generator[bytes]:
        """``owner``'s alerts as serialized AlertBatch messages: those after ``after_seq``
        first, then live ones of ``wanted``.

        ``wanted`` empty means every subscription of ``owner``, including later
        ones.  Runs until ``active()`` is false or the listeners are closed.
        """
        batches = _Batches()
        db = connect(self.path, readonly=True)
        number = next(self._numbers)
        try:
            db.execute("BEGIN")
            cursor = int(db.execute("SELECT COALESCE(MAX(id), 0) FROM alerts").fetchone()[0])
            last = dict(
                db.execute("SELECT id, last_seq FROM subscriptions WHERE owner = ?", (owner,))
            )
            oldest = {
                sub: db.execute(
                    "SELECT MIN(seq) FROM alerts WHERE subscription = ?", (sub,)
                ).fetchone()[0]
                for sub in after_seq
            }
            db.execute("COMMIT")
            self._read(number, cursor)
            for sub, after in sorted(after_seq.items()):
                first = oldest[sub]
                if after < last.get(sub, 0) and (first is None or after + 1 < first):
                    self.counters["listen_out_of_range"] += 1
                    raise OutOfRange(
                        f"alerts of {sub} after seq {after} are past the retention window; "
                        f"the oldest kept is seq {first}"
                    )
                while after < last.get(sub, 0):
                    rows = db.execute(
                        "SELECT seq, payload FROM alerts WHERE subscription = ? AND seq > ? "
                        "AND id <= ? ORDER BY seq LIMIT ?",
                        (sub, after, cursor, PAGE),
                    ).fetchall()
                    if not rows:
                        break
                    for seq, payload in rows:
                        if seq != after + 1:
                            yield from batches.take()
                            self._overrun(sub, after, seq)
                        batches.add(payload)
                        after = seq
                    yield from batches.take()
            while active() and not self.closed:
                with self.condition:
                    if self.last_alert <= cursor and not self.closed:
                        self.condition.wait(0.5)
                    committed = self.last_alert
                self.counters["listen_polls"] += 1
                rows = db.execute(
                    "SELECT id, subscription, seq, payload FROM alerts WHERE owner = ? AND id > ? "
                    "ORDER BY id LIMIT ?",
                    (owner, cursor, PAGE),
                ).fetchall()
                for row_id, sub, seq, payload in rows:
                    cursor = row_id
                    if wanted and sub not in wanted:
                        continue
                    if seq != last.get(sub, 0) + 1:
                        yield from batches.take()
                        self._overrun(sub, last.get(sub, 0), seq)
                    last[sub] = seq
                    batches.add(payload)
                yield from batches.take()
                if len(rows) < PAGE:
                    # The query saw every alert up to `committed`; those it did not return are
                    # other owners'. Without this, a stream would spin while the newest alert
                    # is someone else's.
                    cursor = max(cursor, committed)
                self._read(number, cursor)
        finally:
            with self.condition:
                self.cursors.pop(number, None)
                self._forget()
            db.close()

    def recent(self, subscription: str, count: int) -> list[bytes]:
        """The latest ``count`` alerts of ``subscription`` kept, newest first, as serialized
        Alert messages (its own read-only connection, as a stream's)."""
        db = connect(self.path, readonly=True)
        try:
            rows = db.execute(
                "SELECT payload FROM alerts WHERE subscription = ? ORDER BY seq DESC LIMIT ?",
                (subscription, count),
            ).fetchall()
        finally:
            db.close()
        return [bytes(payload) for (payload,) in rows]

    def _overrun(self, sub: str, sent: int, available: int) -> None:
        """End a stream whose consumer fell behind the retention window."""
        self.counters["listen_overruns"] += 1
        raise OutOfRange(
            f"this consumer fell behind the retention window: alerts of {sub} after seq {sent} "
            f"were pruned before they were sent; resume with after_seq {available - 1} to "
            f"continue from seq {available}"
        )
