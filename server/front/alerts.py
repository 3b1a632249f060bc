"""Listen streams: alerts read back from the catalog, resumable by sequence number.

Every alert is committed to the catalog (:mod:`cesar.server.front.catalog`) before the
batch that made it is acknowledged.  A Listen stream reads them on its own
read-only SQLite connection: first the alerts after each requested resume
point (from the retention window), then live ones in commit order, woken by
:meth:`Listeners.notify`.  Publishing never waits for a consumer, and a
consumer holds at most one page of alerts in memory.

The catalog holds a client's alerts of a batch as a row of its log, and merges the log now
and then into rows per subscription (:mod:`cesar.server.front.alertlog`), each alert already
framed as an element of :class:`~cesar.v1.cesar_pb2.AlertBatch`
(:mod:`cesar.server.wire.alertbytes`).  A live stream reads its client's log rows in id
order; a resume reads the subscription's merged rows, then the log; a stream that a merge
passed by (its log rows deleted) reads the merged rows again from what it sent.  A stream
sends AlertBatch messages of the runs one read found (up to ``PAGE`` rows and about
``PAGE_BYTES``), whole runs joined up to ``BATCH_ALERTS`` alerts and ``BATCH_BYTES`` bytes:
an alert is never decoded and encoded again on its way out, nor framed alone (the servicer
sends the bytes as they are).  A stream resuming inside a run skips the run's first alerts.

Overflow policy: alerts older than the retention window are pruned.  A resume
point before the window, or a live consumer that falls behind it, ends the
stream with OUT_OF_RANGE naming the seq to resume from; the front counts
these (``listen_out_of_range``, ``listen_overruns``).

A stream handed to a caller is a :class:`Listening`: it gives the client's Listen slot back
once, however it ends.
"""

from __future__ import annotations

import bisect
import itertools
import sqlite3
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Collection, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from cesar.server.front import alertlog
from cesar.server.front.catalog import LAST_SEQ, connect
from cesar.server.front.errors import OutOfRange
from cesar.server.wire import alertbytes
from cesar.server.wire.alertbytes import ROW_ALERTS, ROW_BYTES

PAGE = 1000
"""Rows of alerts read from the catalog at a time, per stream."""

PAGE_BYTES = 4 << 20
"""A read of the catalog stops once its rows hold this many bytes: what a stream holds."""

BATCH_ALERTS = ROW_ALERTS
"""An AlertBatch message holds at most this many alerts (a stored row holds no more)."""

BATCH_BYTES = ROW_BYTES
"""An AlertBatch message holds at most this many bytes of alerts (a row with one larger
alert goes alone)."""


class _Batches:
    """Serialized AlertBatch messages of whole rows, at most ``BATCH_ALERTS`` alerts and
    ``BATCH_BYTES`` bytes each (a row never holds more), filled in order."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.count = 0
        self.ready: list[bytes] = []

    def add(self, row: bytes, count: int) -> None:
        """Append a row's ``count`` framed alerts."""
        if self.parts and (self.size + len(row) > BATCH_BYTES or self.count + count > BATCH_ALERTS):
            self.flush()
        self.parts.append(row)
        self.size += len(row)
        self.count += count

    def flush(self) -> None:
        if self.parts:
            self.ready.append(b"".join(self.parts))
            self.parts, self.size, self.count = [], 0, 0

    def take(self) -> list[bytes]:
        """The complete messages (what was added, flushed)."""
        self.flush()
        return self.full()

    def full(self) -> list[bytes]:
        """The messages filled so far; what was added since stays for the next."""
        ready, self.ready = self.ready, []
        return ready


def _oldest(
    db: sqlite3.Connection, subs: Collection[str], logged: Sequence[alertlog.Span]
) -> dict[str, int | None]:
    """The oldest seq kept of each of ``subs``: its first merged row's, or its first in the
    log's runs after the merged mark (``logged``, its client's)."""
    oldest: dict[str, int | None] = {
        sub: db.execute("SELECT MIN(seq) FROM alerts WHERE subscription = ?", (sub,)).fetchone()[0]
        for sub in subs
    }
    for sub, first, _, _ in logged:
        if sub in oldest and oldest[sub] is None:
            oldest[sub] = first
    return oldest


def _owned(db: sqlite3.Connection, owner: str) -> set[str]:
    """``owner``'s subscriptions."""
    return {sub for (sub,) in db.execute("SELECT id FROM subscriptions WHERE owner = ?", (owner,))}


