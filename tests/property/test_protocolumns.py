"""The front's compiled reader of a Publish request's bytes (server/wire/protocolumns.py) against
the parsed message: whatever bytes protobuf accepts — events of any kind, fields out of order,
unknown fields, events merged from two encodings (a field or an attribute given twice) — the
request's table and rejections are those of reading every event from the message."""

from hypothesis import given, settings, target
from hypothesis import strategies as st

from cesar.automata.schema import parse_stream_spec
from cesar.server.front.catalog import StreamRow
from cesar.server.front.columns import message_columns, request_table
from cesar.server.wire.alertbytes import varint
from cesar.server.wire.eventcolumns import StreamColumns, normal
from cesar.server.wire.protocolumns import read_events
from cesar.v1 import cesar_pb2 as pb

INPUTS = {
    spec.name: spec
    for spec in (
        parse_stream_spec("S(Name:string,Price:float,Volume:int,Up:bool)"),
        parse_stream_spec("T(X:int)"),
    )
}
STREAMS = {
    "P": StreamRow("P", "P(X:int)", "alice", "sub-1"),  # published by a subscription
    **{name: StreamRow(name, "", "alice", "") for name in INPUTS},
}

int64s = st.one_of(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1))


def _value(kind: str, data: st.DataObject) -> pb.Value:
    value = pb.Value()
    if kind == "string_value":
        value.string_value = data.draw(st.text(max_size=4))
    elif kind == "int_value":
        value.int_value = data.draw(int64s)
    elif kind == "float_value":
        value.float_value = data.draw(st.floats())
    elif kind == "bool_value":
        value.bool_value = data.draw(st.booleans())
    return value


KINDS = {"string": "string_value", "int": "int_value", "float": "float_value", "bool": "bool_value"}


@st.composite
def events(draw: st.DrawFn) -> bytes:
    """One event's encoding: most often exactly of its stream's schema, else with a fault (an
    attribute missing, of another kind or unknown, a float not finite, a stream unknown or
    published); sometimes two encodings one after the other (protobuf merges them: the later
    field or attribute wins), its fields reordered, or a field protobuf does not know added."""
    data = draw(st.data())
    stream = draw(st.sampled_from(["S", "S", "S", "T", "P", "U", ""]))
    event = pb.Event(stream=stream, t0=draw(int64s), t1=draw(int64s), point=draw(st.booleans()))
    if draw(st.booleans()):
        event.t0, event.t1 = sorted((event.t0, event.t1))
    schema = INPUTS.get(stream)
    for name, typ in schema.attributes if schema is not None else ():
        event.attributes[name].CopyFrom(_value(KINDS[typ.value], data))
    fault = draw(st.sampled_from(["", "", "missing", "missing", "kind", "extra", "not finite"]))
    names = sorted(event.attributes)
    if fault == "missing" and names:
        del event.attributes[draw(st.sampled_from(names))]
    elif fault == "kind" and names:
        kind = draw(st.sampled_from(["string_value", "int_value", "float_value", "bool_value", ""]))
        event.attributes[draw(st.sampled_from(names))].CopyFrom(_value(kind, data))
    elif fault == "extra":
        event.attributes[draw(st.sampled_from(["X", "Zz", "Name"]))].int_value = 1
    elif fault == "not finite" and stream == "S":
        event.attributes["Price"].float_value = draw(st.sampled_from([float("nan"), float("inf")]))
    encoded = event.SerializeToString()
    shapes = ["merged", "attribute again", "attributes first", "unknown field"]
    shape = draw(st.sampled_from(["plain"] * 4 + shapes))
    if shape == "merged":
        encoded += draw(events())
    elif shape == "attribute again" and names:
        again = pb.Event()
        name = draw(st.sampled_from(names))
        kind = KINDS[dict(schema.attributes)[name].value] if schema else "int_value"
        again.attributes[name].CopyFrom(_value(kind, data))
        encoded += again.SerializeToString()
    elif shape == "attributes first":
        head = pb.Event(stream=event.stream, t0=event.t0, t1=event.t1, point=event.point)
        encoded = pb.Event(attributes=event.attributes).SerializeToString()
        encoded += head.SerializeToString()
    elif shape == "unknown field":
        encoded += b"\x48" + varint(draw(st.integers(0, 300)))  # field 9, a varint
    return encoded


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """A request's encoding: its events among a watermark and a field protobuf does not know."""
    parts = []
    for event in draw(st.lists(events(), max_size=8)):
        parts.append(b"\x0a" + varint(len(event)) + event)
        if draw(st.integers(0, 5)) == 0:
            parts.append(draw(st.sampled_from([b"\x18\x07", b"\x78\x05", b"\x7a\x01z"])))
    return b"".join(parts)


def _rows(table: object) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda row: row["index"])  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(requests())
def test_read_events_equal_the_message_path(data: bytes) -> None:
    request = pb.PublishRequest.FromString(data)
    columns: dict[str, StreamColumns] = {}
    errors = message_columns(request, range(len(request.events)), INPUTS, STREAMS, columns)
    expected = normal([found.table() for found in columns.values() if found])
    checked = request_table(request, INPUTS, STREAMS, data)
    assert _rows(checked.table) == _rows(expected)
    got = [(i, e.stream, e.field, e.reason) for i, e in checked.errors]
    assert got == sorted((i, e.stream, e.field, e.reason) for i, e in errors)
    read = read_events(data, INPUTS)
    assert read.count == len(request.events)
    taken = sum(len(t.index) for t in read.streams.values())
    assert taken + len(read.left) == read.count
    target(taken, label="events read from the bytes")
