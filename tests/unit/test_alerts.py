"""Listen's AlertBatch messages (server/front/alerts.py): stored alerts framed, never re-encoded."""

from cesar.server.front import alerts
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
