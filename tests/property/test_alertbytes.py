"""Alert bodies written straight to bytes (server/wire/alertbytes.py's EventWriter) read back
as the protobuf message the domain event converts to, whatever its values; the shards'
responses numbered from their bytes as from the parsed messages."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.schema import Event
from cesar.server.wire.alertbytes import (
    HEADS,
    ROW_ALERTS,
    ROW_BYTES,
    SMALL_VARINTS,
    EventWriter,
    event_body,
    frame,
    framed,
    frames,
    head,
    notice_body,
    numbered,
    shard_alerts,
    varint,
)
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2

values = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
)
events = st.builds(
    lambda stream, t0, span, attributes: Event(stream, t0, t0 + span, tuple(attributes.items())),
    st.text(min_size=1),
    st.integers(0, 2**62),
    st.one_of(st.just(0), st.integers(0, 2**40)),  # an event's own (t0 = t1) or a span
    st.dictionaries(st.text(), values, max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(stream=events, more=st.lists(events, max_size=4))
def test_a_written_event_reads_back_as_the_converted_one(stream: Event, more: list[Event]) -> None:
    writer = EventWriter()  # one writer for several events: its kept heads are reused
    for event in [stream, *more, stream]:
        head, rest = writer.head(event.stream), writer.rest(event.t0, event.t1, event.values)
        assert pb.Event.FromString(head + rest) == to_event(event)
        alert = pb.Alert.FromString(event_body(head, rest))
        assert alert.HasField("event") and alert.event == to_event(event)


def test_the_kept_heads_and_strings_are_bounded() -> None:
    writer = EventWriter()
    for n in range(3 * HEADS):
        head = writer.head(f"S{n}")
        event = pb.Event.FromString(head + writer.rest(0, 1, ((f"a{n}", n), ("b", f"v{n}"))))
        assert (event.stream, event.attributes["b"].string_value) == (f"S{n}", f"v{n}")
    assert len(writer._names) <= HEADS and len(writer._strings) <= HEADS


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(0, 2 * SMALL_VARINTS), st.integers(0, 2**64 - 1), st.integers(2**48, 2**50)
    )
)
def test_a_varint_from_the_table_or_made_reads_back(value: int) -> None:
    """The table of small varints and the grouped encoding agree with protobuf's, both ways."""
    assert pb.Alert.FromString(b"\x10" + varint(value)).seq == value
    written = pb.Alert(seq=value).SerializeToString()  # protobuf leaves a 0 out
    assert written == (b"\x10" + varint(value) if value else b"")


def _group(subscription: str, bodies: list[bytes], layout: int) -> bytes:
    """A ``ShardAlerts`` as an element of ``ApplyResponse.subscriptions``, in one of the
    layouts protobuf reads alike: 0 as the shard writes it, 1 the bodies before the
    subscription, 2 an unknown field and the subscription given twice (the last one holds)."""
    fields = [b"\x12" + varint(len(body)) + body for body in bodies]
    name = head(subscription)
    if layout == 0:
        return shard_alerts(subscription, bodies)
    if layout == 1:
        inner = b"".join([*fields, name])
    else:
        inner = b"".join([b"\n\x05stale", b"\x18\x07", *fields, name, b"\x25\x00\x00\x00\x00"])
    return b"\x12" + varint(len(inner)) + inner


def _model(responses: list[bytes], last_seq: dict[str, int]) -> list[tuple[str, int, bytes]]:
    """Every alert kept, numbered, from the parsed messages: (subscription, seq, framed)."""
    seqs = dict(last_seq)
    out = []
    for data in responses:
        for group in shard_pb2.ApplyResponse.FromString(data).subscriptions:
            if group.subscription not in seqs:
                continue
            for body in group.alerts:
                seqs[group.subscription] += 1
                seq = seqs[group.subscription]
                out.append((group.subscription, seq, framed(head(group.subscription), seq, body)))
    return out


bodies = st.lists(
    st.one_of(st.binary(max_size=40), st.text(max_size=8).map(notice_body)), max_size=5
)


@settings(max_examples=300, deadline=None)
@given(
    groups=st.lists(
        st.tuples(st.sampled_from(["s1", "s2", "s3", "gone"]), bodies, st.integers(0, 2)),
        max_size=8,
    ),
    cuts=st.lists(st.integers(0, 8), max_size=3),
    seqs=st.tuples(st.integers(0, 10**12), st.integers(0, 5), st.integers(0, 300)),
)
def test_numbered_alerts_equal_the_parsed_messages_numbered(
    groups: list[tuple[str, list[bytes], int]], cuts: list[int], seqs: tuple[int, int, int]
) -> None:
    """numbered over the shards' responses (cut anywhere between groups, any layout) gives
    the alerts the parsed messages give, numbered alike, framed alike; runs of one
    subscription each, in order; the subscription not in ``last_seq`` left out."""
    encoded = [_group(sub, found, layout) for sub, found, layout in groups]
    responses = [b"".join(encoded[a:b]) for a, b in itertools.pairwise([0, *sorted(cuts), None])]
    last_seq = dict(zip(["s1", "s2", "s3"], seqs, strict=True))
    expected = _model(responses, last_seq)
    runs, touched = numbered(responses, last_seq, {sub: f"owner of {sub}" for sub in last_seq})
    assert all(owner == f"owner of {sub}" for sub, _, _, owner, _ in runs)
    got = [
        (sub, seq, alert)
        for sub, first, last, _, row in runs
        for seq, alert in zip(range(first, last + 1), map(frame, frames(row)), strict=True)
    ]
    assert got == expected
    assert touched == {sub: seq for sub, seq, _ in expected}
    assert all(last_seq[sub] == seq for sub, seq in touched.items())
    assert all(first <= last for _, first, last, _, _ in runs)


def test_a_run_holds_at_most_row_alerts_and_about_row_bytes() -> None:
    """Runs are cut at ROW_ALERTS alerts and before ROW_BYTES is passed; an alert larger than
    ROW_BYTES is a run of its own."""
    small = [notice_body(f"n{n}") for n in range(2 * ROW_ALERTS + 500)]
    runs, _ = numbered([shard_alerts("s1", small)], {"s1": 0}, {"s1": "ann"})
    assert [(first, last) for _, first, last, _, _ in runs] == [
        (1, ROW_ALERTS),
        (ROW_ALERTS + 1, 2 * ROW_ALERTS),
        (2 * ROW_ALERTS + 1, 2 * ROW_ALERTS + 500),
    ]
    big = notice_body("x" * (ROW_BYTES // 2))
    huge = notice_body("y" * ROW_BYTES)
    runs, touched = numbered([shard_alerts("s1", [big, big, huge, big])], {"s1": 9}, {"s1": "a"})
    assert [(first, last) for _, first, last, _, _ in runs] == [
        (10, 10),
        (11, 11),
        (12, 12),
        (13, 13),
    ]
    assert all(len(row) <= ROW_BYTES for _, first, _, _, row in runs if first != 12)
    assert touched == {"s1": 13}
