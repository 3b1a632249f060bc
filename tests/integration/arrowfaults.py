"""Arrow publish requests whose second row fails one of the front's vectorized checks each
(the first row is good): what the hostile test expects of them, and seeds of the fuzz."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from cesar.automata.schema import NOT_AN_ATTRIBUTE
from cesar.server.wire.arrowevents import encode
from cesar.v1 import cesar_pb2 as pb

GOOD: dict[str, Any] = {
    "stream": "Stock",
    "t0": 5,
    "t1": 5,
    "Stock/Name": "IBM",
    "Stock/Price": 1.0,
    "Stock/Volume": 1,
}
TYPES = {
    "stream": pa.string(),
    "t0": pa.int64(),
    "t1": pa.int64(),
    "Stock/Name": pa.string(),
    "Stock/Price": pa.float64(),
    "Stock/Volume": pa.int64(),
    "Stock/Extra": pa.int64(),
}
FAULTS: dict[str, tuple[dict[str, Any], str, str]] = {
    "no stream": ({"stream": None}, "stream", "missing"),
    "an empty stream": ({"stream": ""}, "stream", "missing"),
    "an unknown stream": ({"stream": "Nope"}, "stream", "unknown stream 'Nope'"),
    "no time": ({"t0": None, "t1": None}, "t0", "missing"),
    "no t1": ({"t1": None}, "t1", "missing"),
    "t0 after t1": ({"t0": 9}, "t0", "t0 = 9 is after t1 = 5"),
    "an attribute missing": ({"Stock/Volume": None}, "attributes.Volume", "missing"),
    "nan": ({"Stock/Price": float("nan")}, "attributes.Price", "float nan is not finite"),
    "infinity": ({"Stock/Price": float("-inf")}, "attributes.Price", "float -inf is not finite"),
    "an attribute of no stream": ({"Stock/Extra": 3}, "attributes.Extra", NOT_AN_ATTRIBUTE),
    "far ahead": ({"t0": 2**40, "t1": 2**40}, "t1", "t1 = 1099511627776 is more than"),
}
"""Per fault: the second row's changes, the rejection's field and its reason's start."""


def arrow_request(bad: dict[str, Any], shard: int | None = None) -> pb.PublishRequest:
    """A good row, then ``GOOD`` with ``bad``'s changes; routed to ``shard`` of 2 if given."""
    rows = [GOOD, {**GOOD, **bad}]
    names = [name for name in TYPES if any(name in row for row in rows)]
    table = pa.table({n: pa.array([row.get(n) for row in rows], TYPES[n]) for n in names})
    request = pb.PublishRequest(arrow_events=encode(table))
    if shard is not None:
        request.shard, request.shards = shard, 2
    return request


WRONG_TYPE = pb.PublishRequest(
    arrow_events=encode(pa.table({"stream": ["Stock"], "t0": [5], "t1": [5], "Stock/Price": ["1"]}))
)
"""A column of the wrong type: the whole request is refused (INVALID_ARGUMENT)."""
