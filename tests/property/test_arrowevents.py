"""Arrow rows from a client are untrusted: any bytes decode to events or to one EventError.

Malformed IPC data can crash pyarrow when its values are read unvalidated
(seen: a segfault in the front); ``decode`` validates every batch fully first.
"""

import pyarrow as pa
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cesar.automata.schema import EventError, parse_stream_spec
from cesar.server.wire.arrowevents import check, decode, encode, events_of

SCHEMAS = {"Stock": parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")}
ROWS = 3
SEED = encode(
    pa.table(
        {
            "stream": ["Stock"] * ROWS,
            "t0": pa.array(range(ROWS), pa.int64()),
            "t1": pa.array(range(ROWS), pa.int64()),
            "Stock/Name": ["IBM", "MSFT", "AAPL"],
            "Stock/Price": pa.array([1.0, 2.5, 3.0], pa.float64()),
            "Stock/Volume": pa.array([1, 2, 3], pa.int64()),
        }
    )
)


@settings(max_examples=2000)
@given(st.lists(st.tuples(st.integers(0, len(SEED) - 1), st.integers(0, 255)), max_size=6))
@example(edits=[(143, 10)])  # a column turned timestamp, a value past datetime's years
def test_mutated_arrow_decodes_or_is_refused(edits: list[tuple[int, int]]) -> None:
    data = bytearray(SEED)
    for position, byte in edits:
        data[position] = byte
    try:
        decoded = list(decode(bytes(data), SCHEMAS, max_rows=1000))
    except EventError as exc:
        assert exc.field == "arrow_events"
        return
    assert len(decoded) <= 1000


def test_the_seed_itself_decodes() -> None:
    assert len(list(decode(SEED, SCHEMAS))) == ROWS


STREAMS = {
    "S": parse_stream_spec("S(x:int,f:float,s:string)"),
    "T": parse_stream_spec("T(b:bool,f:float)"),
}
FLOATS = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64))
COLUMNS = {
    "S/x": (pa.int64(), st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))),
    "S/f": (pa.float64(), FLOATS),
    "S/s": (pa.string(), st.one_of(st.none(), st.text(max_size=3))),
    "S/extra": (pa.int64(), st.one_of(st.none(), st.none(), st.integers(0, 9))),
    "T/b": (pa.bool_(), st.one_of(st.none(), st.booleans())),
    "T/f": (pa.int64(), st.one_of(st.none(), st.integers(-5, 5))),  # ints where floats are due
    "arrival": (pa.int64(), st.one_of(st.none(), st.integers(0, 99))),
}


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    """Rows of S, T, an unknown stream and none; times and values with nulls; columns dropped."""
    rows = draw(st.integers(0, 12))
    times = st.one_of(st.none(), st.integers(0, 5))
    data = {
        "stream": pa.array(
            draw(
                st.lists(
                    st.sampled_from(["S", "S", "T", "U", "", None]), min_size=rows, max_size=rows
                )
            ),
            pa.string(),
        ),
        "t0": pa.array(draw(st.lists(times, min_size=rows, max_size=rows)), pa.int64()),
        "t1": pa.array(draw(st.lists(times, min_size=rows, max_size=rows)), pa.int64()),
    }
    for name in draw(st.lists(st.sampled_from(sorted(COLUMNS)), unique=True)):
        arrow, values = COLUMNS[name]
        data[name] = pa.array(draw(st.lists(values, min_size=rows, max_size=rows)), arrow)
    return pa.table(data)


@st.composite
def clean_tables(draw: st.DrawFn) -> pa.Table:
    """Rows of one stream, every column of it without nulls (the checks skipped by metadata),
    now and then a fault: a float not finite, t0 after t1, a value in an extra column."""
    name = draw(st.sampled_from(sorted(STREAMS)))
    rows = draw(st.integers(0, 12))
    data = {
        "stream": pa.array([name] * rows, pa.string()),
        "t0": pa.array(draw(st.lists(st.integers(0, 5), min_size=rows, max_size=rows))),
        "t1": pa.array(draw(st.lists(st.integers(5, 9), min_size=rows, max_size=rows))),
    }
    if rows and draw(st.booleans()):
        data["t0"] = pa.array([*data["t0"].to_pylist()[:-1], 10])
    for key in sorted(COLUMNS):
        owner, _, attribute = key.partition("/")
        arrow, values = COLUMNS[key]
        if owner == name and (attribute != "extra" or draw(st.booleans())):
            drawn = draw(
                st.lists(values.filter(lambda v: v is not None), min_size=rows, max_size=rows)
            )
            data[key] = pa.array(drawn, arrow)
    return pa.table(data)


@settings(max_examples=500)
@given(st.one_of(tables(), clean_tables()))
def test_checked_at_once_as_decoded_row_by_row(table: pa.Table) -> None:
    """check (the front's path for the feed's pieces) against decode (one row at a time): the
    same events, the same arrival order, the same field and reason for each rejected row."""
    expected = list(decode(encode(table), STREAMS))
    checked = check(table, STREAMS)
    valid = checked.table
    events = dict(zip(valid.column("index").to_pylist(), events_of(valid), strict=True))
    arrivals = dict(
        zip(valid.column("index").to_pylist(), valid.column("arrival").to_pylist(), strict=True)
    )
    errors = {i: (e.field, e.reason) for i, e in checked.errors}
    assert len(events) + len(errors) == table.num_rows
    for i, (item, arrival) in enumerate(expected):
        if isinstance(item, EventError):
            assert errors.get(i) == (item.field, item.reason), i
        else:
            assert events.get(i) == item, i
            assert arrivals[i] == (i if arrival is None else arrival)


def test_a_column_of_the_wrong_type_refuses_the_piece() -> None:
    table = pa.table({"stream": ["S"], "t0": [1], "t1": [1], "S/x": ["seven"]})
    try:
        check(table, STREAMS)
    except EventError as exc:
        assert exc.field == "arrow_events"
        assert exc.reason == "column 'S/x' holds string; expected int"
    else:
        raise AssertionError("a string column for an int attribute was taken")
