"""The feed's work on each batch of rows, in Arrow: validate, then route (docs/design.md).

JSON Lines arrive as text (``raw``) and are read by :mod:`cesar.server.feed.jsonl`;
CSV rows arrive as a ``map<string, string>`` (``m``, header → cell), typed and
checked here by :func:`validate`.  Both give events typed by the
catalog's schemas, with the reason of every rejected row; :func:`route` then
gives each event the shards it must reach under the front's routing table,
compiled for Arrow by :class:`cesar.server.wire.arrowroute.ArrowRoutes`.

Everything is vectorized: Python touches one value per distinct key, never one
per row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cesar.automata.schema import (
    NOT_AN_ATTRIBUTE,
    AttrType,
    EventError,
    StreamSchema,
    parse_stream_spec,
)
from cesar.server.wire.arrowevents import Reasons, column
from cesar.server.wire.arrowroute import ArrowRoutes
from cesar.server.wire.eventfile import Ingest
from cesar.v1 import cesar_pb2 as pb

INTEGER = r"^-?[0-9]{1,18}(\.0*)?$"
NUMBER = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
RESERVED = ("stream", "t", "t0", "t1")


@dataclass(frozen=True)
class Plan:
    """What one micro-batch is validated and routed by: the catalog's input streams and routes.

    Plain data (schema specs and serialized messages), so Spark ships it to
    executors as is.
    """

    shards: int
    version: int
    specs: tuple[str, ...]
    routing: bytes
    """The routing table, serialized."""

    @staticmethod
    def of(table: pb.RoutingTable, streams: list[pb.StreamInfo]) -> Plan:
        """The plan for a routing table and the server's streams (input streams only)."""
        return Plan(
            shards=table.shards,
            version=table.version,
            specs=tuple(s.spec for s in streams if not s.subscription),
            routing=table.SerializeToString(),
        )

    def table(self) -> pb.RoutingTable:
        """The routing table."""
        table: pb.RoutingTable = pb.RoutingTable.FromString(self.routing)
        return table

    def schemas(self) -> dict[str, StreamSchema]:
        """The input streams by name."""
        return {s.name: s for s in map(parse_stream_spec, self.specs)}


# ------------------------------------------------------------------ validation


