"""Listen's AlertBatch messages (server/front/alerts.py): stored rows of framed alerts, sent
as they are."""

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cesar.server.front import alerts
from cesar.server.front.catalog import Catalog, StreamRow, SubscriptionRow
from cesar.server.wire import alertbytes
from cesar.v1 import cesar_pb2 as pb


def _row(seqs: range, notice: str = "") -> bytes:
    """The stored row of alerts ``seqs`` of s1: each framed as AlertBatch.alerts."""
    return b"".join(
        alertbytes.framed(alertbytes.head("s1"), seq, alertbytes.notice_body(notice or f"n{seq}"))
        for seq in seqs
    )


def test_rows_decode_as_one_alert_batch_in_order() -> None:
    batches = alerts._Batches()
    rows = [_row(range(seq, seq + 3), "x" * (seq * 37 % 300)) for seq in range(1, 400, 3)]
    for row in rows:
        batches.add(row, 3)
    [message] = batches.take()
    decoded = pb.AlertBatch.FromString(message)
    assert [a.seq for a in decoded.alerts] == list(range(1, 400))
    assert [a.notice for a in decoded.alerts[:3]] == ["x" * 37] * 3
    assert batches.take() == []


def test_a_batch_stays_under_its_byte_limit_and_a_larger_alert_goes_alone() -> None:
    batches = alerts._Batches()
    big = _row(range(2, 3), "y" * (alerts.BATCH_BYTES + 10))
    small = [_row(range(seq, seq + 1), "z" * 100_000) for seq in range(3, 14)]
    for row in [_row(range(1, 2)), big, *small]:
        batches.add(row, 1)
    messages = batches.take()
    seqs = [[a.seq for a in pb.AlertBatch.FromString(m).alerts] for m in messages]
    assert seqs[0] == [1] and seqs[1] == [2]
    assert [seq for part in seqs[2:] for seq in part] == list(range(3, 14))
    assert all(len(m) <= alerts.BATCH_BYTES for i, m in enumerate(messages) if i != 1)
    assert len(messages) == 4


def test_a_batch_holds_at_most_its_count_of_alerts_in_whole_rows() -> None:
    batches = alerts._Batches()
    for first in range(1, 2_401, 600):
        batches.add(_row(range(first, first + 600)), 600)
    counts = [len(pb.AlertBatch.FromString(m).alerts) for m in batches.take()]
    assert counts == [600, 600, 600, 600] and alerts.BATCH_ALERTS == 1000


def _catalog(tmp_path: Path) -> Catalog:
    catalog = Catalog(tmp_path / "c.sqlite", retention=100)
    row = SubscriptionRow("s1", "alice", "q", "Q", "Q", "Q(x:int)", "", 0, 0, 1, 0)
    catalog.add_subscriptions([(row, StreamRow("Q", "Q(x:int)", "alice", "s1"))])
    return catalog


def test_a_stream_resumes_inside_a_row_and_recent_reads_across_rows(tmp_path: Path) -> None:
    """Three batches' rows of s1 (seqs 1-4, 5-6, 7-9): resuming after seq 2 sends 3 to 9,
    after 6 sends 7 to 9; the three newest alerts are 9, 8, 7 and the five newest reach into
    the row before."""
    catalog = _catalog(tmp_path)
    for number, seqs in enumerate((range(1, 5), range(5, 7), range(7, 10)), 1):
        catalog.commit_batch(
            *(number, None, 1, b"", "alice", [("s1", seqs[0], seqs[-1], "alice", _row(seqs))]),
            {"s1": seqs[-1]},
        )
    listeners = alerts.Listeners(catalog.path, Counter())
    for after, sent in ((2, list(range(3, 10))), (6, [7, 8, 9]), (0, list(range(1, 10)))):
        stream = listeners.stream("alice", {"s1"}, {"s1": after}, lambda: False)
        seqs = [a.seq for m in stream for a in pb.AlertBatch.FromString(m).alerts]
        assert seqs == sent, after
    newest = [pb.Alert.FromString(a).seq for a in listeners.recent("s1", 3)]
    assert newest == [9, 8, 7]
    assert [pb.Alert.FromString(a).seq for a in listeners.recent("s1", 5)] == [9, 8, 7, 6, 5]
    catalog.close()