def _page(db: sqlite3.Connection, query: str, values: tuple[object, ...]) -> tuple[list[Any], bool]:
    """Rows of ``query`` (its last column the payload), up to ``PAGE`` rows and about
    ``PAGE_BYTES``; whether they are all it had.  The statement ends before the caller
    yields: no read stays open while a consumer is slow."""
    cursor = db.execute(f"{query} LIMIT {PAGE}", values)
    rows: list[Any] = []
    size = 0
    try:
        while size < PAGE_BYTES:
            got = cursor.fetchmany(64)
            if not got:
                return rows, len(rows) < PAGE
            rows.extend(got)
            size += sum(len(row[-1]) for row in got)
        return rows, False
    finally:
        cursor.close()


class Listeners:
    """The wake-up signal for Listen streams, the streams themselves, and how far behind
    the furthest-behind live stream is (:meth:`lag`)."""

    def __init__(self, path: Path, counters: Counter[str]) -> None:
        self.path = path
        self.counters = counters
        self.condition = threading.Condition()
        self.last_alert = 0
        """The id of the newest row of alerts committed."""
        self.alerts = 0
        """Alerts committed since start."""
        self.closed = False
        self.cursors: dict[int, int] = {}
        """Per open stream (a number of this object's), the last row id it has read."""
        self.commits: deque[tuple[int, float, int]] = deque()
        """``(last row id, monotonic seconds, alerts committed before it)`` of each notify
        still needed by :meth:`lag`."""
        self._numbers = itertools.count()

    def notify(self, last_alert: int, alerts: int = 0) -> None:
        """Rows of alerts up to id ``last_alert`` are committed, ``alerts`` alerts more than
        at the last call: wake every stream."""
        with self.condition:
            if last_alert > self.last_alert:
                self.commits.append((last_alert, time.monotonic(), self.alerts))
            self.last_alert = last_alert
            self.alerts += alerts
            self._forget()
            self.condition.notify_all()

    def lag(self) -> tuple[int, float]:
        """``(alerts, seconds)`` the furthest-behind live stream is behind the catalog.

        Alerts: committed after the last commit that stream has read whole (of
        every owner: an upper bound on its own).  Seconds: since the first of
        them was committed.  ``(0, 0.0)`` when every stream is up to date.
        O(log commits) under the lock.
        """
        with self.condition:
            if not self.cursors:
                return 0, 0.0
            oldest = min(self.cursors.values())
            if self.last_alert <= oldest:
                return 0, 0.0
            first = bisect.bisect_right(self.commits, oldest, key=lambda commit: commit[0])
            if first == len(self.commits):
                return 0, 0.0
            _, since, before = self.commits[first]
            return self.alerts - before, time.monotonic() - since

    def _forget(self) -> None:
        """Drop the commits every open stream has read past (the condition is held)."""
        oldest = min(self.cursors.values(), default=self.last_alert)
        while self.commits and self.commits[0][0] <= oldest:
            self.commits.popleft()

    def _read(self, number: int, cursor: int) -> None:
        """Stream ``number`` has read every row of alerts up to id ``cursor``."""
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
        ones.  Runs until ``active()`` is false or the listeners are closed.  The
        stream keeps the last seq it sent of each subscription: the merged rows and the
        log may both hold an alert (``alert_log_dropped`` lags ``alerts_merged``), and it
        is sent once.
        """
        batches = _Batches()
        db = connect(self.path, readonly=True)
        number = next(self._numbers)
        try:
            db.execute("BEGIN")
            position = alertlog.last_id(db)
            sent = dict(
                db.execute(f"SELECT id, {LAST_SEQ} FROM subscriptions WHERE owner = ?", (owner,))
            )
            logged = list(alertlog.unmerged_spans(db, owner, position))
            sent.update((sub, last) for sub, _, last, _ in logged)
            oldest = _oldest(db, after_seq, logged)
            db.execute("COMMIT")
            self._read(number, position)
            for sub, after in sorted(after_seq.items()):
                first = oldest[sub]
                if after < sent.get(sub, 0) and (first is None or after + 1 < first):
                    self.counters["listen_out_of_range"] += 1
                    raise OutOfRange(
                        f"alerts of {sub} after seq {after} are past the retention window; "
                        f"the oldest kept is seq {first}"
                    )
            replay = {sub: after for sub, after in after_seq.items() if after < sent.get(sub, 0)}
            start = position
            if replay:  # the merged rows, then the log up to `start` (and on, if live)
                sent.update(replay)
                position = yield from self._merged(db, sorted(replay), sent, batches)
            while position < start or (active() and not self.closed):
                with self.condition:  # rows up to `start` were committed before it began
                    if max(self.last_alert, start) <= position and not self.closed:
                        self.condition.wait(0.5)
                    committed = max(self.last_alert, start)
                self.counters["listen_polls"] += 1
                db.execute("BEGIN")
                if position < alertlog.mark(db, "alert_log_dropped"):  # merged past us
                    subs = set(wanted) if wanted else set(sent) | _owned(db, owner)
                    db.execute("COMMIT")
                    position = yield from self._merged(db, sorted(subs), sent, batches)
                    continue
                rows, complete = _page(
                    db,
                    "SELECT id, spans, payload FROM alert_log WHERE owner = ? AND id > ? "
                    "ORDER BY id",
                    (owner, position),
                )
                db.execute("COMMIT")
                for row_id, spans, payload in rows:
                    position = row_id
                    for sub, first, last, data in alertlog.chunks(spans, payload):
                        if not wanted or sub in wanted:
                            yield from self._send(batches, sent, sub, first, last, data)
                yield from batches.take()
                if complete:
                    # The query saw every row up to `committed`; those it did not return are
                    # other owners'. Without this, a stream would spin while the newest row
                    # is someone else's.
                    position = max(position, committed)
                self._read(number, position)
        finally:
            with self.condition:
                self.cursors.pop(number, None)
                self._forget()
            db.close()

    def _merged(
        self, db: sqlite3.Connection, subs: list[str], sent: dict[str, int], batches: _Batches
    ) -> Generator[bytes, None, int]:
        """Send each of ``subs``' merged alerts after its seq in ``sent``, a page a read; the
        log id through which every merged row was read (to read the log on from)."""
        through: int | None = None
        for sub in subs:
            while True:
                db.execute("BEGIN")
                merged: int = alertlog.mark(db, "alerts_merged")
                rows, complete = _page(
                    db,
                    "SELECT seq, last_seq, payload FROM alerts WHERE subscription = ? "
                    "AND last_seq > ? ORDER BY last_seq",
                    (sub, sent.get(sub, 0)),
                )
                db.execute("COMMIT")
                for seq, last_seq, payload in rows:
                    yield from self._send(batches, sent, sub, seq, last_seq, payload)
                yield from batches.full()  # a message holds the alerts of many subscriptions
                if complete:
                    through = merged if through is None else min(through, merged)
                    break
        yield from batches.take()
        return alertlog.mark(db, "alerts_merged") if through is None else through

    def _send(
        self, batches: _Batches, sent: dict[str, int], sub: str, first: int, last: int, data: bytes
    ) -> Iterator[bytes]:
        """Add alerts ``first`` … ``last`` of ``sub`` (framed, ``data``) past those sent; end
        the stream (:meth:`_overrun`) at a gap: the ones between were pruned."""
        have = sent.get(sub, 0)
        if last <= have:
            return
        if first > have + 1:
            yield from batches.take()
            self._overrun(sub, have, first)
        batches.add(data if first > have else alertbytes.after(data, have + 1 - first), last - have)
        sent[sub] = last

    def recent(self, subscription: str, count: int) -> list[bytes]:
        """The latest ``count`` alerts of ``subscription`` kept, newest first, as serialized
        Alert messages (its own read-only connection, as a stream's)."""
        db = connect(self.path, readonly=True)
        try:
            db.execute("BEGIN")
            found = db.execute(
                "SELECT owner FROM subscriptions WHERE id = ?", (subscription,)
            ).fetchone()
            logged = [
                data
                for sub, _, _, data in alertlog.unmerged(db, found[0] if found else "")
                if sub == subscription
            ]
            rows = db.execute(
                "SELECT payload FROM alerts WHERE subscription = ? ORDER BY last_seq DESC LIMIT ?",
                (subscription, count),
            ).fetchall()
            db.execute("COMMIT")
        finally:
            db.close()
        newest: list[bytes] = []
        for payload in [*reversed(logged), *(row[0] for row in rows)]:
            newest.extend(reversed(list(alertbytes.frames(payload))))
            if len(newest) >= count:
                break
        return newest[:count]

    def _overrun(self, sub: str, sent: int, available: int) -> None:
        """End a stream whose consumer fell behind the retention window."""
        self.counters["listen_overruns"] += 1
        raise OutOfRange(
            f"this consumer fell behind the retention window: alerts of {sub} after seq {sent} "
            f"were pruned before they were sent; resume with after_seq {available - 1} to "
            f"continue from seq {available}"
        )


class Listening:
    """One Listen stream: its batches, and the client's Listen slot, given back once when the
    stream ends, fails or is closed — also when it was never read (a caller gone before the
    first batch)."""

    def __init__(self, batches: Generator[bytes], release: Callable[[], None]) -> None:
        self._batches = batches
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Listening:
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._batches)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """End the stream and give its slot back (once)."""
        release, self._release = self._release, None
        if release is not None:
            try:
                self._batches.close()
            finally:
                release()
