"""server/front/catalog.py: the SQLite catalog's own rules (the front's use is in integration/)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from cesar.server.front import alertlog
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


def _ids(path: Path, table: str) -> list[int]:
    db = sqlite3.connect(path)
    try:
        return [row[0] for row in db.execute(f"SELECT id FROM {table} ORDER BY id")]
    finally:
        db.close()


def test_a_log_row_id_is_never_given_twice(tmp_path: Path) -> None:
    """A live Listen reads the log by id: rows a merge deleted must not free their ids for the
    next rows, or a stream past them passes the new ones by.  The merge drops the alerts of a
    removed subscription."""
    catalog = Catalog(tmp_path / "c.sqlite", retention=1)  # every batch merges
    catalog.add_subscriptions([(_row("a"), _stream("Sa", "a")), (_row("b"), _stream("Sb", "b"))])
    catalog.commit_batch(1, None, 1, b"", "o", [("a", 1, 1, "o", b"1"), ("b", 1, 1, "p", b"2")], {})
    catalog.remove_subscription("b")
    catalog.commit_batch(2, None, 1, b"", "o", [("a", 2, 2, "o", b"3")], {"a": 2})
    catalog.commit_batch(3, None, 1, b"", "o", [("a", 3, 3, "o", b"4")], {"a": 3})
    assert catalog.last_alert_id() == 4
    catalog.close()
    assert _ids(tmp_path / "c.sqlite", "alert_log") == [4]  # 1-3 went a merge after theirs
    db = sqlite3.connect(tmp_path / "c.sqlite")
    rows = list(db.execute("SELECT subscription, seq, last_seq, payload FROM alerts"))
    db.close()
    assert rows == [("a", 3, 3, b"4")]  # retention 1: the newest; b's alert went with b


def test_the_merge_joins_a_subscriptions_runs_into_rows_within_their_limits(
    tmp_path: Path,
) -> None:
    """64 batches (the merge's count) of one alert of s1 and 600 of s2: s1's become one row,
    s2's rows of at most 1,000 alerts; the log's rows stay until the next merge."""
    catalog = Catalog(tmp_path / "c.sqlite", retention=100_000)
    catalog.add_subscriptions(
        [(_row("s1"), _stream("S1", "s1")), (_row("s2"), _stream("S2", "s2"))]
    )
    for number in range(1, 65):
        first = (number - 1) * 600 + 1
        runs = [("s1", number, number, "o", b"x"), ("s2", first, first + 599, "o", b"y" * 600)]
        catalog.commit_batch(number, None, 1, b"", "o", runs, {"s1": number, "s2": first + 599})
    db = sqlite3.connect(tmp_path / "c.sqlite")
    rows = list(db.execute("SELECT subscription, seq, last_seq, length(payload) FROM alerts"))
    logged = db.execute("SELECT COUNT(*) FROM alert_log").fetchone()[0]
    db.close()
    assert rows[0] == ("s1", 1, 64, 64)
    assert [(seq, last) for _, seq, last, _ in rows[1:4]] == [(1, 600), (601, 1200), (1201, 1800)]
    assert all(last - seq < 1000 for _, seq, last, _ in rows) and len(rows) == 1 + 64
    assert logged == 64
    assert [(row.id, row.last_seq) for row in catalog.subscriptions()] == [
        ("s1", 64),
        ("s2", 38_400),
    ]
    catalog.close()


def test_the_log_merges_at_its_byte_bound_and_reopens_with_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The log merges once it holds ``MERGE_BYTES`` of alerts, before ``MERGE_BATCHES``; a
    catalog opened again counts the bytes its log already holds."""
    monkeypatch.setattr(alertlog, "MERGE_BYTES", 1_000)
    path = tmp_path / "c.sqlite"
    catalog = Catalog(path, retention=100_000)
    catalog.add_subscriptions([(_row("s1"), _stream("S1", "s1"))])

    def commit(number: int) -> int:
        catalog.commit_batch(
            number, None, 1, b"", "o", [("s1", number, number, "o", b"x" * 400)], {"s1": number}
        )
        return alertlog.mark(catalog.db, "alerts_merged")

    assert [commit(1), commit(2)] == [0, 0]  # 800 bytes logged
    catalog.close()
    catalog = Catalog(path, retention=100_000)
    assert commit(3) == 3  # 1,200 bytes: merged through log row 3
    assert [(row.id, row.last_seq) for row in catalog.subscriptions()] == [("s1", 3)]
    catalog.close()


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
    assert _ids(path, "alerts") == [1]  # the new alert is in the log
    db = sqlite3.connect(path)
    indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    ((seq, last, payload),) = db.execute("SELECT seq, last_seq, payload FROM alerts WHERE id = 1")
    tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    db.close()
    assert "alerts_by_subscription" in indexes and "alerts_by_owner" not in indexes
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
    """No batch rewrites a subscription's row: its last seq is read from its newest merged
    row, which pruning to the last ``retention`` alerts always keeps, and the log after it
    (a subscription with ``retention`` alerts in the log merges it)."""
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
    assert [r[0] for r in db.execute("SELECT last_seq FROM alerts ORDER BY id")] == [4]
    assert db.execute("SELECT COUNT(*) FROM alert_log WHERE id > 4").fetchone() == (1,)
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
