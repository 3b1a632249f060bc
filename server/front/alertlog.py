"""The catalog's alerts in two levels: a log of a row per client and batch, merged now and then
into rows per subscription (a log-structured merge of two levels, as in O'Neil et al.'s
LSM-tree, 1996).

A row per subscription and batch (the layout before 2026-12-01) cost the committer a random
insert into ``alerts_by_subscription`` per subscription a batch alerted, more as the table
grew (perf/catalogbench.py: 9.5 ms of CPU a batch of 1,500 rows at the start, 24.7 at 1.5M
rows).  Now:

* **The log** (``alert_log``): a batch's commit appends one row per client whose
  subscriptions it alerted, in id order: their alerts framed as Listen sends them
  (:mod:`cesar.server.wire.alertbytes`), one subscription after the other, and a *span* per
  run of one subscription's alerts (its id, first and last seq, bytes).  A live Listen
  stream reads its client's rows here.
* **The merge** (:func:`merge`), in the committer's transaction every
  :data:`MERGE_BATCHES` batches with alerts (sooner at :data:`MERGE_BYTES` of them, or when a
  subscription's alerts in the log reach the retention): each subscription's spans of the
  log joined into rows of at most ``ROW_ALERTS`` alerts and about ``ROW_BYTES`` bytes,
  inserted into ``alerts`` in subscription order, the retention pruned there, the spans of
  removed subscriptions dropped.  Log rows stay one merge longer (*dropped* lags
  *merged*), so a stream a little behind reads on from the log; one further behind reads
  the merged rows again.

Marks (in ``marks``): ``alerts_merged``, the log id merged through; ``alert_log_dropped``,
the log id up to which log rows were deleted.  A subscription's alerts are its merged rows,
then its spans in the log rows after ``alerts_merged``, seqs ascending.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterator, Sequence

from cesar.server.wire.alertbytes import ROW_ALERTS, ROW_BYTES

SCHEMA = """
CREATE TABLE IF NOT EXISTS alert_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    batch INTEGER NOT NULL,
    owner TEXT NOT NULL,
    spans BLOB NOT NULL,
    payload BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS alert_log_by_owner ON alert_log (owner, id);
"""
"""The log's table; ids AUTOINCREMENT (a live stream's cursor must never see one again)."""

MERGE_BATCHES = 64
"""The log is merged once it holds this many batches' alerts (or :data:`MERGE_BYTES` of
them, or a subscription's alerts in it reach the retention)."""

MERGE_BYTES = 64 << 20
"""The log is merged once its rows after the merged mark hold this many bytes of alerts:
what a merge holds in memory."""

Span = tuple[str, int, int, int]
"""A run of one subscription's alerts in a log row: (subscription, first seq, last seq,
bytes)."""

Chunk = tuple[str, int, int, bytes]
"""A run of one subscription's framed alerts: (subscription, first seq, last seq, bytes)."""

Runs = dict[str, list[tuple[int, int, bytes]]]
"""Per subscription, its runs in the log after the merged mark: (first, last, framed alerts),
seqs ascending."""


_COUNT = struct.Struct("<I")
_SPAN = struct.Struct("<qqII")


def pack_spans(spans: Sequence[Span]) -> bytes:
    """A log row's spans as bytes: their count, a fixed part each, then the ids.

    >>> unpack_spans(pack_spans([("s1", 1, 3, 90), ("s22", 7, 7, 30)]))
    [('s1', 1, 3, 90), ('s22', 7, 7, 30)]
    """
    names = [sub.encode() for sub, _, _, _ in spans]
    fixed = [
        _SPAN.pack(first, last, size, len(name))
        for (_, first, last, size), name in zip(spans, names, strict=True)
    ]
    return b"".join([_COUNT.pack(len(spans)), *fixed, *names])


def unpack_spans(blob: bytes) -> list[Span]:
    """The spans :func:`pack_spans` wrote.  O(spans)."""
    (count,) = _COUNT.unpack_from(blob)
    at = _COUNT.size + count * _SPAN.size
    spans: list[Span] = []
    for first, last, size, length in _SPAN.iter_unpack(blob[_COUNT.size : at]):
        spans.append((blob[at : at + length].decode(), first, last, size))
        at += length
    return spans


def chunks(spans: bytes, payload: bytes) -> Iterator[Chunk]:
    """A log row's runs of alerts, in order."""
    at = 0
    for sub, first, last, size in unpack_spans(spans):
        yield sub, first, last, payload[at : at + size]
        at += size


def log_rows(
    batch: int, rows: Sequence[tuple[str, int, int, str, bytes]]
) -> list[tuple[int, str, bytes, bytes]]:
    """A batch's rows of alerts ``(subscription, first, last, owner, framed)`` as log rows, one
    per owner in order of first appearance: ``(batch, owner, spans, payload)``.  O(rows)."""
    spans: dict[str, list[Span]] = {}
    payloads: dict[str, list[bytes]] = {}
    for sub, first, last, owner, data in rows:
        span = (sub, first, last, len(data))
        if owner in spans:
            spans[owner].append(span)
            payloads[owner].append(data)
        else:
            spans[owner] = [span]
            payloads[owner] = [data]
    return [
        (batch, owner, pack_spans(owned), b"".join(payloads[owner]))
        for owner, owned in spans.items()
    ]