def _quoted(values: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise("'", pc.fill_null(values, ""), "'", "")


class _Fields:
    """The entries of a ``map<string, string>`` column, looked up by key in one pass each.

    (``pc.map_lookup`` scans every map per key; this compares the flattened
    keys once per key and scatters the first match of each row with numpy.)
    """

    def __init__(self, m: pa.MapArray) -> None:
        self.rows = len(m)
        lists = pa.ListArray.from_arrays(m.offsets, m.keys)
        self.keys = pc.list_flatten(lists)
        self.values = pc.list_flatten(pa.ListArray.from_arrays(m.offsets, m.items))
        self.parents = pc.list_parent_indices(lists).to_numpy()

    def get(self, key: str) -> pa.Array:
        """The value of ``key`` in each row (its first occurrence), null where absent."""
        hits = np.flatnonzero(pc.equal(self.keys, key).to_numpy(zero_copy_only=False))
        where = np.full(self.rows, -1, np.int64)
        where[self.parents[hits][::-1]] = hits[::-1]
        return pc.take(self.values, pa.array(where, mask=where < 0))


def _timestamps(m: _Fields, reasons: Reasons) -> tuple[pa.Array, pa.Array]:
    point = m.get("t")
    raw = {key: m.get(key) for key in ("t0", "t1")}
    both = pc.and_(pc.is_valid(point), pc.or_(pc.is_valid(raw["t0"]), pc.is_valid(raw["t1"])))
    reasons.fail(both, "t", "give either t or t0 and t1, not both")
    times = {}
    for key in ("t0", "t1"):
        text = pc.coalesce(raw[key], point)
        reasons.fail(pc.is_null(text), key, "missing")
        good = pc.match_substring_regex(pc.fill_null(text, ""), INTEGER)
        reasons.fail(
            pc.invert(good),
            key,
            pc.binary_join_element_wise("expected an integer timestamp, got ", _quoted(text), ""),
        )
        digits = pc.replace_substring_regex(pc.if_else(good, text, "0"), r"\.0*$", "")
        times[key] = pc.cast(digits, pa.int64())
    after = pc.fill_null(pc.greater(times["t0"], times["t1"]), False)
    reasons.fail(
        pc.and_(after, reasons.ok),
        "t0",
        pc.binary_join_element_wise(
            "t0 = ",
            pc.cast(times["t0"], pa.string()),
            " is after t1 = ",
            pc.cast(times["t1"], pa.string()),
            "",
        ),
    )
    return times["t0"], times["t1"]


def _attribute(text: pa.Array, typ: AttrType, name: str, reasons: Reasons) -> pa.Array:
    """``text`` (one attribute of one stream's rows) typed, with failures in ``reasons``."""
    reasons.fail(pc.is_null(text), name, "missing")
    if typ is AttrType.STRING:
        return text
    filled = pc.fill_null(text, "")
    if typ is AttrType.BOOL:
        good = pc.is_in(filled, pa.array(["true", "false"]))
    else:
        good = pc.match_substring_regex(filled, INTEGER if typ is AttrType.INT else NUMBER)
    expected = {AttrType.BOOL: "a bool", AttrType.INT: "an int", AttrType.FLOAT: "a float"}[typ]
    reasons.fail(
        pc.invert(good),
        name,
        pc.binary_join_element_wise(f"expected {expected}, got ", _quoted(text), ""),
    )
    safe = pc.if_else(good, text, {AttrType.BOOL: "false"}.get(typ, "0"))
    if typ is AttrType.BOOL:
        return pc.equal(safe, "true")
    if typ is AttrType.INT:
        return pc.cast(pc.replace_substring_regex(safe, r"\.0*$", ""), pa.int64())
    value = pc.cast(safe, pa.float64())
    reasons.fail(pc.invert(pc.is_finite(value)), name, "not finite")
    return value


def _extras(m: _Fields, allowed: set[str], reasons: Reasons) -> None:
    """Reject rows with a key that is neither reserved nor an attribute of their stream."""
    if not len(m.keys):
        return
    bad = pc.invert(pc.is_in(m.keys, pa.array(sorted(allowed), pa.string())))
    hits = np.flatnonzero(bad.to_numpy(zero_copy_only=False))
    if not len(hits):
        return
    first = np.full(m.rows, -1, np.int64)
    first[m.parents[hits][::-1]] = hits[::-1]
    names = pc.take(m.keys, pa.array(first, mask=first < 0))
    for name in pc.unique(pc.drop_null(names)).to_pylist():
        reasons.fail(pc.equal(names, name), name, NOT_AN_ATTRIBUTE)


def _ingest_times(
    text: pa.Array, schema: StreamSchema, ingest: Ingest, reasons: Reasons
) -> pa.Array:
    """The ``--time-column`` cells as ticks of ``schema``'s unit, read as ``cesar run`` reads
    them (:meth:`Ingest.ticks`): once per distinct cell, the reasons of those it refuses in
    ``reasons``."""
    field = ingest.time_column
    assert field is not None
    reasons.fail(pc.is_null(text), field, "missing (the --time-column)")
    distinct = pc.unique(pc.drop_null(text))
    ticks: list[int | None] = []
    errors: list[str | None] = []
    for cell in distinct.to_pylist():
        try:
            ticks.append(ingest.ticks(cell, schema))
            errors.append(None)
        except EventError as exc:
            ticks.append(None)
            errors.append(exc.reason)
    at = pc.index_in(text, distinct)
    reason = pc.take(pa.array(errors, pa.string()), at)
    reasons.fail(pc.is_valid(reason), field, reason)
    return pc.take(pa.array(ticks, pa.int64()), at)


def validate(
    batch: pa.RecordBatch, schemas: Mapping[str, StreamSchema], ingest: Ingest | None = None
) -> pa.Table:
    """Rows of ``m``/``raw``/``arrival`` as typed events plus ``field``/``reason`` of rejections.

    The output has the columns ``stream``, ``t0``, ``t1``, ``<stream>/<attribute>``,
    ``arrival``, ``field``, ``reason`` and ``raw``; a rejected row has a reason and
    null values.  ``ingest`` reads rows not written for cesar as ``cesar run`` does: the
    stream of rows naming none, the time column, the columns kept (the others ignored).
    """
    parts = []
    m = batch.column("m")
    stream = _Fields(m).get("stream")
    not_object = pc.is_null(m)
    default = ingest.stream if ingest is not None and ingest.stream is not None else None
    if default is None and len(schemas) == 1:
        default = next(iter(schemas))
    if default is not None:
        only = pa.scalar(default)
        stream = pc.if_else(not_object, pa.scalar(None, pa.string()), pc.coalesce(stream, only))
    known = pc.is_in(stream, pa.array(sorted(schemas), pa.string()))
    outside = pc.and_(pc.invert(not_object), pc.invert(pc.fill_null(known, False)))
    for name, schema in schemas.items():
        mask = pc.fill_null(pc.equal(stream, name), False)
        rows = batch.filter(mask)
        if not rows.num_rows:
            continue
        reasons = Reasons(rows.num_rows)
        sub = _Fields(rows.column("m"))
        allowed = set(RESERVED) | set(schema.names)
        kept = None if ingest is None else ingest.columns
        if ingest is not None and ingest.time_column is not None:
            t0 = t1 = _ingest_times(sub.get(ingest.time_column), schema, ingest, reasons)
            allowed.add(ingest.time_column)
        else:
            t0, t1 = _timestamps(sub, reasons)
        if kept is not None:  # the file's other columns are ignored
            allowed |= set(pc.unique(sub.keys).to_pylist()) - set(kept)
        columns: dict[str, pa.Array] = {}
        for attribute, typ in schema.attributes:
            text = sub.get(attribute)
            if kept is not None and attribute not in kept:
                text = pa.nulls(rows.num_rows, pa.string())
            columns[column(name, attribute)] = _attribute(text, typ, attribute, reasons)
        _extras(sub, allowed, reasons)
        ok = reasons.ok
        table = {
            "stream": pa.repeat(pa.scalar(name), rows.num_rows),
            "t0": pc.if_else(ok, t0, None),
            "t1": pc.if_else(ok, t1, None),
        }
        table.update({key: pc.if_else(ok, value, None) for key, value in columns.items()})
        table["arrival"] = rows.column("arrival")
        table["field"] = reasons.field
        table["reason"] = reasons.reason
        table["raw"] = rows.column("raw")
        parts.append(pa.table(table))
    bad = batch.filter(pc.or_(not_object, outside))
    if bad.num_rows:
        bad_stream = pc.filter(stream, pc.or_(not_object, outside))
        unknown = pc.binary_join_element_wise(
            "unknown stream ", _quoted(bad_stream), f" (declared: {', '.join(sorted(schemas))})", ""
        )
        missing = "missing (several streams are declared)"
        reason = pc.if_else(
            pc.filter(not_object, pc.or_(not_object, outside)),
            "not a JSON object",
            pc.if_else(pc.is_null(bad_stream), missing, unknown),
        )
        field = pc.if_else(pc.filter(not_object, pc.or_(not_object, outside)), "", "stream")
        parts.append(
            pa.table(
                {
                    "arrival": bad.column("arrival"),
                    "field": field,
                    "reason": reason,
                    "raw": bad.column("raw"),
                }
            )
        )
    return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})


