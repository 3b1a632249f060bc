"""``cesar feed`` as its own process (Spark local[2], or a standalone cluster on loopback) into a
real server (front + 2 shards)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

from cesar.automata.schema import Event
from cesar.perf.serverproc import (
    CESAR,
    QUERIES,
    Server,
    alert_line,
    collect,
    expected_lines,
    normalized,
    sample_events,
    scrape,
    subscribe,
)
from cesar.server.wire.client import Connection
from cesar.server.wire.eventfile import drop_file, input_line
from cesar.v1 import cesar_pb2 as pb

FILES = 8


def batches_logged(log: Path) -> list[dict[str, object]]:
    if not log.exists():
        return []
    records = []
    for line in log.read_text().splitlines():
        if line.startswith("{") and '"micro-batch"' in line:
            records.append(json.loads(line))
    return records


def start_feed(server: Server, tmp: Path, log: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            str(CESAR),
            "feed",
            "--server",
            server.address,
            "--source",
            str(tmp / "in"),
            "--checkpoint",
            str(tmp / "checkpoint"),
            "--dead-letter",
            str(tmp / "dead"),
            "--max-files-per-trigger",
            "1",
            "--trigger",
            "0.2",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(log, "a"),
        text=True,
    )


def wait_for(predicate, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def assert_alerts_are_cesar_runs(
    conn: Connection, subs: list[pb.Subscription], events: list[Event]
) -> Counter[str]:
    """Every alert of ``subs`` from seq 1 equals ``cesar run``'s for the example queries over
    ``events``; those expected lines."""
    queries = [(p.stem, p.read_text()) for p in QUERIES]
    expected = normalized(expected_lines(queries, events))
    replay = pb.ListenRequest(after_seq={s.id: 0 for s in subs})
    got = collect(conn, sum(expected.values()), replay, timeout=120)
    assert normalized(Counter(alert_line(a) for a in got)) == expected
    return expected


def test_feed_killed_and_restarted_delivers_every_alert_once(tmp_path: Path) -> None:
    server = Server(tmp_path / "data").start()
    try:
        conn = server.connect()
        subs = [subscribe(conn, path.read_text(), path.stem) for path in QUERIES]
        events = sample_events()
        size = -(-len(events) // FILES)
        files = [[input_line(e) for e in events[i : i + size]] for i in range(0, len(events), size)]
        first = events[0]
        malformed = [
            "this is not json",
            json.dumps({"stream": "Stock", "t": first.t1 + 500, "Name": "IBM", "Price": "x"}),
            json.dumps({"stream": "Stock", "t": first.t1 + 500, "Name": "IBM", "Price": 1.0}),
        ]
        files[3] += malformed
        late = input_line(Event.of("Stock", first.t0, first.t1, first.attrs()))
        files[-1].append(late)
        (tmp_path / "in").mkdir()
        for number in range(4):
            drop_file(tmp_path / "in", number, files[number])
        log = tmp_path / "feed.log"
        feed = start_feed(server, tmp_path, log)
        wait_for(lambda: len(batches_logged(log)) >= 4, 120, "four micro-batches")
        feed.send_signal(signal.SIGKILL)
        feed.wait(30)
        for number in range(4, FILES):
            drop_file(tmp_path / "in", number, files[number])
        again = start_feed(server, tmp_path, log, "--available-now")
        assert again.wait(300) == 0, log.read_text()[-3000:]

        expected = assert_alerts_are_cesar_runs(conn, subs, events)
        stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata).front
        assert stats["alerts"] == sum(expected.values())  # none twice
        assert stats["events_accepted"] == len(events)

        # A micro-batch Spark runs again after a crash sends the same idempotency keys: run
        # every batch again under the same feed id (a fresh Spark checkpoint): nothing changes.
        replay = tmp_path / "replay"
        (replay / "checkpoint" / "feed").mkdir(parents=True)
        shutil.copy(tmp_path / "checkpoint" / "feed" / "id", replay / "checkpoint" / "feed" / "id")
        (replay / "in").symlink_to(tmp_path / "in")
        again = start_feed(server, replay, replay / "feed.log", "--available-now")
        assert again.wait(300) == 0, (replay / "feed.log").read_text()[-3000:]
        after = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata).front
        assert (after["alerts"], after["events_accepted"]) == (stats["alerts"], len(events))
        assert after["duplicate_batches"] >= FILES

        dead = []
        for path in sorted((tmp_path / "dead").rglob("*.json")):
            dead += [json.loads(line) for line in path.read_text().splitlines()]
        assert sorted((d["raw"], d["field"], d["reason"]) for d in dead) == sorted(
            [
                (malformed[0], "", "not valid JSON: Expecting value at column 1"),
                (malformed[1], "Price", "expected a float, got string 'x'"),
                (malformed[2], "Volume", "missing"),
                (
                    late,
                    "t1",
                    f"late: t1 = {first.t1} is not after the watermark "
                    f"{events[size * 7 - 1].t1 - 1} (allowed lateness 0)",
                ),
            ]
        )
        totals = batches_logged(log)[-1]
        assert (totals["rows"], totals["rejected"], totals["late"]) == (len(events) + 4, 3, 1)
        sending = [b for b in batches_logged(log) if b["batch_sent"]]
        assert sending and all(0 < b["seconds_acknowledged"] < 60 for b in sending)
        conn.close()
    finally:
        server.stop()


def test_the_demo_prints_every_alert_as_cesar_run_does() -> None:
    result = subprocess.run(
        [str(CESAR), "demo", "--pause", "0.1"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "388 alerts; cesar run on the same quotes: 388 (identical)" in result.stderr
    steps = [line.split(":")[1].split()[0] for line in result.stderr.splitlines()]
    assert steps[:3] == ["2340", "starting", "server"], result.stderr
    assert "subscribed examples/queries/drops.cel as s2" in result.stderr
    assert "cesar demo: starting the Spark feed" in result.stderr
    assert "; its web console at http://127.0.0.1:" in result.stderr
    assert len(result.stdout.splitlines()) == 388


def _logged(log: Path, pattern: str) -> str | None:
    """The first group of ``pattern`` in ``log``, once the process has written it."""
    found = re.search(pattern, log.read_text()) if log.exists() else None
    return found.group(1) if found else None


@contextmanager
def spark_cluster(work: Path) -> Iterator[str]:
    """A standalone Spark master and one worker (2 cores, 2 GB) on 127.0.0.1, from the
    installed pyspark, as docs/operations.md starts them; yields the master's URL.

    Every port is 0, picked by the kernel as Spark binds it, and read back from the master's
    log: a port probed free and passed on can be taken by a parallel test before Spark binds
    it, and Spark then moves to the next port while the test asks whoever holds the first."""
    home = Path(pyspark.__file__).parent
    env = os.environ | {"SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    work.mkdir(parents=True)
    processes: list[subprocess.Popen[bytes]] = []

    def start(name: str, *command: str) -> Path:
        log = work / f"{name}.log"
        processes.append(
            subprocess.Popen(
                [str(home / "bin" / "spark-class"), *command],
                stdout=open(log, "w"),  # noqa: SIM115 - the child keeps it
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )
        return log

    try:
        master_log = start(
            "master",
            *("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"),
            *("--port", "0", "--webui-port", "0"),
        )
        found: dict[str, str] = {}

        def master_up() -> bool:
            for key, pattern in (
                ("url", r"Starting Spark master at (spark://\S+)"),
                ("ui", r"MasterWebUI.* started at http://\S+:(\d+)"),
            ):
                value = _logged(master_log, pattern)
                if value is not None:
                    found[key] = value
            return len(found) == 2

        wait_for(master_up, 180, "a Spark master logging its URL and its web UI's port")
        start(
            "worker",
            *("org.apache.spark.deploy.worker.Worker", found["url"], "--host", "127.0.0.1"),
            *("--port", "0", "--cores", "2", "--memory", "2g", "--webui-port", "0"),
            *("--work-dir", str(work / "work")),
        )

        def workers_alive() -> bool:
            page_url = f"http://127.0.0.1:{found['ui']}/json/"
            try:
                with urllib.request.urlopen(page_url, timeout=5) as page:
                    return int(json.load(page)["aliveworkers"]) == 1
            except OSError:
                return False

        wait_for(workers_alive, 180, "a Spark master with one live worker")
        yield found["url"]
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_the_feed_on_a_standalone_spark_cluster_gives_what_cesar_run_gives(
    tmp_path: Path,
) -> None:
    """``cesar feed --master spark://127.0.0.1:PORT``: the same alerts as ``cesar run``;
    Spark's own log in its own file (the feed's stderr is JSON lines only); the feed's
    metrics count every row while it runs."""
    with spark_cluster(tmp_path / "spark") as master:
        server = Server(tmp_path / "data").start()
        try:
            conn = server.connect()
            subs = [subscribe(conn, path.read_text(), path.stem) for path in QUERIES]
            events = sample_events()
            size = -(-len(events) // 4)
            (tmp_path / "in").mkdir()
            for number, start in enumerate(range(0, len(events), size)):
                drop_file(tmp_path / "in", number, [input_line(e) for e in events[start:][:size]])
            log, spark_log = tmp_path / "feed.log", tmp_path / "spark" / "driver.log"
            feed = subprocess.Popen(
                [
                    *(str(CESAR), "feed", "--server", server.address, "--master", master),
                    *("--source", str(tmp_path / "in"), "--checkpoint", str(tmp_path / "ck")),
                    *("--dead-letter", str(tmp_path / "dead"), "--spark-log", str(spark_log)),
                    *("--idle-stop", "15", "--trigger", "0.5", "--metrics-port", "0"),
                ],
                stdout=subprocess.PIPE,
                stderr=open(log, "w"),  # noqa: SIM115 - the child keeps it
                text=True,
                env=os.environ | {"SPARK_LOCAL_IP": "127.0.0.1"},
            )
            assert feed.stdout is not None
            started = sorted([feed.stdout.readline(), feed.stdout.readline()])
            assert f"Spark's log: {spark_log}" in started[0], started
            metrics = started[1].split()[1]

            def all_rows_counted() -> bool:
                return scrape(metrics).get("cesar_feed_rows_total") == len(events)

            wait_for(all_rows_counted, 300, "the feed's metrics to count every row")
            seen = scrape(metrics)
            assert seen["cesar_feed_accepted_total"] == len(events)
            assert seen["cesar_feed_micro_batches_total"] >= 1
            assert seen["cesar_feed_batch_seconds_count"] == seen["cesar_feed_micro_batches_total"]
            assert seen["cesar_feed_watermark"] < events[-1].t1 <= seen["cesar_feed_newest_t1"]
            assert feed.wait(300) == 0, log.read_text()[-3000:]

            assert_alerts_are_cesar_runs(conn, subs, events)
            conn.close()
        finally:
            server.stop()
        assert all(line.startswith("{") for line in log.read_text().splitlines())
        assert "WARN" in spark_log.read_text()
        apps = list((tmp_path / "spark" / "work").glob("app-*/*/stderr"))
        assert apps, "no executor ran on the worker"


def test_a_newcomer_feeds_the_one_minute_file_as_it_is_and_gets_what_run_gives(
    tmp_path: Path,
) -> None:
    """The bundled intraday file laid out as its source wrote it (an ISO ``ts`` with its zone
    offset, extra columns, no stream column) goes through ``cesar feed`` with ``run``'s
    options into a server; the alerts ``listen`` prints are ``cesar run``'s on the same file."""
    intraday = Path(QUERIES[0]).parents[1] / "intraday_sample.csv"
    spec = "Quote(symbol:string,close:float,volume:int)[min]"
    options = ("--time-column", "ts", "--columns", "symbol,close,volume", "--stream-name", "Quote")
    query = tmp_path / "drops.cel"
    query.write_text(
        "FILTER{After < 0.998 * Before}(SELECT symbol, close_1 AS Before, close AS After "
        "FROM Quote NEXT{$1.symbol = $2.symbol} Quote) PUBLISH QuoteDrops\n"
    )
    ran = subprocess.run(
        [str(CESAR), "run", "--stream", spec, "--query", str(query), *options, str(intraday)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    wanted = Counter(
        json.dumps(json.loads(line), sort_keys=True) for line in ran.stdout.splitlines()
    )
    assert sum(wanted.values()) > 10
    server = Server(tmp_path / "data", "--stream", spec).start()
    try:
        client = ("--server", server.address)
        subscribed = subprocess.run(
            [str(CESAR), "subscribe", str(query), *client], capture_output=True, text=True
        )
        assert subscribed.returncode == 0, subscribed.stderr
        (tmp_path / "in").mkdir()
        shutil.copy(intraday, tmp_path / "in" / "quotes.csv")  # there before the feed starts
        log = tmp_path / "feed.log"
        feed = start_feed(server, tmp_path, log, "--format", "csv", "--available-now", *options)
        assert feed.wait(timeout=400) == 0, log.read_text()[-3000:]
        said = [json.loads(line) for line in log.read_text().splitlines()]  # its JSON log
        told = [(r["msg"], r.get("master", r.get("server"))) for r in said[:2]]
        assert told == [  # not a minute of silence while Spark starts
            ("starting Spark", "local[2]"),
            ("asking the front for its streams and routing table", server.address),
        ]
        listened = subprocess.run(
            [
                *(str(CESAR), "listen", "--after-seq", "0"),
                *("--count", str(sum(wanted.values())), "--timeout", "60", *client),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        got = Counter(
            json.dumps(
                {k: v for k, v in json.loads(line).items() if k not in ("subscription", "seq")},
                sort_keys=True,
            )
            for line in listened.stdout.splitlines()
        )
        assert got == wanted
    finally:
        server.stop()
