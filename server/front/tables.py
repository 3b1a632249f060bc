"""The catalog's tables (:mod:`cesar.server.front.catalog`): created on first open, and a catalog
an older cesar made brought to them (each change of schema adds its step to :func:`create`, so
a server upgraded in place keeps everything it had acknowledged).
"""

from __future__ import annotations

import sqlite3

from cesar.server.front import alertlog
from cesar.server.wire.alertbytes import frame

SCHEMA = """
CREATE TABLE IF NOT EXISTS streams (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    owner TEXT NOT NULL,
    subscription TEXT NOT NULL DEFAULT '',
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS subscriptions (
    number INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    owner TEXT NOT NULL,
    query TEXT NOT NULL,
    name TEXT NOT NULL,
    stream TEXT NOT NULL,
    output_spec TEXT NOT NULL,
    key_attribute TEXT NOT NULL,
    shard INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    position INTEGER NOT NULL,
    algebra BLOB NOT NULL DEFAULT x'',
    idempotency_key TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS batches (
    number INTEGER PRIMARY KEY,
    idempotency_key TEXT UNIQUE,
    accepted INTEGER NOT NULL,
    payload BLOB NOT NULL,
    owner TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS shares (
    stream TEXT NOT NULL,
    client TEXT NOT NULL,
    PRIMARY KEY (stream, client)
);
CREATE TABLE IF NOT EXISTS clock_joins (
    id INTEGER PRIMARY KEY,
    position INTEGER NOT NULL,
    streams TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoints (
    position INTEGER PRIMARY KEY,
    shards INTEGER NOT NULL,
    front BLOB NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS marks (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS streams_by_subscription ON streams (subscription);
CREATE INDEX IF NOT EXISTS subscriptions_by_owner ON subscriptions (owner);
"""
ALERTS = [
    """CREATE TABLE IF NOT EXISTS alerts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    subscription TEXT NOT NULL,
    seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    owner TEXT NOT NULL,
    payload BLOB NOT NULL
)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS alerts_by_subscription ON alerts (subscription, last_seq)",
]
"""The merged alerts: rows of a subscription's alerts ``seq`` … ``last_seq`` framed together
(:mod:`cesar.server.wire.alertbytes`), written by :func:`alertlog.merge`."""


def create(db: sqlite3.Connection) -> None:
    """Create the tables missing from ``db`` and upgrade those an older cesar made."""
    db.executescript(SCHEMA + alertlog.SCHEMA)
    _alert_rows(db)
    db.execute("DROP INDEX IF EXISTS alerts_by_owner")
    _keep_subscribe_keys(db)
    _keep_batch_owners(db)
    _seqs_from_alerts(db)


def _alert_rows(db: sqlite3.Connection) -> None:
    """Give a catalog made before alerts were stored a row per subscription and batch
    (or before their ids were AUTOINCREMENT) the current table, each old alert a row.

    A live Listen read alert rows in id order until the log took that part
    (:mod:`~cesar.server.front.alertlog`); SQLite hands a plain INTEGER PRIMARY
    KEY's largest id out again once that row is deleted: ids are AUTOINCREMENT,
    and the sequence carries over.
    """
    found = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'alerts'"
    ).fetchone()
    if found is None:
        with transaction(db):
            for statement in ALERTS:
                db.execute(statement)
        return
    if "last_seq" in found[0]:
        return
    db.create_function("framed", 1, frame, deterministic=True)
    with transaction(db):
        db.execute("ALTER TABLE alerts RENAME TO alerts_before")
        db.execute("DROP INDEX alerts_by_subscription")
        db.execute("DROP INDEX IF EXISTS alerts_by_owner")
        for statement in ALERTS:
            db.execute(statement)
        db.execute(
            "INSERT INTO alerts (id, subscription, seq, last_seq, owner, payload) "
            "SELECT id, subscription, seq, seq, owner, framed(payload) FROM alerts_before"
        )
        if "AUTOINCREMENT" in found[0]:
            db.execute(
                "UPDATE sqlite_sequence SET seq = MAX(seq, (SELECT seq FROM sqlite_sequence "
                "WHERE name = 'alerts_before')) WHERE name = 'alerts'"
            )
            db.execute("DELETE FROM sqlite_sequence WHERE name = 'alerts_before'")
        db.execute("DROP TABLE alerts_before")


def _keep_subscribe_keys(db: sqlite3.Connection) -> None:
    """Give a catalog made before Subscribe took idempotency keys their column."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(subscriptions)")}
    if "idempotency_key" not in columns:
        with transaction(db):
            db.execute(
                "ALTER TABLE subscriptions ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT ''"
            )


def _keep_batch_owners(db: sqlite3.Connection) -> None:
    """Give a catalog made before batches kept who published them their column ("")."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(batches)")}
    if "owner" not in columns:
        with transaction(db):
            db.execute("ALTER TABLE batches ADD COLUMN owner TEXT NOT NULL DEFAULT ''")


def _seqs_from_alerts(db: sqlite3.Connection) -> None:
    """Drop the copy of each subscription's last seq that a catalog made before
    2026-12-01 kept in ``subscriptions`` (rewritten for every subscription a batch
    alerted: a third of the committer's time): the newest alert row holds it."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(subscriptions)")}
    if "last_seq" in columns:
        with transaction(db):
            db.execute("ALTER TABLE subscriptions DROP COLUMN last_seq")


class transaction:
    """``with transaction(db):`` — BEGIN IMMEDIATE … COMMIT, ROLLBACK on error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
