"""Arrow rows from a client are untrusted: any bytes decode to events or to one EventError.

Malformed IPC data can crash pyarrow when its values are read unvalidated
(seen: a segfault in the front); ``decode`` validates every batch fully first.
"""

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.schema import EventError, parse_stream_spec
from cesar.server.wire.arrowevents import decode, encode

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
