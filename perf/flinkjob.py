"""The Flink side of perf.flinkcmp: MATCH_RECOGNIZE statements as one PyFlink job.

Runs under the Flink virtual environment (``make flink-venv``: apache-flink
pins grpcio and protobuf older than cesar's, so it cannot share ``.venv``) and
imports nothing of cesar.  perf.flinkcmp starts it as

    .venv-flink/bin/python perf/flinkjob.py QUOTES.csv STATEMENTS.json OUT_DIR

QUOTES.csv has ``symbol,ts,price`` rows (``ts`` as ``YYYY-MM-DD HH:MM:SS``),
STATEMENTS.json is a list of ``[query id, SELECT ... MATCH_RECOGNIZE ...]``
whose rows are ``(symbol, t0, t1)``.  All statements run in one job (one
statement set, the source read once) with parallelism 1, in streaming mode over
the bounded file (event time = ``ts``).  Prints one JSON object: seconds from submission to the
job's end, and every query's matches as ``[symbol, t0, t1]`` triples.
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

from pyflink.table import EnvironmentSettings, TableEnvironment


def main(quotes: str, statements: str, out: str) -> int:
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("parallelism.default", "1")
    # Every stock's row of a day has the same ts: a watermark at ts itself would make the
    # day's other rows late, and MATCH_RECOGNIZE drops late rows.
    env.execute_sql(
        f"""CREATE TABLE quotes (
              symbol STRING, ts TIMESTAMP(3), price DOUBLE,
              WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH ('connector' = 'filesystem', 'path' = '{quotes}', 'format' = 'csv',
              'csv.ignore-parse-errors' = 'false')"""
    )
    env.execute_sql(
        f"""CREATE TABLE matched (q STRING, symbol STRING, t0 TIMESTAMP(3), t1 TIMESTAMP(3))
        WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv')"""
    )
    job = env.create_statement_set()
    for query_id, select in json.loads(Path(statements).read_text()):
        job.add_insert_sql(
            f"INSERT INTO matched SELECT '{query_id}', symbol, t0, t1 FROM ({select})"
        )
    started = time.perf_counter()
    result = job.execute()
    client = result.get_job_client()
    assert client is not None
    client.get_job_execution_result().result()
    seconds = time.perf_counter() - started
    found: dict[str, list[list[str]]] = {}
    for part in sorted(Path(out).rglob("*")):
        if part.is_file() and not part.name.startswith("."):
            with part.open(newline="") as handle:
                for query_id, symbol, t0, t1 in csv.reader(handle):
                    found.setdefault(query_id, []).append([symbol, t0, t1])
    print(json.dumps({"seconds": seconds, "matches": found}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:4]))