# --------------------------------------------------------------------- routing


@dataclass
class Router:
    """A :class:`Plan` compiled for Arrow: its schemas and its routes."""

    plan: Plan
    schemas: dict[str, StreamSchema]
    routes: ArrowRoutes

    @staticmethod
    def of(plan: Plan) -> Router:
        """Compile every global interest of ``plan``."""
        return Router(plan, plan.schemas(), ArrowRoutes.of(plan.table()))


def route(valid: pa.Table, router: Router) -> tuple[dict[int, pa.Table], int]:
    """Valid events by destination shard, and how many events no shard needs.

    An event two shards need is in both tables.
    """
    out: dict[int, list[pa.Table]] = {}
    unrouted = 0
    for stream in router.schemas:
        rows = valid.filter(pc.equal(valid.column("stream"), stream))
        if not rows.num_rows:
            continue
        sent = pa.repeat(pa.scalar(False), rows.num_rows)
        for shard, mask in enumerate(router.routes.shard_masks(rows, stream)):
            chosen = rows.filter(mask)
            if chosen.num_rows:
                out.setdefault(shard, []).append(chosen)
            sent = pc.or_(sent, mask)
        unrouted += rows.num_rows - pc.sum(sent.cast(pa.int64())).as_py()
    tables = {
        shard: pa.concat_tables(parts, promote_options="default") for shard, parts in out.items()
    }
    return tables, unrouted
