"""server/front/catalog.py: the SQLite catalog's own rules (the front's use is in integration/)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cesar.server.front.catalog import (
    WRITER_CACHE_BYTES,
    Catalog,
    StreamRow,
    SubscriptionRow,
    connect,
)
from cesar.v1 import cesar_pb2 as pb


def _row(sub: str) -> SubscriptionRow:
    """A subscription row of ``sub``, publishing ``S<n>``."""
    name = "S" + sub[1:]
    return SubscriptionRow(sub, "o", "Stock", name, name, f"{name}(x:int)", "", 0, 0, 0, 0)


def _stream(name: str, sub: str) -> StreamRow:
    return StreamRow(name, f"{name}(x:int)", "o", sub)


def _alert_ids(path: Path) -> list[int]:
    db = sqlite3.connect(path)
    try:
        return [row[0] for row in db.execute("SELECT id FROM alerts ORDER BY id")]
    finally:
        db.close()


def test_an_alert_id_is_never_given_twice(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "c.sqlite", retention=10)
    catalog.commit_batch(1, None, 1, b"", "o", [("a", 1, 1, "o", b"1"), ("b", 1, 1, "o", b"2")], {})
    catalog.remove_subscription("b")  # the newest row goes with it
    catalog.commit_batch(2, None, 1, b"", "o", [("a", 2, 2, "o", b"3")], {})
    catalog.close()
    assert _alert_ids(tmp_path / "c.sqlite") == [1, 3]


def _old_catalog(path: Path, autoincrement: str) -> None:
    """A catalog from before rows of alerts: one alert a row, its payload an Alert."""
    alert = pb.Alert(subscription="a", seq=1, notice="n1").SerializeToString().hex()
    db = sqlite3.connect(path)
    db.executescript(
        f"""
        CREATE TABLE alerts (id INTEGER PRIMARY KEY {autoincrement}, subscription TEXT NOT NULL,
            seq INTEGER NOT NULL, owner TEXT NOT NULL, payload BLOB NOT NULL);
        CREATE UNIQUE INDEX alerts_by_subscription ON alerts (subscription, seq);
        CREATE INDEX alerts_by_owner ON alerts (owner, id);
        INSERT INTO alerts VALUES (1, 'a', 1, 'o', x'{alert}'), (2, 'b', 1, 'o', x'02'),
            (3, 'c', 1, 'o', x'03');
        DELETE FROM alerts WHERE id = 3;
        """
    )
    db.close()


@pytest.mark.parametrize("autoincrement", ["", "AUTOINCREMENT"])
def test_a_catalog_of_one_alert_a_row_is_upgraded_in_place(
    tmp_path: Path, autoincrement: str
) -> None:
    """Each old alert becomes a row of one framed alert; no id is given twice, neither one
    the old table handed out (AUTOINCREMENT: id 3, deleted) nor one deleted since."""
    path = tmp_path / "old.sqlite"
    _old_catalog(path, autoincrement)
    catalog = Catalog(path, retention=10)
    catalog.remove_subscription("b")
    catalog.commit_batch(1, None, 1, b"", "o", [("a", 2, 2, "o", b"3")], {})
    catalog.close()
    assert _alert_ids(path) == ([1, 3] if not autoincrement else [1, 4])
    db = sqlite3.connect(path)
    indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    ((seq, last, payload),) = db.execute("SELECT seq, last_seq, payload FROM alerts WHERE id = 1")
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert {"alerts_by_subscription", "alerts_by_owner"} <= indexes
    assert "alerts_before" not in tables
    (alert,) = pb.AlertBatch.FromString(payload).alerts
    assert (seq, last, alert.subscription, alert.seq, alert.notice) == (1, 1, "a", 1, "n1")


def test_a_catalog_from_before_subscribe_keys_gains_the_column_and_keeps_its_rows(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE subscriptions (number INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE "
        "NOT NULL, owner TEXT NOT NULL, query TEXT NOT NULL, name TEXT NOT NULL, stream TEXT "
        "NOT NULL, output_spec TEXT NOT NULL, key_attribute TEXT NOT NULL, shard INTEGER NOT "
        "NULL, created_ms INTEGER NOT NULL, position INTEGER NOT NULL, last_seq INTEGER NOT "
        "NULL DEFAULT 0, algebra BLOB NOT NULL DEFAULT x'')"
    )
    db.execute(
        "INSERT INTO subscriptions (id, owner, query, name, stream, output_spec, key_attribute, "
        "shard, created_ms, position) VALUES ('s1', 'o', 'q', 'Q', 'Q', 'Q(x:int)', '', 0, 0, 0)"
    )
    db.commit()
    db.close()
    catalog = Catalog(path, retention=10)
    (row,) = catalog.subscriptions()
    assert (row.id, row.query, row.idempotency_key) == ("s1", "q", "")
    catalog.close()


def test_a_log_from_before_owners_gets_their_column_and_reads_back_as_nobodys(
    tmp_path: Path,
) -> None:
    """A catalog whose batches did not say who published them opens with the column added:
    its old batches replay as the owner "" (nobody's budget), new ones as their client's."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE batches (number INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE,
            accepted INTEGER NOT NULL, payload BLOB NOT NULL);
        INSERT INTO batches VALUES (1, NULL, 1, x'01');
        """
    )
    db.close()
    catalog = Catalog(path, retention=10)
    catalog.commit_batch(2, "k", 1, b"\x02", "alice", [], {})
    assert list(catalog.batches()) == [(1, b"\x01", ""), (2, b"\x02", "alice")]
    catalog.close()


def test_a_subscriptions_last_seq_is_its_newest_alert_rows_through_pruning(
    tmp_path: Path,
) -> None:
    """No batch rewrites a subscription's row: its last seq is read from its newest alert row,
    which pruning to the last ``retention`` alerts always keeps."""
    path = tmp_path / "c.sqlite"
    catalog = Catalog(path, retention=2)
    catalog.add_subscriptions(
        [(_row("s1"), _stream("S1", "s1")), (_row("s2"), _stream("S2", "s2"))]
    )
    for number in range(1, 6):
        catalog.commit_batch(
            number, None, 1, b"", "o", [("s1", number, number, "o", b"x")], {"s1": number}
        )
    catalog.close()
    catalog = Catalog(path, retention=2)
    assert [(row.id, row.last_seq) for row in catalog.subscriptions()] == [("s1", 5), ("s2", 0)]
    catalog.close()
    db = sqlite3.connect(path)
    assert [r[0] for r in db.execute("SELECT last_seq FROM alerts ORDER BY id")] == [4, 5]
    db.close()


def test_a_catalog_that_kept_last_seqs_in_its_subscriptions_drops_the_copy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.sqlite"
    catalog = Catalog(path, retention=10)
    catalog.add_subscriptions([(_row("s1"), _stream("S1", "s1"))])
    catalog.commit_batch(1, None, 1, b"", "o", [("s1", 1, 3, "o", b"xyz")], {"s1": 3})
    catalog.close()
    db = sqlite3.connect(path)  # as a catalog made before 2026-12-01 had it
    db.execute("ALTER TABLE subscriptions ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0")
    db.execute("UPDATE subscriptions SET last_seq = 3")
    db.commit()
    db.close()
    catalog = Catalog(path, retention=10)
    assert [(row.id, row.last_seq) for row in catalog.subscriptions()] == [("s1", 3)]
    catalog.close()
    db = sqlite3.connect(path)
    assert "last_seq" not in {row[1] for row in db.execute("PRAGMA table_info(subscriptions)")}
    db.close()


def test_a_retention_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="retention must be at least 1"):
        Catalog(tmp_path / "c.sqlite", retention=0)


def test_the_writer_caches_its_pages_and_the_readers_keep_sqlites_default(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "c.sqlite", retention=10)
    reader = connect(tmp_path / "c.sqlite", readonly=True)
    assert catalog.db.execute("PRAGMA cache_size").fetchone()[0] == -(WRITER_CACHE_BYTES >> 10)
    assert reader.execute("PRAGMA cache_size").fetchone()[0] == -2000
    reader.close()
    catalog.close()
