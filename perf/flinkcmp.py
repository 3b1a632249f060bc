"""cesar against Flink SQL MATCH_RECOGNIZE on real daily closes, 1, 10 and 100 queries.

    make flink-venv                                   # apache-flink in .venv-flink (once)
    python -m cesar.perf.flinkcmp --json flink.json         # 27 stocks 2000-2017
    python -m cesar.perf.flinkcmp --queries 1 10 --rows 20000
    python -m cesar.perf.flinkcmp --skip "PAST LAST ROW" --json skip.json  # after-match cases

Four pattern families, each written for cesar (two in CEL, two as patterns,
docs/patterns.md) and in Flink SQL, both partitioned by stock and ordered by
date:

* **drop**: a quote followed by the stock's next quote below ``f`` times it.
  CEL ``FILTER{After < f * Before}(SELECT ... FROM Quote NEXT{$1.Name =
  $2.Name} Quote)``; SQL ``PATTERN (A B) DEFINE B AS B.price < f * A.price``.
* **rise**: ``n`` quotes of a stock, each above the one before.  CEL: a FOLD
  counting the run, ``FILTER{Quotes = n}``; SQL ``PATTERN (A B{n-1}) DEFINE
  B AS B.price > LAST(B.price, 1)`` (the first B against A: Flink offers
  logical offsets only, not ``PREV``).
* **kleene**: a run of rises, then the stock's next quote below ``f`` times
  the run's last.  Pattern ``SEQ(Quote+ a[], Quote c)`` under
  ``partition_contiguity`` with ``[Name]``, ``a[i].Price > a[i-1].Price``,
  ``a.LEN >= 2`` and ``c.Price < f * a[a.LEN].Price``; SQL ``PATTERN (A B+ C)``
  with ``B`` rising and ``C`` below ``f`` times ``LAST(B.price)``.  A run takes
  every rise (contiguous rows of the stock), so each start has at most one
  match in both.
* **negation**: the first quote at least ``1 - f`` below a start, with no quote
  5 % above the start in between.  Pattern ``SEQ(Quote a, !(Quote n), Quote
  c)`` under ``skip_till_next_match``; SQL ``PATTERN (A B*? C)`` with ``B`` the
  rows that are neither (MATCH_RECOGNIZE has no negation; a reluctant ``B*?``
  up to the first ``C`` says the same).

The rows end with one closing row per stock (:func:`closed`).  Both use
``AFTER MATCH SKIP TO NEXT ROW`` (every quote may start a match) and
ONE ROW PER MATCH; there the semantics coincide and the matches must be equal
(stock, first date, last date), query by query.  Query ``i`` of a run is of
family ``i mod 4`` in the order above (``f`` from 0.99 down to 0.90, ``n``
from 3 to 8, by ``i div 4``).  Where they differ (docs/benchmarks.md): a greedy
``B{n-1,}`` reports one longest run per start, while the μ operator emits
every prefix of a run; Flink needs a time attribute and orders by it, cesar
processes simultaneous events as one epoch.

Throughput for each side is input rows divided by wall time in one run on
the same rows: cesar's merged engine in this process (compile time apart),
and Flink's job from submission to end (streaming mode on event time,
parallelism 1: one core, as cesar's engine; JVM start-up and planning
excluded, job scheduling included).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cesar.automata.schema import Event, parse_stream_spec
from cesar.perf.report import stamped, write_json
from cesar.server.engine.workload import Workload
from cesar.server.host.collector import tune_collector

ROOT = Path(__file__).resolve().parents[1]
DAILY = ROOT.parent / "shared" / "data" / "stocks" / "daily_27_us_stocks_2000-01-03_2017-11-10.csv"
FLINK_PYTHON = ROOT / ".venv-flink" / "bin" / "python"
QUOTE = "Quote(Name:string,Price:float)[day]"
BASE = datetime.date(2000, 1, 3).toordinal()


Family = tuple[str, str, str, str]
"""One query of a family: (cesar text without PUBLISH, SQL pattern, DEFINE, the MEASURES of t1)."""


def _drop(f: float) -> Family:
    text = (
        f"FILTER{{After < {f} * Before}} (SELECT Name, Price_1 AS Before, Price AS After "
        "FROM Quote NEXT{$1.Name = $2.Name} Quote)"
    )
    return text, "(A B)", f"B AS B.price < {f} * A.price", "B.ts"


def _rise(n: int) -> Family:
    text = (
        f"FILTER{{Quotes = {n}}} ((SELECT *, 1 AS Quotes FROM Quote) "
        "FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Quotes + 1 AS Quotes} Quote)"
    )
    define = "B AS (LAST(B.price, 1) IS NULL AND B.price > A.price) OR B.price > LAST(B.price, 1)"
    return text, f"(A B{{{n - 1}}})", define, "LAST(B.ts)"


def _kleene(f: float, tail: str = "") -> Family:
    text = (
        "PATTERN SEQ(Quote+ a[], Quote c) WHERE partition_contiguity(a[], c) { [Name] "
        f"AND a[i].Price > a[i-1].Price AND a.LEN >= 2 AND c.Price < {f} * a[a.LEN].Price }}"
        f"{tail} RETURN a[1].Name AS Name"
    )
    define = (
        "B AS (LAST(B.price, 1) IS NULL AND B.price > A.price) "
        f"OR B.price > LAST(B.price, 1), C AS C.price < {f} * LAST(B.price)"
    )
    return text, "(A B+ C)", define, "C.ts"


def _negation(f: float, tail: str = "") -> Family:
    text = (
        "PATTERN SEQ(Quote a, !(Quote n), Quote c) "
        "WHERE skip_till_next_match(a, n, c) { [Name] AND n.Price > 1.05 * a.Price "
        f"AND c.Price < {f} * a.Price }}{tail} RETURN a.Name AS Name"
    )
    define = (
        f"B AS B.price >= {f} * A.price AND B.price <= 1.05 * A.price, C AS C.price < {f} * A.price"
    )
    return text, "(A B*? C)", define, "C.ts"


def _pattern_drop(f: float, tail: str) -> Family:
    text = (
        "PATTERN SEQ(Quote a, Quote b) WHERE partition_contiguity(a, b) { [Name] "
        f"AND b.Price < {f} * a.Price }}{tail} RETURN a.Name AS Name"
    )
    return text, "(A B)", f"B AS B.price < {f} * A.price", "B.ts"


def _sql(family: Family, skip: str, window: str = "") -> str:
    _, pattern, define, last = family
    return (
        "SELECT symbol, t0, t1 FROM quotes MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts "
        f"MEASURES A.ts AS t0, {last} AS t1 ONE ROW PER MATCH AFTER MATCH SKIP {skip} "
        f"PATTERN {pattern}{window} DEFINE {define})"
    )


def queries(count: int) -> list[tuple[str, str, str]]:
    """``count`` (id, cesar text, SQL) triples, the four families in turn."""
    out = []
    for i in range(count):
        step = i // 4
        f = round(0.99 - 0.01 * (step % 10), 2)
        kind = i % 4
        family = (
            _drop(f) if kind == 0 else _rise(3 + step % 6) if kind == 1
            else _kleene(f) if kind == 2 else _negation(f)
        )  # fmt: skip
        out.append((f"Q{i}", f"{family[0]} PUBLISH Q{i}", _sql(family, "TO NEXT ROW")))
    return out


WINDOW_DAYS = 30
"""The window of the after-match cases: a policy needs one (docs/patterns.md)."""


def skipping_queries(count: int, skip: str) -> list[tuple[str, str, str]]:
    """``count`` (id, cesar pattern, SQL) triples under ``AFTER MATCH SKIP skip`` in both and a
    window of :data:`WINDOW_DAYS` (cesar's ``WITHIN 30`` keeps ``t1 - t0 <= 30``, Flink's
    ``WITHIN INTERVAL '31' DAY`` a span below 31 days: the same for daily rows), three
    pattern families in turn: the drop (``(A B)``), the rising run and its drop
    (``(A B+ C)``) and the negation (``(A B*? C)``)."""
    out = []
    tail = f" WITHIN {WINDOW_DAYS} AFTER MATCH SKIP {skip}"
    window = f" WITHIN INTERVAL '{WINDOW_DAYS + 1}' DAY"
    for i in range(count):
        f = round(0.99 - 0.01 * (i // 3 % 10), 2)
        kinds = (_pattern_drop, _kleene, _negation)
        family = kinds[i % 3](f, tail)
        out.append((f"Q{i}", f"{family[0]} PUBLISH Q{i}", _sql(family, skip, window)))
    return out


def load(path: Path, rows: int) -> list[tuple[str, str, float]]:
    """(symbol, date, close) rows in file order (date, then symbol); the first ``rows``."""
    out = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            out.append((row["symbol"], row["date"], float(row["close"])))
            if rows and len(out) >= rows:
                break
    return out


CLOSING_PRICE = 1e9
"""The price of each stock's closing row (see :func:`closed`)."""


