"""server/front/alertlog.py with the catalog and Listen: commits, merges, removals and restarts
against a model of every alert committed.

The model keeps each subscription's seqs; a replay after any seq that the retention promises
to keep (at least the last ``retention``) must send exactly the later alerts, once, in order;
an older resume point may end the stream with OUT_OF_RANGE, and then only when some alert it
asked for is gone.  A live stream opened at the start, read after every few steps, must send
every alert of its client once, in order per subscription, whatever merged meanwhile.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Generator
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cesar.server.front import alertlog
from cesar.server.front.alerts import Listeners
from cesar.server.front.catalog import Catalog, StreamRow, SubscriptionRow
from cesar.server.front.errors import OutOfRange
from cesar.server.wire import alertbytes
from cesar.v1 import cesar_pb2 as pb

SUBS = {"s1": "alice", "s2": "alice", "s3": "bob", "s4": "alice"}


def _run(sub: str, first: int, count: int) -> tuple[str, int, int, str, bytes]:
    seqs = range(first, first + count)
    data = b"".join(
        alertbytes.framed(alertbytes.head(sub), seq, alertbytes.notice_body(f"{sub}.{seq}"))
        for seq in seqs
    )
    return sub, first, first + count - 1, SUBS[sub], data


def _alerts(messages: list[bytes]) -> list[tuple[str, int, str]]:
    return [
        (a.subscription, a.seq, a.notice)
        for m in messages
        for a in pb.AlertBatch.FromString(m).alerts
    ]


class AlertStore(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.TemporaryDirectory()
        self.path = Path(self.folder.name) / "c.sqlite"
        self.retention = 4
        self.catalog = Catalog(self.path, retention=self.retention)
        rows = [
            SubscriptionRow(sub, owner, "q", f"Q{sub}", f"Q{sub}", f"Q{sub}(x:int)", "", 0, 0, 0, 0)
            for sub, owner in SUBS.items()
        ]
        self.catalog.add_subscriptions(
            [(row, StreamRow(row.stream, row.output_spec, row.owner, row.id)) for row in rows]
        )
        self.last = dict.fromkeys(SUBS, 0)
        self.removed: set[str] = set()
        self.batch = 0
        self.listeners = Listeners(self.path, Counter())
        self.live: Generator[bytes] | None = None
        self.live_seen: dict[str, int] = {}
        self.deadline = 0.0

    def teardown(self) -> None:
        if self.live is not None:
            self.live.close()
        self.catalog.close()
        self.folder.cleanup()

    @rule(
        runs=st.dictionaries(st.sampled_from(sorted(SUBS)), st.integers(1, 3), max_size=4),
        split=st.booleans(),
    )
    def commit(self, runs: dict[str, int], split: bool) -> None:
        self.batch += 1
        rows = []
        for sub, count in sorted(runs.items()):
            if sub in self.removed:
                continue
            first = self.last[sub] + 1
            if split and count > 1:  # a subscription's alerts of a batch in two runs
                rows += [_run(sub, first, 1), _run(sub, first + 1, count - 1)]
            else:
                rows.append(_run(sub, first, count))
            self.last[sub] += count
        touched = {row[0]: row[2] for row in rows}
        self.catalog.commit_batch(self.batch, None, 1, b"", "o", rows, touched)
        self.listeners.notify(self.catalog.last_alert_id())

    @rule(sub=st.sampled_from(["s2", "s3"]))
    def remove(self, sub: str) -> None:
        if sub not in self.removed:
            self.catalog.remove_subscription(sub)
            self.removed.add(sub)

    @rule()
    def reopen(self) -> None:
        self.catalog.close()
        self.catalog = Catalog(self.path, retention=self.retention)
        self.listeners.notify(self.catalog.last_alert_id())

    @precondition(lambda self: self.batch > 0)
    @rule(sub=st.sampled_from(["s1", "s4"]), back=st.integers(0, 12))
    def replay(self, sub: str, back: int) -> None:
        after = max(0, self.last[sub] - back)
        stream = self.listeners.stream("alice", {sub}, {sub: after}, lambda: False)
        try:
            got = _alerts(list(stream))
        except OutOfRange:
            assert back > self.retention, (sub, after, self.last[sub])
            return
        wanted = [(sub, seq, f"{sub}.{seq}") for seq in range(after + 1, self.last[sub] + 1)]
        assert got == wanted

    @rule()
    def read_live(self) -> None:
        """Take what alice's live stream has: each alert of hers once, in order per
        subscription, whatever merged meanwhile; OUT_OF_RANGE only when it was more than the
        retention behind, and then it resumes where it is told."""
        mine = [sub for sub, owner in SUBS.items() if owner == "alice" and sub not in self.removed]
        if self.live is None:  # opens at its first read: resumes from what is surely kept
            after = {s: max(self.live_seen.get(s, 0), self.last[s] - self.retention) for s in mine}
            self.live_seen.update(after)
            self.live = self.listeners.stream("alice", set(), after, self.active)
        self.deadline = time.monotonic() + 30
        try:
            while any(self.live_seen.get(s, 0) < self.last[s] for s in mine):
                for sub, seq, notice in _alerts([next(self.live)]):
                    assert seq == self.live_seen.get(sub, 0) + 1 and notice == f"{sub}.{seq}"
                    self.live_seen[sub] = seq
        except OutOfRange:
            assert any(self.last[s] - self.live_seen.get(s, 0) > self.retention for s in mine)
            self.live = None

    def active(self) -> bool:
        return time.monotonic() < self.deadline

    @invariant()
    def last_seqs_survive(self) -> None:
        rows = {row.id: row.last_seq for row in self.catalog.subscriptions()}
        assert rows == {sub: seq for sub, seq in self.last.items() if sub not in self.removed}


AlertStore.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestAlertStore = AlertStore.TestCase


def test_small_merges_are_exercised(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The machine again with a merge every 3 batches, so the log is dropped under a live
    stream and reopened catalogs count a log mid-merge."""
    monkeypatch.setattr(alertlog, "MERGE_BATCHES", 3)
    AlertStore.TestCase("runTest").runTest()
