"""JSON Lines rows to typed events for the feed: Arrow's JSON reader, ``cesar run``'s rules.

The fast path joins a batch of lines into one buffer and parses it with
``pyarrow.json`` against the streams' attribute types, then checks in Arrow
that every row is a valid event (known stream; ``t`` or both ``t0`` and
``t1``, ``t0 <= t1``; every attribute of its stream present, nothing else).
When anything fails — a malformed line, a wrong type, one bad row — the
batch is read line by line with :func:`cesar.server.wire.eventfile.json_event`, the
function ``cesar run`` uses, so every rejection carries the same field and
reason as ``cesar run`` would give, and the fast path only ever accepts what
that function accepts.

The output has :func:`cesar.server.feed.rows.validate`'s columns: ``stream``, ``t0``,
``t1``, ``<stream>/<attribute>``, ``arrival``, ``field``, ``reason``, ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from cesar.automata.schema import AttrType, Event, EventError, StreamSchema
from cesar.server.feed.rows import RESERVED
from cesar.server.wire.arrowevents import ARROW_TYPES, column
from cesar.server.wire.eventfile import json_event


def check_json(record: pa.RecordBatch, schemas: Mapping[str, StreamSchema]) -> pa.Table:
    """Typed events and rejections for a batch of ``raw`` lines with their ``arrival``."""
    raw = record.column("raw")
    arrival = record.column("arrival")
    parsed = _parse(raw, schemas)
    if parsed is not None:
        checked = _typed(parsed, raw, arrival, schemas)
        if checked is not None:
            return checked
    return _exact(raw, arrival, schemas)


def _explicit_schema(schemas: Mapping[str, StreamSchema]) -> pa.Schema:
    """Reserved fields, and each attribute whose type every stream declaring it agrees on."""
    types: dict[str, set[AttrType]] = {}
    for schema in schemas.values():
        for name, typ in schema.attributes:
            types.setdefault(name, set()).add(typ)
    fields = [pa.field("stream", pa.string())]
    fields += [pa.field(name, pa.int64()) for name in ("t", "t0", "t1")]
    fields += [pa.field(n, ARROW_TYPES[next(iter(t))]) for n, t in types.items() if len(t) == 1]
    return pa.schema(fields)


def _parse(raw: pa.Array, schemas: Mapping[str, StreamSchema]) -> pa.Table | None:
    """The lines parsed by Arrow, or None if Arrow cannot (then the exact path decides)."""
    if raw.null_count or not len(raw):
        return None
    lines = pc.binary_join_element_wise(raw, "\n", "")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    offsets = offsets[lines.offset : lines.offset + len(lines) + 1]
    data = lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    try:
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, data.size + 1)),
            parse_options=pj.ParseOptions(
                explicit_schema=_explicit_schema(schemas), unexpected_field_behavior="infer"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return table if table.num_rows == len(raw) else None


def _typed(
    table: pa.Table, raw: pa.Array, arrival: pa.Array, schemas: Mapping[str, StreamSchema]
) -> pa.Table | None:
    """The events if every row is valid, else None."""
    stream = table.column("stream")
    if len(schemas) == 1:
        stream = pc.fill_null(stream, next(iter(schemas)))
    if stream.null_count or not pc.all(pc.is_in(stream, pa.array(list(schemas)))).as_py():
        return None
    point, t0, t1 = (table.column(name) for name in ("t", "t0", "t1"))
    as_point = pc.and_(pc.is_valid(point), pc.and_(pc.is_null(t0), pc.is_null(t1)))
    as_range = pc.and_(pc.is_null(point), pc.and_(pc.is_valid(t0), pc.is_valid(t1)))
    if not pc.all(pc.or_(as_point, as_range)).as_py():
        return None
    t0 = pc.coalesce(t0, point)
    t1 = pc.coalesce(t1, point)
    if not pc.all(pc.less_equal(t0, t1)).as_py():
        return None
    parts = []
    for name, schema in schemas.items():
        mask = pc.equal(stream, name)
        rows = table.filter(mask)
        if not rows.num_rows:
            continue
        columns: dict[str, pa.ChunkedArray | pa.Array] = {
            "stream": pa.repeat(pa.scalar(name), rows.num_rows),
            "t0": pc.filter(t0, mask),
            "t1": pc.filter(t1, mask),
        }
        for attribute, typ in schema.attributes:
            if attribute not in rows.column_names:
                return None
            values = rows.column(attribute)
            if values.type != ARROW_TYPES[typ] or values.null_count:
                return None
            if typ is AttrType.FLOAT and not pc.all(pc.is_finite(values)).as_py():
                return None
            columns[column(name, attribute)] = values
        for other in rows.column_names:
            foreign = other not in RESERVED and schema.type_of(other) is None
            if foreign and rows.column(other).null_count != rows.num_rows:
                return None
        columns["arrival"] = pc.filter(arrival, mask)
        columns["field"] = pa.nulls(rows.num_rows, pa.string())
        columns["reason"] = pa.nulls(rows.num_rows, pa.string())
        columns["raw"] = pc.filter(raw, mask)
        parts.append(pa.table(columns))
    return pa.concat_tables(parts, promote_options="default")


def _exact(raw: pa.Array, arrival: pa.Array, schemas: Mapping[str, StreamSchema]) -> pa.Table:
    """Line by line with ``cesar run``'s validation (blank lines are skipped, as there)."""
    events: dict[str, list[tuple[int, Event]]] = {}
    bad: list[tuple[int, EventError]] = []
    for index, line in enumerate(raw.to_pylist()):
        if line is None or not line.strip():
            continue
        try:
            event = json_event(line, schemas)
        except EventError as exc:
            bad.append((index, exc))
            continue
        events.setdefault(event.stream, []).append((index, event))
    parts = []
    for name, rows in events.items():
        schema = schemas[name]
        picked = pa.array([index for index, _ in rows], pa.int64())
        columns: dict[str, pa.Array] = {
            "stream": pa.repeat(pa.scalar(name), len(rows)),
            "t0": pa.array([e.t0 for _, e in rows], pa.int64()),
            "t1": pa.array([e.t1 for _, e in rows], pa.int64()),
        }
        for attribute, typ in schema.attributes:
            values = [dict(e.values)[attribute] for _, e in rows]
            columns[column(name, attribute)] = pa.array(values, ARROW_TYPES[typ])
        columns["arrival"] = pc.take(arrival, picked)
        columns["field"] = pa.nulls(len(rows), pa.string())
        columns["reason"] = pa.nulls(len(rows), pa.string())
        columns["raw"] = pc.take(raw, picked)
        parts.append(pa.table(columns))
    if bad:
        picked = pa.array([index for index, _ in bad], pa.int64())
        parts.append(
            pa.table(
                {
                    "arrival": pc.take(arrival, picked),
                    "field": pa.array([e.field or "" for _, e in bad], pa.string()),
                    "reason": pa.array([e.reason for _, e in bad], pa.string()),
                    "raw": pc.take(raw, picked),
                }
            )
        )
    return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})