def test_lag_is_how_far_the_furthest_behind_stream_is_from_the_commits(tmp_path: Path) -> None:
    """A stream is behind by the alerts committed after the last batch its consumer took:
    the lag grows with each commit while the consumer takes nothing, is 0 once it has
    taken them all, and a closed stream no longer counts."""
    catalog = _catalog(tmp_path)
    listeners = alerts.Listeners(catalog.path, Counter())
    assert listeners.lag() == (0, 0.0)

    def commit(number: int, seqs: range) -> None:
        row = ("s1", seqs[0], seqs[-1], "alice", _row(seqs))
        catalog.commit_batch(number, None, 1, b"", "o", [row], {"s1": seqs[-1]})
        listeners.notify(catalog.last_alert_id(), len(seqs))

    def until(condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline
            time.sleep(0.01)

    commit(1, range(1, 3))
    live = listeners.stream("alice", set(), {}, lambda: True)
    permits, taken = threading.Semaphore(0), queue.Queue[list[int]]()
    stopping = False

    def consumer() -> None:  # takes one message per permit, as a transport would
        while permits.acquire() and not stopping:
            taken.put([a.seq for a in pb.AlertBatch.FromString(next(live)).alerts])

    thread = threading.Thread(target=consumer)
    thread.start()
    permits.release()
    until(lambda: bool(listeners.cursors))  # live from the newest committed row, id 1
    commit(2, range(3, 6))
    assert taken.get(timeout=30) == [3, 4, 5]
    behind, seconds = listeners.lag()  # read from the catalog, not yet taken
    assert behind == 3 and seconds > 0.0
    commit(3, range(6, 7))
    assert listeners.lag()[0] == 4 and listeners.lag()[1] >= seconds
    permits.release()
    assert taken.get(timeout=30) == [6]
    assert listeners.lag()[0] == 1
    permits.release()
    until(lambda: listeners.lag() == (0, 0.0))
    commit(4, range(7, 9))
    assert taken.get(timeout=30) == [7, 8]
    assert listeners.lag()[0] == 2
    live.close()  # suspended at its yield: the consumer thread waits for a permit
    stopping = True
    permits.release()
    thread.join(30)
    assert listeners.lag() == (0, 0.0) and not listeners.commits
    catalog.close()


def _two_subscriptions(tmp_path: Path, retention: int) -> Catalog:
    """alice's s1 and s2, bob's s3."""
    catalog = Catalog(tmp_path / "c.sqlite", retention=retention)
    rows = [
        SubscriptionRow(sub, owner, "q", f"Q{sub}", f"Q{sub}", f"Q{sub}(x:int)", "", 0, 0, 1, 0)
        for sub, owner in (("s1", "alice"), ("s2", "alice"), ("s3", "bob"))
    ]
    catalog.add_subscriptions(
        [(row, StreamRow(row.stream, row.output_spec, row.owner, row.id)) for row in rows]
    )
    return catalog


def _framed(sub: str, seqs: range) -> bytes:
    return b"".join(
        alertbytes.framed(alertbytes.head(sub), seq, alertbytes.notice_body(f"{sub}-{seq}"))
        for seq in seqs
    )


def _commit_many(catalog: Catalog, numbers: range, last: dict[str, int]) -> None:
    """Batches alerting s1 once, s2 every other batch (two alerts), s3 every third."""
    for number in numbers:
        runs = []
        for sub, owner, every, count in (
            ("s1", "alice", 1, 1),
            ("s2", "alice", 2, 2),
            ("s3", "bob", 3, 1),
        ):
            if number % every == 0:
                seqs = range(last[sub] + 1, last[sub] + count + 1)
                runs.append((sub, seqs[0], seqs[-1], owner, _framed(sub, seqs)))
                last[sub] = seqs[-1]
        catalog.commit_batch(number, None, 1, b"", "o", runs, {r[0]: r[2] for r in runs})


def _sent(messages: list[bytes]) -> list[tuple[str, int]]:
    return [(a.subscription, a.seq) for m in messages for a in pb.AlertBatch.FromString(m).alerts]


def test_replays_read_the_merged_rows_then_the_log_each_alert_once(tmp_path: Path) -> None:
    """150 batches (two merges and part of a third's log): resuming anywhere sends every later
    alert of the subscription once, in order, whether it is merged, in the log, or both
    (rows stay in the log one merge longer); ``recent`` reads across the two."""
    catalog = _two_subscriptions(tmp_path, retention=100_000)
    last = dict.fromkeys(("s1", "s2", "s3"), 0)
    _commit_many(catalog, range(1, 151), last)
    assert last == {"s1": 150, "s2": 150, "s3": 50}
    listeners = alerts.Listeners(catalog.path, Counter())
    for sub in ("s1", "s2"):
        for after in (0, 1, 63, 64, 100, 127, 128, 129, 149, 150):
            stream = listeners.stream("alice", {sub}, {sub: after}, lambda: False)
            assert _sent(list(stream)) == [(sub, seq) for seq in range(after + 1, 151)], after
    both = _sent(list(listeners.stream("alice", set(), {"s1": 140, "s2": 146}, lambda: False)))
    assert [seq for sub, seq in both if sub == "s1"] == list(range(141, 151))  # in order per
    assert [seq for sub, seq in both if sub == "s2"] == list(range(147, 151))  # subscription
    assert len(both) == 14
    assert [pb.Alert.FromString(a).seq for a in listeners.recent("s2", 30)] == list(
        range(150, 120, -1)
    )
    assert [pb.Alert.FromString(a).seq for a in listeners.recent("s3", 3)] == [50, 49, 48]
    catalog.close()


def test_a_live_stream_behind_a_merge_reads_the_merged_rows_and_goes_on(tmp_path: Path) -> None:
    """A live stream of alice's that takes nothing while 200 batches commit (three merges: the
    log rows after its cursor are deleted) then sends every alert of hers once, in order: the
    ones merged past it from the merged rows, then the log; bob's never."""
    catalog = _two_subscriptions(tmp_path, retention=100_000)
    last = dict.fromkeys(("s1", "s2", "s3"), 0)
    _commit_many(catalog, range(1, 3), last)
    listeners = alerts.Listeners(catalog.path, Counter())
    listeners.notify(catalog.last_alert_id())
    live = listeners.stream("alice", set(), {"s1": 0}, lambda: True)
    seen = _sent([next(live)])  # s1's first two; the stream waits at its yield
    _commit_many(catalog, range(3, 203), last)
    listeners.notify(catalog.last_alert_id())
    assert (
        catalog.db.execute("SELECT value FROM marks WHERE name = 'alert_log_dropped'").fetchone()[0]
        > 2
    )
    while len(seen) < last["s1"] + last["s2"] - 2:
        seen.extend(_sent([next(live)]))
    assert [seq for sub, seq in seen if sub == "s1"] == list(range(1, last["s1"] + 1))
    assert [seq for sub, seq in seen if sub == "s2"] == list(range(3, last["s2"] + 1))
    assert len(seen) == last["s1"] + last["s2"] - 2
    live.close()
    catalog.close()


def test_a_replay_of_many_subscriptions_joins_them_in_full_messages(tmp_path: Path) -> None:
    """A client's replay of 300 subscriptions with an alert or two each, merged by the 64th
    batch, comes in one message, not one a subscription: each message costs the transport
    and the consumer, whatever it holds."""
    catalog = Catalog(tmp_path / "c.sqlite", retention=100_000)
    subs = [f"s{n}" for n in range(300)]
    rows = [
        SubscriptionRow(sub, "alice", "q", sub, sub, f"{sub}(x:int)", "", 0, 0, 1, 0)
        for sub in subs
    ]
    catalog.add_subscriptions(
        [(row, StreamRow(row.stream, row.output_spec, row.owner, row.id)) for row in rows]
    )
    last = dict.fromkeys(subs, 0)
    for number in range(1, 65):
        runs = []
        for sub in subs[number % 60 :: 60]:
            last[sub] += 1
            runs.append(
                (sub, last[sub], last[sub], "alice", _framed(sub, range(last[sub], last[sub] + 1)))
            )
        catalog.commit_batch(number, None, 1, b"", "o", runs, {r[0]: r[2] for r in runs})
    assert (
        catalog.db.execute("SELECT COUNT(DISTINCT subscription) FROM alerts").fetchone()[0] == 300
    )
    listeners = alerts.Listeners(catalog.path, Counter())
    messages = list(listeners.stream("alice", set(subs), dict.fromkeys(subs, 0), lambda: False))
    assert sorted(_sent(messages)) == sorted((s, q) for s in subs for q in range(1, last[s] + 1))
    assert len(messages) == 1 and sum(last.values()) == 320
    catalog.close()
