"""Listen's AlertBatch messages (server/front/alerts.py): stored alerts framed, never re-encoded."""

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cesar.server.front import alerts
from cesar.server.front.catalog import Catalog, StreamRow, SubscriptionRow
from cesar.v1 import cesar_pb2 as pb


def _alert(seq: int, notice: str = "") -> bytes:
    return pb.Alert(subscription="s1", seq=seq, notice=notice or f"n{seq}").SerializeToString()


def test_framed_alerts_decode_as_one_alert_batch_in_order() -> None:
    batches = alerts._Batches()
    payloads = [_alert(seq, "x" * (seq * 37 % 300)) for seq in range(1, 400)]
    for payload in payloads:
        batches.add(payload)
    [message] = batches.take()
    decoded = pb.AlertBatch.FromString(message)
    assert [a.SerializeToString() for a in decoded.alerts] == payloads
    assert batches.take() == []


def test_a_batch_stays_under_its_byte_limit_and_a_larger_alert_goes_alone() -> None:
    batches = alerts._Batches()
    big = _alert(2, "y" * (alerts.BATCH_BYTES + 10))
    small = [_alert(seq, "z" * 100_000) for seq in (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)]
    for payload in [_alert(1), big, *small]:
        batches.add(payload)
    messages = batches.take()
    seqs = [[a.seq for a in pb.AlertBatch.FromString(m).alerts] for m in messages]
    assert seqs[0] == [1] and seqs[1] == [2]
    assert [seq for part in seqs[2:] for seq in part] == list(range(3, 14))
    assert all(len(m) <= alerts.BATCH_BYTES for i, m in enumerate(messages) if i != 1)
    assert len(messages) == 4


def test_lag_is_how_far_the_furthest_behind_stream_is_from_the_commits(tmp_path: Path) -> None:
    """A stream is behind by the alerts committed after the last batch its consumer took:
    the lag grows with each commit while the consumer takes nothing, is 0 once it has
    taken them all, and a closed stream no longer counts."""
    catalog = Catalog(tmp_path / "c.sqlite", retention=100)
    row = SubscriptionRow("s1", "alice", "q", "Q", "Q", "Q(x:int)", "", 0, 0, 1, 0)
    catalog.add_subscriptions([(row, StreamRow("Q", "Q(x:int)", "alice", "s1"))])
    listeners = alerts.Listeners(catalog.path, Counter())
    assert listeners.lag() == (0, 0.0)

    def commit(number: int, seqs: range) -> None:
        payloads = [("s1", seq, "alice", _alert(seq)) for seq in seqs]
        catalog.commit_batch(number, None, 1, b"", payloads, {"s1": seqs[-1]})
        listeners.notify(catalog.last_alert_id())

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
    until(lambda: bool(listeners.cursors))  # live from the newest committed alert, id 2
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
