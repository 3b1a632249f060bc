"""Events as Arrow record batches: the feed's wire format to the front (arrow_events).

A batch of events of several streams is one Arrow table: ``stream`` (utf8),
``t0`` and ``t1`` (int64), and one column ``<stream>/<attribute>`` per attribute
of each stream present, typed as the schema says (null in other streams' rows);
optionally ``arrival`` (int64), the order in which the feed read the rows.
Naming columns by stream keeps two streams that use one attribute name with
different types apart.  The feed builds such tables with Arrow compute only
(no Python object per row); the front reads them back with :func:`decode`,
validating every row as :func:`cesar.automata.schema.validate_event` does for a
protobuf event.  The feed's pieces routed to one shard are checked at once
instead (:func:`check`: the same rules, one Arrow compute call per check and
stream), logged as they are, and reach the shard's lanes as Arrow, where
:func:`events_of` makes the events.

>>> from cesar.automata.schema import parse_stream_spec
>>> schema = parse_stream_spec("S(Name:string,Price:float)")
>>> table = pa.table({"stream": ["S"], "t0": [1], "t1": [2], "S/Name": ["IBM"], "S/Price": [9.5]})
>>> [(e.values, arrival) for e, arrival in decode(encode(table), {"S": schema})]
[((('Name', 'IBM'), ('Price', 9.5)), None)]
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cesar.automata.making import events_of_columns
from cesar.automata.schema import (
    NOT_AN_ATTRIBUTE,
    AttrType,
    Event,
    EventError,
    StreamSchema,
    validate_event,
)

ARROW_TYPES = {
    AttrType.STRING: pa.string(),
    AttrType.INT: pa.int64(),
    AttrType.FLOAT: pa.float64(),
    AttrType.BOOL: pa.bool_(),
}


def column(stream: str, attribute: str) -> str:
    """The column name of ``attribute`` of ``stream``."""
    return f"{stream}/{attribute}"


def warm_up() -> None:
    """Make pyarrow's first array now: pyarrow imports pandas at its first array (about
    0.25 s of CPU, once per process), which would otherwise fall on the first batch a
    front takes (a 0.6 s first publish) and on a shard's first Apply of Arrow rows."""
    pa.array([0], pa.int64())


