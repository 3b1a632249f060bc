"""``cesar feed`` as its own process (Spark local[2]) into a real server (front + 2 shards)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

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
    subscribe,
)
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

        queries = [(p.stem, p.read_text()) for p in QUERIES]
        expected = normalized(expected_lines(queries, events))
        replay = pb.ListenRequest(after_seq={s.id: 0 for s in subs})
        got = collect(conn, sum(expected.values()), replay, timeout=120)
        assert normalized(Counter(alert_line(a) for a in got)) == expected
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
        conn.close()
    finally:
        server.stop()


def test_the_demo_prints_every_alert_as_cesar_run_does() -> None:
    result = subprocess.run(
        [str(CESAR), "demo", "--pause", "0.1"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "290 alerts; cesar run on the same quotes: 290 (identical)" in result.stderr
    steps = [line.split(":")[1].split()[0] for line in result.stderr.splitlines()]
    assert steps[:3] == ["2340", "starting", "server"], result.stderr
    assert "subscribed examples/queries/drops.cel as s2" in result.stderr
    assert "cesar demo: starting the Spark feed" in result.stderr
    assert len(result.stdout.splitlines()) == 290
