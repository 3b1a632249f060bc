"""Events as the columns of an Arrow table in the normal form, from protobuf messages or events.

The normal form is :func:`~cesar.server.wire.arrowevents.check`'s: ``stream``, ``t0``,
``t1``, ``arrival``, ``index``, then ``<stream>/<attribute>`` typed as the schema says,
in name order.  :class:`StreamColumns` gathers one stream's events a column at a time:
a protobuf event whose values have exactly its schema's kinds, all present, floats finite
and ``t0 <= t1`` is taken as it is (:meth:`StreamColumns.take`); the caller validates any
other itself and adds the event it gets (:meth:`StreamColumns.add`).  The front reads a
request's events this way (:mod:`cesar.server.front.columns`), and the clients write
their Publish requests as Arrow with it (:func:`arrow_bytes`).

>>> from cesar.automata.schema import parse_stream_spec
>>> columns = StreamColumns(parse_stream_spec("S(Name:string,Price:float)"))
>>> event = pb.Event(stream="S", t0=1, t1=2)
>>> event.attributes["Name"].string_value = "IBM"
>>> event.attributes["Price"].float_value = 9.5
>>> columns.take(0, event), columns.take(1, pb.Event(stream="S", t1=3))
(True, False)
>>> columns.table().column("S/Price").to_pylist()
[9.5]
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from cesar.automata.schema import AttrType, Event, StreamSchema
from cesar.server.wire.arrowevents import ARROW_TYPES, column, encode
from cesar.server.wire.protocolumns import Rows
from cesar.v1 import cesar_pb2 as pb

KINDS = {
    AttrType.STRING: "string_value",
    AttrType.INT: "int_value",
    AttrType.FLOAT: "float_value",
    AttrType.BOOL: "bool_value",
}
"""The :class:`pb.Value` field that holds each attribute type exactly."""

BASE = ("stream", "t0", "t1", "arrival", "index")
"""The normal form's first columns; attribute columns follow in name order."""


class StreamColumns:
    """One stream's events, a list per column (see the module docstring): ``rows``, those
    :func:`~cesar.server.wire.protocolumns.read_events` took when given, added to."""

    __slots__ = ("floats", "kinds", "names", "rows", "schema")

    def __init__(self, schema: StreamSchema, rows: Rows | None = None) -> None:
        self.schema = schema
        self.names = [name for name, _ in schema.attributes]
        self.kinds = [KINDS[typ] for _, typ in schema.attributes]
        self.floats = [i for i, (_, typ) in enumerate(schema.attributes) if typ is AttrType.FLOAT]
        self.rows = Rows(schema) if rows is None else rows

    def take(self, index: int, message: pb.Event) -> bool:
        """Append ``message`` if it is exactly of the schema (see the module docstring);
        False, appending nothing, otherwise.  O(attributes)."""
        attributes = message.attributes
        if len(attributes) != len(self.names):
            return False
        row: list[object] = []
        for name, kind in zip(self.names, self.kinds, strict=True):
            value = attributes.get(name)
            if value is None or value.WhichOneof("kind") != kind:
                return False
            row.append(getattr(value, kind))
        for i in self.floats:
            if not math.isfinite(row[i]):  # type: ignore[arg-type]
                return False
        t1 = message.t1
        return self.rows.append(index, t1 if message.point else message.t0, t1, row)

    def add(self, index: int, event: Event) -> None:
        """Append an event :func:`~cesar.server.wire.convert.from_event` validated."""
        values = dict(event.values)
        self.rows.append(index, event.t0, event.t1, [values[name] for name in self.names])

    def __len__(self) -> int:
        return len(self.rows.index)

    def table(self) -> pa.Table:
        """The events in the normal form (arrival: the index)."""
        rows = self.rows
        index = pa.array(rows.index, pa.int64())
        data: dict[str, pa.Array] = {
            "stream": pa.repeat(pa.scalar(self.schema.name, pa.string()), len(rows.index)),
            "t0": pa.array(rows.t0, pa.int64()),
            "t1": pa.array(rows.t1, pa.int64()),
            "arrival": index,
            "index": index,
        }
        for (name, typ), values in sorted(
            zip(self.schema.attributes, rows.values, strict=True), key=lambda item: item[0][0]
        ):
            data[column(self.schema.name, name)] = pa.array(values, ARROW_TYPES[typ])
        return pa.table(data)


def normal(parts: list[pa.Table]) -> pa.Table:
    """Tables in the normal form as one, its attribute columns in name order."""
    if not parts:
        return pa.table(
            {name: pa.array([], pa.string() if name == "stream" else pa.int64()) for name in BASE}
        )
    whole = parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")
    attributes = sorted(name for name in whole.column_names if name not in BASE)
    return whole.select([*BASE, *attributes])


def arrow_bytes(tables: list[pa.Table]) -> bytes:
    """Tables in the normal form as the Arrow IPC stream of a PublishRequest's
    ``arrow_events``: ``stream``, ``t0``, ``t1`` and the attribute columns, the rows in the
    order of their ``index`` (the server numbers them again in that order)."""
    whole = normal(tables)
    if len(tables) > 1:
        whole = whole.take(pc.sort_indices(whole.column("index")))
    return encode(whole.drop_columns(["arrival", "index"]))
