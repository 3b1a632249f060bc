"""Events as Arrow record batches: the feed's wire format to the front (arrow_events).

A batch of events of several streams is one Arrow table: ``stream`` (utf8),
``t0`` and ``t1`` (int64), and one column ``<stream>/<attribute>`` per attribute
of each stream present, typed as the schema says (null in other streams' rows);
optionally ``arrival`` (int64), the order in which the feed read the rows.
Naming columns by stream keeps two streams that use one attribute name with
different types apart.  The feed builds such tables with Arrow compute only
(no Python object per row); the front reads them back with :func:`decode`,
validating every row as :func:`cesar.automata.schema.validate_event` does for a
protobuf event.

>>> from cesar.automata.schema import parse_stream_spec
>>> schema = parse_stream_spec("S(Name:string,Price:float)")
>>> table = pa.table({"stream": ["S"], "t0": [1], "t1": [2], "S/Name": ["IBM"], "S/Price": [9.5]})
>>> [(e.values, arrival) for e, arrival in decode(encode(table), {"S": schema})]
[((('Name', 'IBM'), ('Price', 9.5)), None)]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pyarrow as pa

from cesar.automata.schema import AttrType, Event, EventError, StreamSchema, validate_event

ARROW_TYPES = {
    AttrType.STRING: pa.string(),
    AttrType.INT: pa.int64(),
    AttrType.FLOAT: pa.float64(),
    AttrType.BOOL: pa.bool_(),
}


def column(stream: str, attribute: str) -> str:
    """The column name of ``attribute`` of ``stream``."""
    return f"{stream}/{attribute}"


def encode(table: pa.Table) -> bytes:
    """An Arrow IPC stream holding ``table``."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def decode(
    data: bytes, schemas: Mapping[str, StreamSchema], max_rows: int | None = None
) -> Iterator[tuple[Event | EventError, int | None]]:
    """Each row of an Arrow IPC stream as a validated event (or its error), with its arrival.

    The optional ``arrival`` column (int64) orders simultaneous events as they
    arrived at the feed; without it the row order does.

    Raises :class:`EventError` (field ``arrow_events``) when the bytes are not an
    Arrow IPC stream, lack the ``stream``, ``t0`` and ``t1`` columns, or hold
    more than ``max_rows`` rows (counted batch by batch, so no more than one
    record batch past the limit is ever decompressed).
    """
    try:
        reader = pa.ipc.open_stream(data)
        batches = []
        rows = 0
        for batch in reader:
            rows += batch.num_rows
            if max_rows is not None and rows > max_rows:
                raise EventError(None, "arrow_events", f"more than {max_rows} rows in one request")
            batch.validate(full=True)  # every offset and string checked before any value is read
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=reader.schema)
        columns = table.column_names
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise EventError(None, "arrow_events", f"not an Arrow IPC stream: {exc}") from None
    missing = [name for name in ("stream", "t0", "t1") if name not in columns]
    if missing:
        raise EventError(None, "arrow_events", f"no column {missing[0]!r}")
    by_stream: dict[str, list[tuple[str, str]]] = {}
    for name in columns:
        stream, slash, attribute = name.partition("/")
        if slash:
            by_stream.setdefault(stream, []).append((attribute, name))
    for row in table.to_pylist():
        name = row["stream"]
        schema = schemas.get(name) if isinstance(name, str) else None
        if schema is None:
            reason = "missing" if not name else f"unknown stream {name!r}"
            yield EventError(None, "stream", reason), row.get("arrival")
            continue
        raw: dict[str, object] = {"t0": row["t0"], "t1": row["t1"]}
        for attribute, key in by_stream.get(name, ()):
            if row[key] is not None:
                raw[attribute] = row[key]
        if raw["t0"] is None:
            raw["t0"] = raw["t1"]
        try:
            yield (
                validate_event(schema, {k: v for k, v in raw.items() if v is not None}),
                row.get("arrival"),
            )
        except EventError as exc:
            yield exc, row.get("arrival")
