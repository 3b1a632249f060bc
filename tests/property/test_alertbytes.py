"""Alert bodies written straight to bytes (server/wire/alertbytes.py's EventWriter) read back
as the protobuf message the domain event converts to, whatever its values."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.schema import Event
from cesar.server.wire.alertbytes import HEADS, EventWriter
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
        written = pb.Event.FromString(
            writer.head(event.stream) + writer.rest(event.t0, event.t1, event.values)
        )
        assert written == to_event(event)


def test_the_kept_heads_are_bounded() -> None:
    writer = EventWriter()
    for n in range(3 * HEADS):
        head = writer.head(f"S{n}")
        assert pb.Event.FromString(head + writer.rest(0, 1, ((f"a{n}", n),))).stream == f"S{n}"
    assert len(writer._names) <= HEADS
