"""The durable catalog: one SQLite file (WAL) holding streams, subscriptions, events, alerts.

Everything the server has acknowledged is here, so a server killed with
``kill -9`` comes back with the same state (docs/design.md, "Durability"):

* ``streams``: input streams (DefineStream) and PUBLISHed ones;
* ``subscriptions``: owner, CEL text, placement, creation time, the number of
  event batches logged before it (its *position*), its latest alert seq and the
  idempotency key it was made with;
* ``batches``: every accepted event batch in order (the event log) with its
  idempotency key and the client that published it (whose budget its events
  waiting in open epochs count in again after a restart) — on start the shards
  rebuild their instances from their latest snapshot and the log after it, each
  later subscription installed at its position. Batches up to the oldest
  checkpoint kept are *compacted*: their payload goes (``marks.compacted`` says
  up to where), their number, key and acknowledged count stay for the last
  ``KEY_WINDOW`` batches so a retried idempotency key still answers as before;
* ``checkpoints``: the log positions at which every shard saved a snapshot,
  with the shard count and the front's own state at that point (its epoch
  gate, :mod:`cesar.server.host.snapshots`);
* ``alert_log`` and ``alerts``: a batch's alerts as a row per client in the log, merged
  every few dozen batches into rows per subscription (seqs ``seq`` … ``last_seq``, framed as
  Listen sends them), where each subscription keeps the rows of its last ``retention``
  alerts (older rows are pruned at each merge; :mod:`cesar.server.front.alertlog`);
* ``shares``: the clients other than its owner that may read a published stream;
* ``clock_joins``: the streams a subscription reads and publishes, with its
  position, when it joined clock groups (kept after it is removed: groups only
  merge, and a replay must rebuild the same ones);
* ``marks``: how far the log is compacted, and the server's *identity*, a random
  number made with the catalog (or when a catalog from before identities is first
  opened) and written in every checkpoint and shard snapshot, so that another
  server's snapshots are refused.

A published batch and its alerts are written in one transaction, so an
acknowledged batch is all there or not at all; a subscription's last seq is its
newest alert's (:data:`LAST_SEQ` and the log after it), not a copy rewritten with every
batch.  The
connection runs with ``synchronous=NORMAL``: in WAL mode a commit survives a
crash of the process (not of the machine's power).
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cesar.server.front import alertlog, tables
from cesar.server.front.tables import transaction

LAST_SEQ = (
    "COALESCE((SELECT MAX(alerts.last_seq) FROM alerts "
    "WHERE alerts.subscription = subscriptions.id), 0)"
)
"""A subscription's last merged seq, as SQL over ``subscriptions``: its newest merged row's,
O(log n) by ``alerts_by_subscription`` (a subscription keeps the rows of its last
``retention`` ≥ 1 merged alerts, so its newest row always), 0 before its first; the log
after the merged mark may hold later ones (:func:`alertlog.unmerged_runs`)."""


@dataclass(frozen=True)
class StreamRow:
    """A stream: its spec, who defined or publishes it, and the producing subscription."""

    name: str
    spec: str
    owner: str
    subscription: str


@dataclass(frozen=True)
class SubscriptionRow:
    """A subscription as stored; ``key_attribute`` empty means global on ``shard``.

    ``query`` is its CEL text, or empty when ``algebra`` holds a serialized
    ``cesar.v1.Algebra`` message instead.
    """

    id: str
    owner: str
    query: str
    name: str
    stream: str
    output_spec: str
    key_attribute: str
    shard: int
    created_ms: int
    position: int
    last_seq: int
    algebra: bytes = b""
    idempotency_key: str = ""


WRITER_CACHE_BYTES = 64 << 20
"""The page cache of the front's one writing connection (SQLite's default: 2,000 KiB).  Each
batch's alert rows go into ``alerts_by_subscription`` at as many places as subscriptions it
alerted; with the default cache those pages are read again for every batch once the table
outgrows it (perf/catalogbench.py: 11 % of the commit's CPU at 1.5M rows)."""


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """A connection in WAL mode; readers use their own (``readonly``), with SQLite's default
    page cache, the writer :data:`WRITER_CACHE_BYTES`."""
    uri = f"file:{path}{'?mode=ro' if readonly else ''}"
    db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 10000")
    if not readonly:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute(f"PRAGMA cache_size = -{WRITER_CACHE_BYTES >> 10}")
    return db


RESTORE = (
    "restore DATA_DIR/catalog.sqlite from a backup (docs/operations.md, "
    '"The catalog and durability"), or move it away to start an empty server'
)


KEY_WINDOW = 100_000
"""Compacted batches keep their idempotency key for this many batches back."""


class CatalogError(RuntimeError):
    """A catalog file that cannot be used; the message says what to do."""


class Catalog:
    """The server's SQLite file; the front is its only writer (one thread at a time).

    Raises :class:`CatalogError` for a file that is empty (a server that lost
    its catalog must not start silently empty) or is not a cesar catalog.
    """

    def __init__(self, path: Path, retention: int) -> None:
        if retention < 1:
            raise ValueError(
                f"retention must be at least 1 (the newest alert holds a seq): {retention}"
            )
        self.path = path
        self.retention = retention
        if path.exists() and path.stat().st_size == 0:
            raise CatalogError(f"{path} is empty (0 bytes): {RESTORE}")
        try:
            self.db = connect(path)
            tables.create(self.db)
            self.identity = self._identity()
            self._log_batches, self._log_bytes = self._unmerged()
            self._runs = alertlog.unmerged_runs(self.db)
        except sqlite3.DatabaseError as exc:
            raise CatalogError(f"{path} is not a usable catalog ({exc}): {RESTORE}") from None

    def _unmerged(self) -> tuple[int, int]:
        """The batches in the log after the merged mark and their bytes of alerts: with the
        runs there (``_runs``), what decides the next merge (:meth:`commit_batch`)."""
        batches, size = self.db.execute(
            "SELECT COUNT(DISTINCT batch), COALESCE(SUM(length(payload)), 0) FROM alert_log "
            "WHERE id > ?",
            (alertlog.mark(self.db, "alerts_merged"),),
        ).fetchone()
        return int(batches), int(size)

    def _identity(self) -> int:
        """The server's identity (module docstring), made at the first open."""
        row = self.db.execute("SELECT value FROM marks WHERE name = 'server'").fetchone()
        if row is not None:
            return int(row[0])
        identity = secrets.randbits(62) + 1
        with transaction(self.db):
            self.db.execute("INSERT INTO marks VALUES ('server', ?)", (identity,))
        return identity

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close."""
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.db.close()

    # ------------------------------------------------------------------ streams

    def streams(self) -> list[StreamRow]:
        """Every stream, by name."""
        rows = self.db.execute("SELECT name, spec, owner, subscription FROM streams ORDER BY name")
        return [StreamRow(*row) for row in rows]

    def remove_stream(self, name: str) -> None:
        """Forget an input stream (its logged events stay in the event log)."""
        self.db.execute("DELETE FROM streams WHERE name = ? AND subscription = ''", (name,))

    def shares(self) -> dict[str, set[str]]:
        """Published stream → the clients it is shared with."""
        out: dict[str, set[str]] = {}
        for stream, client in self.db.execute("SELECT stream, client FROM shares"):
            out.setdefault(stream, set()).add(client)
        return out

    def set_shares(self, stream: str, clients: Sequence[str]) -> None:
        """Share ``stream`` with exactly ``clients``."""
        with transaction(self.db):
            self.db.execute("DELETE FROM shares WHERE stream = ?", (stream,))
            self.db.executemany(
                "INSERT INTO shares VALUES (?, ?)", [(stream, client) for client in clients]
            )

    def add_stream(self, row: StreamRow) -> None:
        """Store a new stream."""
        self.db.execute(
            "INSERT INTO streams VALUES (?, ?, ?, ?, ?)",
            (row.name, row.spec, row.owner, row.subscription, _now_ms()),
        )

    # ------------------------------------------------------------ subscriptions

    def subscriptions(self) -> list[SubscriptionRow]:
        """Every live subscription, oldest first."""
        rows = self.db.execute(
            "SELECT id, owner, query, name, stream, output_spec, key_attribute, shard, "
            f"created_ms, position, {LAST_SEQ}, algebra, idempotency_key FROM subscriptions "
            "ORDER BY number"
        )
        subs = [SubscriptionRow(*row) for row in rows]
        runs = self._runs  # the log's runs after the merged mark: later seqs than the rows'
        return [
            replace(row, last_seq=runs[row.id][-1][1]) if row.id in runs else row for row in subs
        ]

    def next_subscription_number(self) -> int:
        """The number of the next subscription (ids are ``s<number>``; numbers are never reused)."""
        row = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'subscriptions'")
        found = row.fetchone()
        return (found[0] if found else 0) + 1

    def clock_joins(self) -> list[tuple[int, list[str]]]:
        """Every recorded join of clock groups: (position, streams), in order."""
        rows = self.db.execute("SELECT position, streams FROM clock_joins ORDER BY id")
        return [(position, streams.split(",")) for position, streams in rows]

    def add_subscriptions(
        self,
        rows: Sequence[tuple[SubscriptionRow, StreamRow]],
        joins: Sequence[tuple[int, Sequence[str]]] = (),
    ) -> None:
        """Store subscriptions, numbered in order, the streams they publish and the clock
        groups they join (position, streams): one transaction."""
        now = _now_ms()
        with transaction(self.db):
            self.db.executemany(
                "INSERT INTO clock_joins (position, streams) VALUES (?, ?)",
                [(position, ",".join(sorted(streams))) for position, streams in joins],
            )
            self.db.executemany(
                "INSERT INTO subscriptions (id, owner, query, name, stream, output_spec, "
                "key_attribute, shard, created_ms, position, algebra, idempotency_key) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        row.id,
                        row.owner,
                        row.query,
                        row.name,
                        row.stream,
                        row.output_spec,
                        row.key_attribute,
                        row.shard,
                        row.created_ms,
                        row.position,
                        row.algebra,
                        row.idempotency_key,
                    )
                    for row, _ in rows
                ],
            )
            self.db.executemany(
                "INSERT INTO streams VALUES (?, ?, ?, ?, ?)",
                [(s.name, s.spec, s.owner, s.subscription, now) for _, s in rows],
            )

    def remove_subscription(self, subscription: str) -> None:
        """Delete a subscription, the stream it publishes (and its shares) and its alerts."""
        with transaction(self.db):
            self.db.execute(
                "DELETE FROM shares WHERE stream IN "
                "(SELECT name FROM streams WHERE subscription = ?)",
                (subscription,),
            )
            self.db.execute("DELETE FROM subscriptions WHERE id = ?", (subscription,))
            self.db.execute("DELETE FROM streams WHERE subscription = ?", (subscription,))
            self.db.execute("DELETE FROM alerts WHERE subscription = ?", (subscription,))

    # ------------------------------------------------------------- event log

    def batch_count(self) -> int:
        """How many event batches were logged (compacted ones included)."""
        row = self.db.execute("SELECT MAX(number) FROM batches").fetchone()
        return max(int(row[0] or 0), self.compacted())

    def compacted(self) -> int:
        """The batches up to this number have no payload any more (0: none)."""
        row = self.db.execute("SELECT value FROM marks WHERE name = 'compacted'").fetchone()
        return 0 if row is None else int(row[0])

    def checkpoints(self) -> list[tuple[int, int, bytes]]:
        """Every checkpoint, newest first: (position, shard count, the front's state)."""
        rows = self.db.execute(
            "SELECT position, shards, front FROM checkpoints ORDER BY position DESC"
        )
        return [(int(p), int(n), bytes(f)) for p, n, f in rows]

    def add_checkpoint(self, position: int, shards: int, front: bytes, keep: int) -> int:
        """Record a checkpoint, keep the newest ``keep`` and compact the log up to the oldest
        of them; the position compacted to.  One transaction."""
        with transaction(self.db):
            self.db.execute(
                "INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?, ?)",
                (position, shards, front, _now_ms()),
            )
            kept = [
                int(p)
                for (p,) in self.db.execute(
                    "SELECT position FROM checkpoints ORDER BY position DESC LIMIT ?", (keep,)
                )
            ]
            oldest = min(kept)
            self.db.execute("DELETE FROM checkpoints WHERE position < ?", (oldest,))
            done = self.compacted()
            if oldest > done:
                self.db.execute(
                    "DELETE FROM batches WHERE number > ? AND number <= ? AND "
                    "(idempotency_key IS NULL OR number <= ?)",
                    (done - KEY_WINDOW, oldest, oldest - KEY_WINDOW),
                )
                self.db.execute(
                    "UPDATE batches SET payload = x'' WHERE number > ? AND number <= ?",
                    (done, oldest),
                )
                self.db.execute("INSERT OR REPLACE INTO marks VALUES ('compacted', ?)", (oldest,))
                done = oldest
        return done

    def remove_checkpoints(self, positions: Sequence[int]) -> None:
        """Forget checkpoints (their snapshots no longer describe the log)."""
        self.db.executemany("DELETE FROM checkpoints WHERE position = ?", [(p,) for p in positions])

    def find_batch(self, key: str) -> tuple[int, int] | None:
        """(number, accepted) of the batch logged with idempotency key ``key``."""
        row = self.db.execute(
            "SELECT number, accepted FROM batches WHERE idempotency_key = ?", (key,)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def batches(self, after: int = 0) -> Iterator[tuple[int, bytes, str]]:
        """The event log after batch ``after``, in order: (number, payload, the client that
        published it); compacted batches are not there."""
        cursor = self.db.execute(
            "SELECT number, payload, owner FROM batches WHERE number > ? ORDER BY number",
            (max(after, self.compacted()),),
        )
        yield from cursor

    def commit_batch(
        self,
        number: int,
        key: str | None,
        accepted: int,
        payload: bytes,
        owner: str,
        alerts: Sequence[tuple[str, int, int, str, bytes]],
        last_seq: dict[str, int],
    ) -> None:
        """Log ``owner``'s batch with its runs of alerts ``(subscription, first seq, last seq,
        owner, framed alerts)`` (a log row per owner), atomically; the log is merged in the
        same transaction once it holds :data:`~alertlog.MERGE_BATCHES` batches or
        :data:`~alertlog.MERGE_BYTES`, or a subscription of ``last_seq`` (its new last seq)
        has ``retention`` alerts there."""
        merging = False
        runs = self._runs
        try:
            with transaction(self.db):
                self.db.execute(
                    "INSERT INTO batches VALUES (?, ?, ?, ?, ?)",
                    (number, key or None, accepted, payload, owner),
                )
                if alerts:
                    rows = alertlog.log_rows(number, alerts)
                    self.db.executemany(
                        "INSERT INTO alert_log (batch, owner, spans, payload) VALUES (?, ?, ?, ?)",
                        rows,
                    )
                    size = self._log_bytes + sum(len(row[3]) for row in rows)
                    merging = alertlog.add_runs(runs, alerts, last_seq, self.retention) or (
                        self._log_batches + 1 >= alertlog.MERGE_BATCHES
                        or size >= alertlog.MERGE_BYTES
                    )
                    if merging:
                        alertlog.merge(self.db, self.retention, runs)
        except BaseException:  # rolled back: the runs are the log's again
            self._runs = alertlog.unmerged_runs(self.db)
            raise
        if merging:
            self._log_batches, self._log_bytes, self._runs = 0, 0, {}
        elif alerts:
            self._log_batches, self._log_bytes = self._log_batches + 1, size

    def rewrite_batches(self, payloads: Sequence[tuple[int, bytes]]) -> None:
        """Replace logged batches' payloads ``(number, payload)``, in one transaction."""
        with transaction(self.db):
            self.db.executemany(
                "UPDATE batches SET payload = ? WHERE number = ?",
                [(payload, number) for number, payload in payloads],
            )

    def last_alert_id(self) -> int:
        """The id of the newest row of the alert log (0 when none)."""
        return alertlog.last_id(self.db)


def _now_ms() -> int:
    return int(time.time() * 1000)
