"""A shard lane's alerts: each stream's sink, the per-epoch limits, and the bytes sent."""

from __future__ import annotations

from cesar.automata.schema import Event
from cesar.server.engine.engine import Engine, EngineOptions, Output
from cesar.server.shard.lanes import CALM_EPOCHS, Lane, Responses, emit
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2


def lane_of(**streams: str) -> Lane:
    lane = Lane(Engine(EngineOptions()))
    for stream, subscription in streams.items():
        lane.add(stream, subscription)
    return lane


def alerts(out: Responses) -> list[tuple[str, str, int, str]]:
    """(subscription, stream or notice, t1, kind) per alert, in the order sent."""
    got = []
    for message in out.messages():
        for group in shard_pb2.ApplyResponse.FromString(message).subscriptions:
            for body in group.alerts:
                alert = pb.Alert.FromString(body)
                if alert.HasField("event"):
                    got.append((group.subscription, alert.event.stream, alert.event.t1, "event"))
                else:
                    got.append((group.subscription, alert.notice, 0, "notice"))
    return got


def outputs(stream: str, count: int, start: int = 1) -> Output:
    return [Event(stream, t, t, (("Price", float(t)),)) for t in range(start, start + count)]


def test_alerts_go_to_each_streams_subscription_in_order() -> None:
    lane = lane_of(A="s1", B="s2")
    out = Responses()
    assert emit(lane, outputs("A", 2) + outputs("B", 1, 5), out, None, None) == 0
    assert alerts(out) == [
        ("s1", "A", 1, "event"),
        ("s1", "A", 2, "event"),
        ("s2", "B", 5, "event"),
    ]


def test_the_count_limit_holds_per_epoch_with_one_notice_an_episode() -> None:
    lane = lane_of(A="s1")
    out = Responses()
    assert emit(lane, outputs("A", 5), out, 3, None) == 2
    got = alerts(out)
    assert [a[2] for a in got if a[3] == "event"] == [1, 2, 3]
    notices = [a[1] for a in got if a[3] == "notice"]
    assert len(notices) == 1 and notices[0].startswith("5 alerts in one epoch")
    # The next epoch starts its tally at zero: three alerts pass, and no second notice.
    out = Responses()
    assert emit(lane, outputs("A", 3, 10), out, 3, None) == 0
    assert alerts(out) == [("s1", "A", t, "event") for t in (10, 11, 12)]
    # Over again inside the episode: dropped, no notice; calm epochs end the episode.
    out = Responses()
    assert emit(lane, outputs("A", 4, 20), out, 3, None) == 1
    assert [a[3] for a in alerts(out)] == ["event"] * 3
    for epoch in range(CALM_EPOCHS):
        emit(lane, outputs("A", 1, 100 + epoch), Responses(), 3, None)
    out = Responses()
    assert emit(lane, outputs("A", 4, 300), out, 3, None) == 1
    assert [a[3] for a in alerts(out)] == ["event"] * 3 + ["notice"]


def test_the_byte_limit_counts_each_events_bytes() -> None:
    lane = lane_of(A="s1", B="s2")
    one = Responses()
    emit(lane, outputs("A", 1), one, None, None)
    body = shard_pb2.ApplyResponse.FromString(one.messages()[0]).subscriptions[0].alerts[0]
    size = len(pb.Alert.FromString(body).event.SerializeToString())  # what the limit counts
    out = Responses()
    # Two of A's events fit in 2.5 events' bytes; B has its own budget.
    assert emit(lane, outputs("A", 4) + outputs("B", 2), out, None, size * 5 // 2) == 2
    got = alerts(out)
    assert [a[:3] for a in got if a[3] == "event"] == [
        ("s1", "A", 1),
        ("s1", "A", 2),
        ("s2", "B", 1),
        ("s2", "B", 2),
    ]
    assert sum(a[3] == "notice" for a in got) == 1


def test_a_stream_given_to_another_subscription_alerts_there() -> None:
    lane = lane_of(A="s1")
    emit(lane, outputs("A", 1), Responses(), None, None)
    lane.remove("A")
    assert not lane.sinks  # a removed subscription's sink is not kept
    lane.add("A", "s2")
    out = Responses()
    emit(lane, outputs("A", 1, 7), out, None, None)
    assert alerts(out) == [("s2", "A", 7, "event")]
