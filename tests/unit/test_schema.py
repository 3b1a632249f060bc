import pickle

import pytest

from cesar.automata.schema import (
    AttrType,
    Event,
    EventError,
    SchemaError,
    TimeUnit,
    parse_stream_spec,
    validate_event,
)

STOCK = parse_stream_spec("Stock(Name:string, Price:float, Volume:int, Hot:bool)[ms]")


def test_spec_round_trips_and_keeps_order():
    assert STOCK.names == ("Name", "Price", "Volume", "Hot")
    assert STOCK.unit is TimeUnit.MS
    assert parse_stream_spec(STOCK.spec()) == STOCK
    assert parse_stream_spec("T()").attributes == ()
    assert parse_stream_spec("T(a:int)").unit is TimeUnit.TICK


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("Stock", "expected Name(attr:type"),
        ("S(a:integer)", "unknown type 'integer' for attribute a"),
        ("S(a)", "bad attribute 'a'"),
        ("S(a:int)[fortnight]", "unknown time unit 'fortnight'"),
        ("S(a:int,a:float)", "attribute a declared twice"),
        ("S(t0:int)", "t0 is reserved"),
    ],
)
def test_bad_specs_name_the_problem(spec, message):
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_stream_spec(spec)


def test_a_long_bad_spec_is_shown_in_whole_words_with_its_length():
    spec = "Regular(" + ",".join(f"Attribute{i}:int" for i in range(12)) + ",Bad(t1):int)[min]"
    with pytest.raises(SchemaError) as bad:
        parse_stream_spec(spec)
    message = str(bad.value)
    shown = message.split("'")[1]
    assert shown.endswith(",…") and spec.startswith(shown[:-1])
    assert f"({len(spec)} characters)" in message


def test_valid_event_is_typed_and_sorted():
    event = validate_event(
        STOCK, {"t0": 1, "t1": 2, "Volume": 5, "Price": 3, "Name": "IBM", "Hot": False}
    )
    assert event == Event(
        "Stock", 1, 2, (("Hot", False), ("Name", "IBM"), ("Price", 3.0), ("Volume", 5))
    )
    assert isinstance(event.attrs()["Price"], float)
    assert event.duration == 2


@pytest.mark.parametrize(
    ("raw", "field", "reason"),
    [
        ({"t1": 1}, "t0", "missing"),
        ({"t0": 2, "t1": 1}, "t0", "t0 = 2 is after t1 = 1"),
        ({"t0": 1.5, "t1": 2}, "t0", "not an integer"),
        ({"t0": "1", "t1": 2}, "t0", "expected an integer timestamp"),
        ({"t0": 1, "t1": 1, "Price": 1.0, "Volume": 1, "Hot": True}, "Name", "missing"),
        (
            {"t0": 1, "t1": 1, "Name": 3, "Price": 1.0, "Volume": 1, "Hot": True},
            "Name",
            "expected a string, got int 3",
        ),
        (
            {"t0": 1, "t1": 1, "Name": "x", "Price": "1", "Volume": 1, "Hot": True},
            "Price",
            "expected a float, got string '1'",
        ),
        (
            {"t0": 1, "t1": 1, "Name": "x", "Price": 1.0, "Volume": 1.5, "Hot": True},
            "Volume",
            "expected an int",
        ),
        (
            {"t0": 1, "t1": 1, "Name": "x", "Price": 1.0, "Volume": True, "Hot": True},
            "Volume",
            "got a bool",
        ),
        (
            {"t0": 1, "t1": 1, "Name": "x", "Price": 1.0, "Volume": 2**63, "Hot": True},
            "Volume",
            "64-bit",
        ),
        (
            {"t0": 1, "t1": 1, "Name": "x", "Price": 1.0, "Volume": 1, "Hot": 1},
            "Hot",
            "expected a bool",
        ),
        (
            {"t0": 1, "t1": 1, "Name": "x", "Price": 1.0, "Volume": 1, "Hot": True, "Extra": 1},
            "Extra",
            "not an attribute",
        ),
        (
            {"t0": 1, "t1": 1, "Name": "x", "Price": float("inf"), "Volume": 1, "Hot": True},
            "Price",
            "not finite",
        ),
    ],
)
def test_invalid_events_name_stream_field_and_reason(raw, field, reason):
    with pytest.raises(EventError) as info:
        validate_event(STOCK, raw)
    assert info.value.stream == "Stock"
    assert info.value.field == field
    assert reason in info.value.reason
    assert f"stream Stock, field {field!r}" in str(info.value)


def test_attr_type_numeric():
    assert AttrType.INT.numeric and AttrType.FLOAT.numeric
    assert not AttrType.STRING.numeric and not AttrType.BOOL.numeric


def test_schemas_and_events_pickle_in_either_build():
    # The front's compile processes send compiled queries back pickled; compiled, a frozen
    # class refuses the field writes pickle's default state restore makes.
    schema = parse_stream_spec("Stock(Name:string,Price:float)[min, America/New_York]")
    event = Event("Stock", 1, 2, (("Name", "IBM"), ("Price", 1.5)))
    assert pickle.loads(pickle.dumps((schema, event))) == (schema, event)