def encode(table: pa.Table) -> bytes:
    """An Arrow IPC stream holding ``table``."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def read(data: bytes, max_rows: int | None = None, max_bytes: int | None = None) -> pa.Table:
    """The table in an Arrow IPC stream, every buffer checked.

    Raises :class:`EventError` (field ``arrow_events``) when the bytes are not
    an Arrow IPC stream (dictionary batches are refused: no column needs one),
    hold more than ``max_rows`` rows, or more than ``max_bytes`` bytes once
    decompressed.  Both are counted from each record batch's header before its
    body is decompressed (:func:`batch_bytes`), so a compressed request never
    grows past the limits in memory.
    """
    rows = 0
    size = 0
    try:
        messages = pa.ipc.MessageReader.open_stream(data)
        first = next(iter(messages), None)
        if first is None or first.type != "schema":
            raise EventError(None, "arrow_events", "not an Arrow IPC stream: no schema first")
        schema = pa.ipc.read_schema(first)
        batches = []
        for message in messages:
            if message.type != "record batch":
                raise EventError(None, "arrow_events", f"a {message.type} message is not accepted")
            size += batch_bytes(message.metadata, message.body)
            if max_bytes is not None and size > max_bytes:
                raise EventError(
                    None,
                    "arrow_events",
                    f"more than {max_bytes} bytes once decompressed (max_request_bytes): "
                    "send smaller batches",
                )
            batch = pa.ipc.read_record_batch(message, schema)
            rows += batch.num_rows
            if max_rows is not None and rows > max_rows:
                raise EventError(None, "arrow_events", f"more than {max_rows} rows in one request")
            batch.validate(full=True)  # every offset and string checked before any value is read
            batches.append(batch)
        table = pa.Table.from_batches(batches, schema=schema)
        table = table.rename_columns(table.column_names)  # names are decoded lazily: now
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise EventError(None, "arrow_events", f"not an Arrow IPC stream: {exc}") from None
    return table


def batch_bytes(metadata: pa.Buffer, body: pa.Buffer | None) -> int:
    """The bytes a record batch's buffers take once decompressed, read from its header.

    ``metadata`` is the IPC message's flatbuffer (Message → RecordBatch → its
    buffers, each an offset and a length into ``body``); a compressed body
    starts each buffer with its decompressed length (an int64, -1 when the
    buffer was left uncompressed).  Raises EventError for a header that does
    not hold together.  Cost: O(buffers).
    """
    meta = metadata.to_pybytes()
    try:
        header = _field(meta, struct.unpack_from("<I", meta, 0)[0], 2)
        if header is None:
            raise ValueError("no header")
        batch = header + struct.unpack_from("<I", meta, header)[0]
        where = _field(meta, batch, 2)
        compressed = _field(meta, batch, 3) is not None
        if where is None:
            return 0
        vector = where + struct.unpack_from("<I", meta, where)[0]
        total = 0
        for i in range(struct.unpack_from("<I", meta, vector)[0]):
            offset, length = struct.unpack_from("<qq", meta, vector + 4 + 16 * i)
            if offset < 0 or length < 0 or body is None or offset + length > body.size:
                raise ValueError(f"buffer {i} lies outside the body")
            if compressed and length >= 8:
                raw = struct.unpack_from("<q", body, offset)[0]
                total += length - 8 if raw == -1 else raw
            else:
                total += length
    except (struct.error, ValueError) as exc:
        raise EventError(
            None, "arrow_events", f"a record batch header is damaged ({exc})"
        ) from None
    return total


def _field(meta: bytes, table: int, number: int) -> int | None:
    """Where field ``number`` of the flatbuffer table at ``table`` lies (None: absent)."""
    vtable = table - struct.unpack_from("<i", meta, table)[0]
    if not 0 <= vtable < len(meta):
        raise ValueError("a table's vtable lies outside the header")
    slot = 4 + 2 * number
    if slot >= struct.unpack_from("<H", meta, vtable)[0]:
        return None
    offset = struct.unpack_from("<H", meta, vtable + slot)[0]
    return table + offset if offset else None


def decode(
    data: bytes,
    schemas: Mapping[str, StreamSchema],
    max_rows: int | None = None,
    max_bytes: int | None = None,
) -> Iterator[tuple[Event | EventError, int | None]]:
    """Each row of an Arrow IPC stream as a validated event (or its error), with its arrival:
    the row-by-row definition that :func:`check`, the server's path, is tested against.

    The optional ``arrival`` column (int64) orders simultaneous events as they
    arrived at the feed; without it the row order does.

    Raises :class:`EventError` (field ``arrow_events``) as :func:`read` does, when
    the table lacks the ``stream``, ``t0`` and ``t1`` columns, and when a value of it
    has no Python form (a timestamp past the years datetime holds).
    """
    table = read(data, max_rows, max_bytes)
    columns = _with_times(table)
    by_stream: dict[str, list[tuple[str, str]]] = {}
    for name in columns:
        stream, slash, attribute = name.partition("/")
        if slash:
            by_stream.setdefault(stream, []).append((attribute, name))
    try:
        rows = table.to_pylist()
    except (OverflowError, ValueError) as exc:  # e.g. a timestamp past Python's datetimes
        raise EventError(None, "arrow_events", f"a value cannot be read: {exc}") from None
    for row in rows:
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


class Reasons:
    """The first failing check of each row: its field and reason (null while none failed)."""

    def __init__(self, rows: int) -> None:
        self.field = pa.nulls(rows, pa.string())
        self.reason = pa.nulls(rows, pa.string())

    def fail(
        self, mask: pa.Array, field: str, reason: pa.Array | str | Callable[[], pa.Array]
    ) -> None:
        """Record ``field``/``reason`` where ``mask`` holds and no earlier check failed (two
        Arrow calls when it holds nowhere, the common case; a ``reason`` given as a function
        of no arguments is computed only then)."""
        mask = pc.fill_null(mask, False)
        if not pc.any(mask).as_py():
            return
        hit = pc.and_(mask, pc.is_null(self.reason))
        self.field = pc.if_else(hit, pa.scalar(field), self.field)
        self.reason = pc.if_else(hit, reason() if callable(reason) else reason, self.reason)

    @property
    def ok(self) -> pa.Array:
        return pc.is_null(self.reason)


@dataclass(frozen=True)
class Checked:
    """A table's valid rows in normal form, and the error of each rejected row.

    ``table`` has the columns ``stream`` (utf8), ``t0``, ``t1`` (int64, ``t0``
    filled from ``t1`` where it was null), ``arrival`` (int64, the row's index
    where it was null or absent), ``index`` (the row's position in the input)
    and ``<stream>/<attribute>`` for every attribute of each stream present,
    typed as the schema says, attributes of a stream in name order.
    """

    table: pa.Table
    errors: list[tuple[int, EventError]]


def check(table: pa.Table, schemas: Mapping[str, StreamSchema]) -> Checked:
    """Validate every row of ``table`` at once, as :func:`decode` does row by row.

    A row fails as :func:`cesar.automata.schema.validate_event` would fail it:
    the first of a missing or unknown stream, a missing ``t0``/``t1``, ``t0 >
    t1``, a missing attribute (schema order), a float that is not finite, a
    value in a column its stream does not have.  Columns must be typed for
    their schema (integers for ``t0``, ``t1``, ``arrival`` and int attributes;
    integers or floats for float ones; utf8 and bool); a column of another
    type fails the whole table (:class:`EventError`, field ``arrow_events``),
    where :func:`decode` would try each value.

    >>> from cesar.automata.schema import parse_stream_spec
    >>> schema = parse_stream_spec("S(Name:string,Price:float)")
    >>> t = pa.table({"stream": ["S", "S"], "t0": [1, 3], "t1": [2, 2],
    ...               "S/Name": ["IBM", "X"], "S/Price": [9, 1]})
    >>> checked = check(t, {"S": schema})
    >>> checked.table.column("S/Price").to_pylist()
    [9.0]
    >>> [(i, e.field, e.reason) for i, e in checked.errors]
    [(1, 't0', 't0 = 3 is after t1 = 2')]
    """
    rows = table.num_rows
    columns = _with_times(table)
    stream = _typed(table, "stream", pa.string())
    t0 = _typed(table, "t0", pa.int64())
    t1 = _typed(table, "t1", pa.int64())
    index = pa.array(np.arange(rows, dtype=np.int64))
    arrival = pc.fill_null(_typed(table, "arrival", pa.int64()), index)
    reasons = Reasons(rows)
    # A check whose mask holds nowhere by the columns' metadata (no nulls, one stream) is
    # skipped: a batch of one stream without faults costs a few Arrow calls, not dozens.
    seen = pc.unique(stream).to_pylist()
    if None in seen or "" in seen:
        reasons.fail(pc.or_kleene(pc.is_null(stream), pc.equal(stream, "")), "stream", "missing")
    if any(name and name not in schemas for name in seen):
        known = pc.is_in(stream, value_set=pa.array(sorted(schemas), pa.string()))
        reasons.fail(
            pc.invert(known),
            "stream",
            lambda: pc.binary_join_element_wise("unknown stream '", stream, "'", ""),
        )
    if t1.null_count:
        reasons.fail(pc.and_(pc.is_null(t0), pc.is_null(t1)), "t0", "missing")
        reasons.fail(pc.is_null(t1), "t1", "missing")
    if t0.null_count:
        t0 = pc.coalesce(t0, t1)
    reasons.fail(
        pc.greater(t0, t1),
        "t0",
        lambda: pc.binary_join_element_wise(
            "t0 = ", pc.cast(t0, pa.string()), " is after t1 = ", pc.cast(t1, pa.string()), ""
        ),
    )
    out = {"stream": stream, "t0": t0, "t1": t1, "arrival": arrival, "index": index}
    for name in sorted(name for name in seen if name in schemas):
        schema = schemas[name]
        mine = _Rows(stream, name, alone=len(seen) == 1)
        for attribute, typ in schema.attributes:
            key = column(name, attribute)
            if key not in columns:
                reasons.fail(mine.mask(), attribute, "missing")
                continue
            values = out[key] = _typed(table, key, ARROW_TYPES[typ], typ)
            if values.null_count:
                reasons.fail(mine.where(pc.is_null(values)), attribute, "missing")
            if typ is AttrType.FLOAT:
                reasons.fail(
                    mine.where(pc.invert(pc.is_finite(values))),
                    attribute,
                    functools.partial(_not_finite, values),
                )
        names = set(schema.names)
        extras = sorted(
            attribute
            for key in columns
            for owner, slash, attribute in (key.partition("/"),)
            if slash and owner == name and attribute not in names
        )
        for attribute in extras:
            reasons.fail(
                mine.where(pc.is_valid(table.column(column(name, attribute)))),
                attribute,
                NOT_AN_ATTRIBUTE,
            )
    base = ["stream", "t0", "t1", "arrival", "index"]
    ordered = base + sorted(key for key in out if key not in base)
    valid = pa.table({key: out[key] for key in ordered})
    if reasons.reason.null_count == rows:  # no check failed
        return Checked(valid, [])
    ok = reasons.ok
    bad = pc.indices_nonzero(pc.invert(ok))
    errors = [
        (i, EventError(s, f, r))
        for i, s, f, r in zip(
            bad.to_pylist(),
            pc.take(stream, bad).to_pylist(),
            pc.take(reasons.field, bad).to_pylist(),
            pc.take(reasons.reason, bad).to_pylist(),
            strict=True,
        )
    ]
    return Checked(valid.filter(ok), errors)


class _Rows:
    """The rows of one stream in :func:`check`: its mask, made once and only when asked for
    (``alone``: every row is the stream's, and a mask is used as it is)."""

    def __init__(self, stream: pa.Array, name: str, alone: bool) -> None:
        self.stream, self.name, self.alone = stream, name, alone
        self._mask: pa.Array | None = None

    def mask(self) -> pa.Array:
        if self._mask is None:
            self._mask = pc.equal(self.stream, self.name)
        return self._mask

    def where(self, mask: pa.Array) -> pa.Array:
        """``mask`` on this stream's rows only."""
        return mask if self.alone else pc.and_(self.mask(), mask)


def _not_finite(values: pa.Array) -> pa.Array:
    """Why each float of ``values`` is refused (where it is not finite)."""
    return pc.if_else(
        pc.is_nan(values),
        "float nan is not finite",
        pc.if_else(pc.greater(values, 0), "float inf is not finite", "float -inf is not finite"),
    )


def _with_times(table: pa.Table) -> list[str]:
    """The column names of ``table``; EventError if ``stream``, ``t0`` or ``t1`` is not one."""
    columns: list[str] = table.column_names
    missing = [name for name in ("stream", "t0", "t1") if name not in columns]
    if missing:
        raise EventError(None, "arrow_events", f"no column {missing[0]!r}")
    return columns


def _typed(table: pa.Table, name: str, arrow: pa.DataType, typ: AttrType | None = None) -> pa.Array:
    """Column ``name`` cast to ``arrow`` (all nulls when absent); EventError if its type does
    not fit (integers for int64, integers or floats for float64, strings, bools)."""
    if name not in table.column_names:
        return pa.nulls(table.num_rows, arrow)
    values = table.column(name).combine_chunks()
    given = values.type
    if given == arrow:
        return values
    fits = (
        pa.types.is_null(given)
        or {
            pa.int64(): pa.types.is_integer(given),
            pa.float64(): pa.types.is_integer(given) or pa.types.is_floating(given),
            pa.string(): pa.types.is_string(given) or pa.types.is_large_string(given),
            pa.bool_(): pa.types.is_boolean(given),
        }[arrow]
    )
    wanted = typ.value if typ is not None else str(arrow)
    if fits:
        try:
            return pc.cast(values, arrow)
        except pa.ArrowInvalid:
            pass
    raise EventError(None, "arrow_events", f"column {name!r} holds {given}; expected {wanted}")


def lane_table_events(data: bytes) -> list[Event]:
    """The events of a ``LaneEvents.arrow`` the front built, trusted (:func:`events_of`)."""
    return events_of(pa.ipc.open_stream(data).read_all())


def events_of(table: pa.Table) -> list[Event]:
    """The events of a table in the normal form of :func:`check`, trusted, in row order.

    O(rows × attributes of the row's stream); one Python object per value.

    >>> t = pa.table({"stream": ["S"], "t0": [1], "t1": [2], "S/Price": [9.5], "S/Name": ["I"]})
    >>> events_of(t)
    [Event(stream='S', t0=1, t1=2, values=(('Name', 'I'), ('Price', 9.5)))]
    """
    streams = table.column("stream").to_pylist()
    t0s = table.column("t0").to_pylist()
    t1s = table.column("t1").to_pylist()
    keys: dict[str, list[tuple[str, str]]] = {}
    for key in table.column_names:
        owner, slash, attribute = key.partition("/")
        if slash:
            keys.setdefault(owner, []).append((attribute, key))
    values = {
        name: [(attribute, table.column(key).to_pylist()) for attribute, key in sorted(pairs)]
        for name, pairs in keys.items()
    }
    return events_of_columns(streams, t0s, t1s, values)
