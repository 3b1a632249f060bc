"""``cesar serve --shard-cpus``, ``cesar shard --cpus`` and ``cesar feed --cpus``: each
process runs where it was placed, every thread of it, and a placement this host cannot give
stops the start with the reason."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cesar.perf.serverproc import (
    CESAR,
    QUERIES,
    Server,
    alert_line,
    collect,
    expected_lines,
    normalized,
    publish,
    sample_events,
    subscribe,
)
from cesar.v1 import cesar_pb2 as pb

CPUS = sorted(os.sched_getaffinity(0))


def threads_on(pid: int) -> set[frozenset[int]]:
    """The CPU sets the threads of ``pid`` may run on (one set if they all agree)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.add(frozenset(os.sched_getaffinity(int(task.name))))
    return found


def test_serve_puts_the_shard_on_its_cpu_and_the_front_on_the_rest(tmp_path: Path) -> None:
    last = CPUS[-1]
    server = Server(tmp_path / "data", "--shard-cpus", str(last), shards=1).start()
    try:
        assert server.process is not None
        (shard,) = server.shard_pids()
        assert threads_on(shard) == {frozenset({last})}
        rest = frozenset(CPUS) - {last}
        assert threads_on(server.process.pid) == {rest or frozenset(CPUS)}
        # and it serves as before
        conn = server.connect()
        sources = [(q.stem, q.read_text()) for q in QUERIES]
        subs = [subscribe(conn, text) for _, text in sources]
        events = sample_events()
        publish(conn, events)
        expected = normalized(expected_lines(sources, events))
        received = collect(
            conn, sum(expected.values()), pb.ListenRequest(after_seq={s.id: 0 for s in subs})
        )
        assert Counter(alert_line(a) for a in received) == expected
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize(
    ("shards", "spec", "reason"),
    [
        ("1", str(max(CPUS) + 1), f"CPU {max(CPUS) + 1} is not one this process may use"),
        ("2", "0,0", "two shards on one CPU"),
        ("2", str(CPUS[0]), "one CPU per shard: 1 given, 2 shards"),
        ("1", "0-1", "'0-1': one CPU number per shard"),
        (str(len(CPUS)), "auto", f"auto keeps a CPU for the front: {len(CPUS)} shards on"),
    ],
)
def test_serve_refuses_a_placement_it_cannot_give(
    tmp_path: Path, shards: str, spec: str, reason: str
) -> None:
    done = subprocess.run(
        [CESAR, "serve", "--data-dir", str(tmp_path), "--port", "0", "--shards", shards,
         "--shard-cpus", spec],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"cesar: --shard-cpus: {reason}" in done.stderr


def test_shards_on_their_own_are_placed_where_they_run(tmp_path: Path) -> None:
    done = subprocess.run(
        [CESAR, "serve", "--data-dir", str(tmp_path), "--port", "0",
         "--shard", "127.0.0.1:1", "--shard-cpus", "auto"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "shards on their own run where they are started (cesar shard --cpus)" in done.stderr


def test_a_shard_or_a_feed_on_a_cpu_it_cannot_have_stops_with_the_reason(tmp_path: Path) -> None:
    missing = max(CPUS) + 1
    shard = subprocess.run(
        [sys.executable, "-m", "cesar.server.shard.process", "--cpus", str(missing)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert shard.returncode == 2
    assert f"cesar shard: CPUs {missing}: not available here" in shard.stderr
    partly = subprocess.run(
        [sys.executable, "-m", "cesar.server.shard.process", "--cpus", f"{CPUS[0]},{missing}"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert partly.returncode == 2
    assert f"CPU {missing} is not available here" in partly.stderr
    (tmp_path / "in").mkdir()
    feed = subprocess.run(
        [CESAR, "feed", "--server", "127.0.0.1:1", "--source", str(tmp_path / "in"),
         "--checkpoint", str(tmp_path / "cp"), "--dead-letter", str(tmp_path / "dl"),
         "--cpus", str(missing)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert feed.returncode == 2
    assert f"cesar feed: --cpus: CPUs {missing}: not available here" in feed.stderr
