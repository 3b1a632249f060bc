"""Alert bodies written straight to bytes (server/wire/alertbytes.py's EventWriter) read back
as the protobuf message the domain event converts to, whatever its values."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.schema import Event
from cesar.server.wire.alertbytes import HEADS, SMALL_VARINTS, EventWriter, event_body, varint
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb

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
    st.integers(0, 2**40),
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
@given(st.one_of(st.integers(0, 2 * SMALL_VARINTS), st.integers(0, 2**64 - 1)))
def test_a_varint_from_the_table_or_made_reads_back(value: int) -> None:
    """The table of small varints and the byte-by-byte encoding agree with protobuf's."""
    assert pb.Alert.FromString(b"\x10" + varint(value)).seq == value