def closed(rows: Sequence[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """``rows`` and, per stock, one row a year after the last at :data:`CLOSING_PRICE`.

    Flink holds back a ``PATTERN (A B*? C)`` match until a later row of its
    stock arrives, even at the end of the input (the last weeks' matches went
    missing); a closing row releases them.  At that price it begins no drop
    and ends no negation match; a run of rises may end at it — in both systems.
    """
    last = max(datetime.date.fromisoformat(d[:10]) for _, d, _ in rows)
    day = (last + datetime.timedelta(days=365)).isoformat()
    return [*rows, *((s, day, CLOSING_PRICE) for s in sorted({s for s, _, _ in rows}))]


def _day(date: str) -> int:
    return datetime.date.fromisoformat(date[:10]).toordinal() - BASE


Match = tuple[str, int, int]


def run_cesar(
    rows: Sequence[tuple[str, str, float]], texts: Sequence[tuple[str, str, str]]
) -> Side:
    """Compile and run the CEL queries on the merged engine in this process."""
    events = [Event.of("Quote", _day(d), _day(d), {"Name": s, "Price": p}) for s, d, p in rows]
    tick = time.perf_counter()
    program = Workload.build([parse_stream_spec(QUOTE)], [(q, cel) for q, cel, _ in texts])
    compile_s = time.perf_counter() - tick
    tick = time.perf_counter()
    published = program.run(events, engine="engine")
    seconds = time.perf_counter() - tick
    found: dict[str, list[Match]] = {q: [] for q, _, _ in texts}
    for e in published:
        found[e.stream].append((str(dict(e.values)["Name"]), e.t0, e.t1))
    return Side(seconds, compile_s, {q: sorted(m) for q, m in found.items()})


def run_flink(
    rows: Sequence[tuple[str, str, float]], texts: Sequence[tuple[str, str, str]], python: Path
) -> Side:
    """Run the SQL statements as one Flink job (perf/flinkjob.py under ``python``)."""
    with tempfile.TemporaryDirectory() as scratch:
        quotes = Path(scratch) / "quotes.csv"
        with quotes.open("w", newline="") as handle:
            writer = csv.writer(handle)
            for s, d, p in rows:
                writer.writerow([s, f"{d} 00:00:00", repr(p)])
        statements = Path(scratch) / "statements.json"
        statements.write_text(json.dumps([[q, sql] for q, _, sql in texts]))
        tick = time.perf_counter()
        done = subprocess.run(
            [str(python), str(ROOT / "perf" / "flinkjob.py"), str(quotes), str(statements),
             str(Path(scratch) / "out")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        wall = time.perf_counter() - tick
        if done.returncode != 0:
            raise RuntimeError(f"the Flink job failed:\n{done.stderr[-3000:]}")
        report = json.loads(done.stdout.strip().splitlines()[-1])
    found: dict[str, list[Match]] = {q: [] for q, _, _ in texts}
    for q, triples in report["matches"].items():
        found[q] = sorted((s, _day(t0), _day(t1)) for s, t0, t1 in triples)
    return Side(report["seconds"], wall - report["seconds"], found)


@dataclass
class Side:
    """One engine's run: seconds processing, seconds before (compile / JVM + plan), matches."""

    seconds: float
    setup_seconds: float
    matches: dict[str, list[Match]]


def compare(
    rows: Sequence[tuple[str, str, float]], count: int, python: Path, skip: str | None = None
) -> dict[str, object]:
    """Both engines on ``count`` queries over ``rows`` (under ``AFTER MATCH SKIP skip``, if
    given: :func:`skipping_queries`); throughput and agreement."""
    texts = queries(count) if skip is None else skipping_queries(count, skip)
    cesar = run_cesar(rows, texts)
    flink = run_flink(rows, texts, python)
    differing = [q for q, _, _ in texts if cesar.matches[q] != flink.matches[q]]
    return {
        "queries": count,
        "after_match": f"SKIP {skip}" if skip else "every match (SKIP TO NEXT ROW in Flink)",
        "rows": len(rows),
        "matches": sum(len(m) for m in cesar.matches.values()),
        "matches_agree": not differing,
        "differing_queries": differing,
        "cesar_events_per_s": round(len(rows) / cesar.seconds, 1),
        "flink_events_per_s": round(len(rows) / flink.seconds, 1),
        "cesar_over_flink": round(flink.seconds / cesar.seconds, 2),
        "cesar_compile_s": round(cesar.setup_seconds, 2),
        "flink_startup_and_plan_s": round(flink.setup_seconds, 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DAILY, help="the daily CSV")
    parser.add_argument("--rows", type=int, default=0, help="first rows only (0: all)")
    parser.add_argument("--queries", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--flink-python", type=Path, default=FLINK_PYTHON)
    parser.add_argument("--json", type=Path, help="write the records here too")
    parser.add_argument(
        "--skip",
        choices=["PAST LAST ROW", "TO NEXT ROW"],
        help="the after-match cases instead: three pattern families under this policy",
    )
    args = parser.parse_args(argv)
    if not args.flink_python.exists():
        raise SystemExit(f"{args.flink_python} is missing: run `make flink-venv` first")
    rows = closed(load(args.data, args.rows))
    tune_collector()  # as the server's shards run the engine
    records = []
    for count in args.queries:
        record = compare(rows, count, args.flink_python, args.skip)
        records.append(record)
        print(json.dumps(record), flush=True)
    if args.json:
        write_json(args.json, stamped(records))
    return 0 if all(r["matches_agree"] for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
