"""The front's commit of a published batch: its SQLite statements, as the stored alerts grow.

A catalog with S subscriptions; B batches committed through ``Catalog.commit_batch`` (the
front's statements: the batch's row in the event log, a row of the alert log per client
whose subscriptions it alerted, and every 64 batches the merge of the log into rows per
subscription with the retention's pruning: :mod:`cesar.server.front.alertlog`), each
alerting R subscriptions drawn at random, as a publish of 1,000 quotes does under
serverbench's 10,000 queries.  Reported per build of the writer's page cache, run in turn on
fresh catalogs in one process: the CPU and wall per batch over the first and the last tenth
of the batches (merges included), the slowest batch (one that merged), beside deterministic
counters (runs of alerts committed; merged rows and log rows at the end; the file's pages
and the WAL's bytes).  The two caches: the catalog's own (``WRITER_CACHE_BYTES``) and
SQLite's default (2,000 KiB).

    python -m cesar.perf.catalogbench                 # 10K subscriptions, 1,000 batches of 1,500
    python -m cesar.perf.catalogbench --smoke         # 200 subscriptions, 80 batches of 50 (CI)
    python -m cesar.perf.catalogbench --batches B --rows R --json out.json
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cesar.perf.report import print_report, stamped
from cesar.server.front.catalog import WRITER_CACHE_BYTES, Catalog, StreamRow, SubscriptionRow

CACHES = {"catalog": WRITER_CACHE_BYTES >> 10, "sqlite_default": 2000}
"""The writer's page cache in KiB, by name."""


def subscriptions(count: int) -> list[tuple[SubscriptionRow, StreamRow]]:
    """``count`` subscriptions as the front stores them, each publishing a stream of its own."""
    rows = []
    for number in range(1, count + 1):
        sub, name = f"s{number}", f"Q{number}"
        query = f"FILTER{{Name = 'N{number % 200}' AND Price > {number % 97}}} Stock"
        spec = f"{name}(Name:str, Price:float, Volume:int)"
        row = SubscriptionRow(sub, f"c{number % 50}", query, name, name, spec, "Name", 0, 0, 0, 0)
        rows.append((row, StreamRow(name, spec, row.owner, sub)))
    return rows


def run(cache_kib: int, count: int, batches: int, per_batch: int, seed: int) -> dict[str, Any]:
    """Commit ``batches`` batches into a fresh catalog whose writer caches ``cache_kib``."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "catalog.sqlite"
        catalog = Catalog(path, retention=100_000)
        catalog.db.execute(f"PRAGMA cache_size = -{cache_kib}")
        rows = subscriptions(count)
        catalog.add_subscriptions(rows)
        ids = [row.id for row, _ in rows]
        owners = {row.id: row.owner for row, _ in rows}
        last = dict.fromkeys(ids, 0)
        payload = bytes(60_000)  # about a 1,000-quote Arrow batch
        alert = bytes(90)  # about one framed alert of a quote
        timings: list[tuple[float, float]] = []
        inserted = 0
        for number in range(1, batches + 1):
            alerted = rng.sample(ids, per_batch)
            alert_rows = []
            for sub in alerted:
                last[sub] += 1
                alert_rows.append((sub, last[sub], last[sub], owners[sub], alert))
            wall, cpu = time.perf_counter(), time.process_time()
            catalog.commit_batch(
                number, None, 1000, payload, "c0", alert_rows, {s: last[s] for s in alerted}
            )
            timings.append((time.perf_counter() - wall, time.process_time() - cpu))
            inserted += len(alert_rows)
        pages = int(catalog.db.execute("PRAGMA page_count").fetchone()[0])
        merged = int(catalog.db.execute("SELECT COUNT(*) FROM alerts").fetchone()[0])
        logged = int(catalog.db.execute("SELECT COUNT(*) FROM alert_log").fetchone()[0])
        wal = Path(f"{path}-wal")
        wal_bytes = wal.stat().st_size if wal.exists() else 0
        catalog.close()
    tenth = max(1, batches // 10)
    return {
        "cache_kib": cache_kib,
        "first_tenth": _per_batch(timings[:tenth]),
        "last_tenth": _per_batch(timings[-tenth:]),
        "slowest_wall_ms": round(1000 * max(w for w, _ in timings), 2),
        "runs_committed": inserted,
        "merged_rows": merged,
        "log_rows": logged,
        "pages": pages,
        "wal_bytes": wal_bytes,
    }


def _per_batch(timings: Sequence[tuple[float, float]]) -> dict[str, float]:
    """Mean wall and CPU milliseconds per batch."""
    return {
        "wall_ms": round(1000 * sum(w for w, _ in timings) / len(timings), 2),
        "cpu_ms": round(1000 * sum(c for _, c in timings) / len(timings), 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.catalogbench", description=__doc__)
    parser.add_argument("--subscriptions", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=1_000)
    parser.add_argument("--rows", type=int, default=1_500, help="subscriptions alerted a batch")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="200 subscriptions, 80 batches of 50")
    parser.add_argument("--json", type=Path, help="also write the summary here")
    args = parser.parse_args(argv)
    if args.smoke:
        args.subscriptions, args.batches, args.rows = 200, 80, 50
    if not 0 < args.rows <= args.subscriptions or args.batches < 1:
        parser.error("need 0 < --rows <= --subscriptions and --batches >= 1")
    records = [
        {"cache": name, **run(kib, args.subscriptions, args.batches, args.rows, args.seed)}
        for name, kib in CACHES.items()
    ]
    report = stamped(records)
    own, default = (r["last_tenth"]["cpu_ms"] for r in records)
    report["last_tenth_cpu_catalog_vs_default"] = round(own / default, 3) if default else None
    print_report(report, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