def add_runs(
    runs: Runs,
    rows: Sequence[tuple[str, int, int, str, bytes]],
    last_seq: dict[str, int],
    retention: int,
) -> bool:
    """Add a batch's rows of alerts to ``runs`` (the log's after the merged mark); whether a
    subscription of ``last_seq`` (its new last seq) now has ``retention`` alerts or more
    there (the log is merged then).  O(rows + len(last_seq))."""
    for sub, first, last, _, data in rows:
        kept = runs.get(sub)
        if kept is None:
            runs[sub] = [(first, last, data)]
        else:
            kept.append((first, last, data))
    return any(seq - runs[sub][0][0] >= retention - 1 for sub, seq in last_seq.items())


def mark(db: sqlite3.Connection, name: str) -> int:
    """The mark ``name`` (``alerts_merged`` or ``alert_log_dropped``; 0 before the first)."""
    row = db.execute("SELECT value FROM marks WHERE name = ?", (name,)).fetchone()
    return 0 if row is None else int(row[0])


def last_id(db: sqlite3.Connection) -> int:
    """The id of the newest log row ever appended (0 when none): deleted rows count."""
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'alert_log'").fetchone()
    return 0 if row is None else int(row[0])


def unmerged(
    db: sqlite3.Connection, owner: str | None = None, through: int | None = None
) -> Iterator[Chunk]:
    """The log's runs after ``alerts_merged`` (of ``owner``'s rows, up to id ``through``
    when given), in log order."""
    for spans, payload in _unmerged_rows(db, "spans, payload", owner, through):
        yield from chunks(spans, payload)


def unmerged_spans(
    db: sqlite3.Connection, owner: str | None = None, through: int | None = None
) -> Iterator[Span]:
    """The spans of :func:`unmerged`'s runs, their alerts left unread."""
    for (spans,) in _unmerged_rows(db, "spans", owner, through):
        yield from unpack_spans(spans)


def _unmerged_rows(
    db: sqlite3.Connection, columns: str, owner: str | None, through: int | None
) -> sqlite3.Cursor:
    """``columns`` of the log rows after ``alerts_merged`` (``owner``'s, up to ``through``)."""
    query = f"SELECT {columns} FROM alert_log WHERE id > ?"
    values: list[object] = [mark(db, "alerts_merged")]
    if owner is not None:
        query += " AND owner = ?"
        values.append(owner)
    if through is not None:
        query += " AND id <= ?"
        values.append(through)
    return db.execute(query + " ORDER BY id", values)


def unmerged_runs(db: sqlite3.Connection) -> Runs:
    """The log's runs after the merged mark by subscription (:func:`unmerged`): what the
    committer keeps for the next merge, read again when the catalog opens."""
    runs: Runs = {}
    for sub, first, last, data in unmerged(db):
        runs.setdefault(sub, []).append((first, last, data))
    return runs


def merge(db: sqlite3.Connection, retention: int, runs: Runs) -> int:
    """Merge the log after ``alerts_merged``, whose runs are ``runs``, into ``alerts``
    (inside the caller's transaction): each live subscription's runs joined into rows, its
    rows beyond its last ``retention`` alerts pruned; log rows merged before this merge
    deleted.  The number of rows written.  O(alerts in the log + subscriptions merged ×
    log(rows))."""
    merged, end = mark(db, "alerts_merged"), last_id(db)
    owners = dict(db.execute("SELECT id, owner FROM subscriptions"))
    rows: list[tuple[str, int, int, str, bytes]] = []
    pruned: list[tuple[str, int]] = []
    for sub in sorted(runs.keys() & owners.keys()):
        owner, kept = owners[sub], runs[sub]
        first, last = kept[0][0], kept[-1][1]
        joined = b"".join([data for _, _, data in kept]) if last - first < ROW_ALERTS else b""
        if joined and len(joined) <= ROW_BYTES:
            rows.append((sub, first, last, owner, joined))
        else:
            rows.extend(_rows(sub, owner, kept))
        if last > retention:
            pruned.append((sub, last - retention))
    db.executemany(
        "INSERT INTO alerts (subscription, seq, last_seq, owner, payload) VALUES (?, ?, ?, ?, ?)",
        rows,
    )
    db.executemany("DELETE FROM alerts WHERE subscription = ? AND last_seq <= ?", pruned)
    db.execute("DELETE FROM alert_log WHERE id <= ?", (merged,))
    db.executemany(
        "INSERT OR REPLACE INTO marks VALUES (?, ?)",
        [("alert_log_dropped", merged), ("alerts_merged", end)],
    )
    return len(rows)


def _rows(
    sub: str, owner: str, runs: list[tuple[int, int, bytes]]
) -> list[tuple[str, int, int, str, bytes]]:
    """A subscription's runs joined into rows of at most ``ROW_ALERTS`` alerts and about
    ``ROW_BYTES`` bytes (a run is never split: each is within both)."""
    rows: list[tuple[str, int, int, str, bytes]] = []
    parts: list[bytes] = []
    first = previous = size = 0
    for start, last, data in runs:
        if parts and (last - first + 1 > ROW_ALERTS or size + len(data) > ROW_BYTES):
            rows.append((sub, first, previous, owner, b"".join(parts)))
            parts, size = [], 0
        if not parts:
            first = start
        parts.append(data)
        size += len(data)
        previous = last
    rows.append((sub, first, previous, owner, b"".join(parts)))
    return rows
