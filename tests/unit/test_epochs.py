"""The epoch gate's Apply requests (server/front/epochs.py): no request near a transport limit."""

from __future__ import annotations

from cesar.automata.schema import Event
from cesar.server.front.epochs import Pending, apply_requests
from cesar.server.wire.convert import to_event


def pending(t1s: list[int], lane: str = "global", size: int = 100) -> list[Pending]:
    return [
        Pending(t1, tick, False, lane, Event.of("S", t1, t1, {"body": "x" * size}))
        for tick, t1 in enumerate(t1s)
    ]


def test_an_epoch_over_the_limit_travels_in_continued_parts_in_order() -> None:
    items = pending([1] * 3 + [2] * 50 + [3] * 2) + pending([2] * 5, lane="key:Name")
    requests = apply_requests(items, limit=1_000)
    assert len(requests) > 3
    assert all(r.ByteSize() < 2_600 for r in requests)  # about twice the limit at most
    sent: dict[str, list[tuple[int, str]]] = {}
    for request in requests:
        assert len({m.lane for m in request.lanes}) == len(request.lanes)
        for message in request.lanes:
            events = sent.setdefault(message.lane, [])
            events += [(e.t1, e.attributes["body"].string_value) for e in message.events]
            later = [m for r in requests[requests.index(request) + 1 :] for m in r.lanes]
            following = next((m for m in later if m.lane == message.lane), None)
            continues = following is not None and following.events[0].t1 == message.events[-1].t1
            assert message.continued == continues  # marked exactly where an epoch goes on
    for lane in ("global", "key:Name"):
        expected = [(i.event.t1, i.event.values[0][1]) for i in items if i.lane == lane]
        assert sent[lane] == expected
    assert [m.continued for m in requests[0].lanes] == [True]


def test_epochs_that_fit_are_never_cut_nor_marked() -> None:
    items = pending(list(range(1, 41)))
    requests = apply_requests(items, limit=1_000)
    assert len(requests) > 1
    for request in requests:
        for message in request.lanes:
            assert not message.continued
    assert [to_event(i.event) for i in items] == [
        e for r in requests for m in r.lanes for e in m.events
    ]
