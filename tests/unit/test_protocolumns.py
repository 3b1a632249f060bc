"""The front's reader of a Publish request's bytes (server/wire/protocolumns.py): what it takes,
what it leaves to the parsed message, and why."""

import pytest

from cesar.automata.schema import parse_stream_spec
from cesar.perf.serverbench import stock_events
from cesar.perf.serverproc import STOCK
from cesar.server.wire.alertbytes import varint
from cesar.server.wire.client import publish_requests
from cesar.server.wire.protocolumns import read_events
from cesar.v1 import cesar_pb2 as pb

INPUTS = {"Stock": parse_stream_spec(STOCK)}


def _quote(**changes: object) -> pb.Event:
    event = pb.Event(stream="Stock", t0=5, t1=7)
    event.attributes["Name"].string_value = "IBM"
    event.attributes["Price"].float_value = 98.5
    event.attributes["Volume"].int_value = 1200
    for name, value in changes.items():
        if value is None:
            del event.attributes[name]
        elif isinstance(value, str):
            event.attributes[name].string_value = value
        elif isinstance(value, float):
            event.attributes[name].float_value = value
        else:
            event.attributes[name].int_value = value  # type: ignore[assignment]
    return event


def _request(*encoded: bytes) -> bytes:
    return b"".join(b"\x0a" + varint(len(event)) + event for event in encoded)


def test_a_clients_requests_are_read_from_their_bytes_whole() -> None:
    events = stock_events(2_000)
    request = publish_requests(events, 2_000)[0]
    read = read_events(request.SerializeToString(), INPUTS)
    assert (read.left, read.count) == ([], 2_000)
    taken = read.streams["Stock"]
    assert taken.index == list(range(2_000))
    assert taken.t0 == [e.t0 for e in events] and taken.t1 == [e.t1 for e in events]
    names = [name for name, _ in INPUTS["Stock"].attributes]
    rows = [dict(zip(names, row, strict=True)) for row in zip(*taken.values, strict=True)]
    assert rows == [dict(e.values) for e in events]


def test_times_are_int64_and_a_point_takes_t1() -> None:
    negative = _quote()
    negative.t0, negative.t1 = -(2**63), -1
    point = _quote()
    point.t0, point.point = 99, True
    read = read_events(_request(negative.SerializeToString(), point.SerializeToString()), INPUTS)
    taken = read.streams["Stock"]
    assert (taken.t0, taken.t1, read.left) == ([-(2**63), 7], [-1, 7], [])


def _entry(key: bytes | None, value: bytes | None) -> bytes:
    body = (b"" if key is None else b"\x0a" + varint(len(key)) + key) + (
        b"" if value is None else b"\x12" + varint(len(value)) + value
    )
    return b"\x22" + varint(len(body)) + body


HEAD = pb.Event(stream="Stock", t0=5, t1=7).SerializeToString()
REST = b"".join(
    _entry(name.encode(), _quote().attributes[name].SerializeToString())
    for name in ("Name", "Price")
)
LEFT = {
    "an unknown stream": pb.Event(stream="Bond", t1=1).SerializeToString(),
    "no stream": _quote(Name="x").SerializeToString()[len(HEAD) :],
    "an attribute missing": _quote(Volume=None).SerializeToString(),
    "an int for a float": _quote(Price=98).SerializeToString(),
    "an unknown attribute": _quote(Sector="IT").SerializeToString(),
    "a float not finite": _quote(Price=float("nan")).SerializeToString(),
    "t0 after t1": pb.Event.FromString(
        _quote().SerializeToString() + b"\x10\x08"
    ).SerializeToString(),
    "attributes before the stream": REST
    + _entry(b"Volume", b"\x10\x01")
    + pb.Event(stream="Stock", t1=1).SerializeToString(),
    "a field protobuf does not know": _quote().SerializeToString() + b"\x48\x01",
    "an attribute twice": _quote().SerializeToString() + _entry(b"Volume", b"\x10\x02"),
    "a map entry without its value": HEAD + REST + _entry(b"Volume", None),
    "a map entry without its key": HEAD + REST + _entry(None, b"\x10\x02"),
    "a value of no kind": HEAD + REST + _entry(b"Volume", b""),
    "a value of two fields": HEAD + REST + _entry(b"Volume", b"\x10\x02\x10\x03"),
    "the stream twice": _quote().SerializeToString() + b"\x0a\x05Stock",
}


@pytest.mark.parametrize("why", sorted(LEFT))
def test_an_event_not_exactly_of_its_schema_is_left_to_the_message(why: str) -> None:
    encoded = LEFT[why]
    pb.Event.FromString(encoded)  # protobuf reads it
    read = read_events(_request(_quote().SerializeToString(), encoded), INPUTS)
    assert (read.left, read.count) == ([1], 2)
    assert read.streams["Stock"].index == [0]


def test_fields_of_the_request_around_its_events_are_skipped() -> None:
    event = _quote().SerializeToString()
    data = b"\x18\x07" + _request(event) + b"\x12\x03key" + b"\x7a\x01z" + _request(event)
    assert pb.PublishRequest.FromString(data).watermark == 7
    read = read_events(data, INPUTS)
    assert (read.streams["Stock"].index, read.left, read.count) == ([0, 1], [], 2)


@pytest.mark.parametrize("data", [b"\x0a\x05abc", b"\x0a", b"\x0f", b"\x80"])
def test_bytes_protobuf_would_not_read_raise(data: bytes) -> None:
    with pytest.raises(ValueError):
        read_events(data, INPUTS)
