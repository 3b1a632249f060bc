"""Batches in the front as rows kept in Arrow from the request to the shard.

Every batch reaches the front's admission as an Arrow table
(:mod:`cesar.server.front.columns`): a client's events, or a piece the feed
routed to one shard (:mod:`cesar.server.wire.arrowevents`).  The front logs
its accepted rows as one Arrow table, and passes the epoch gate a :class:`Row`
per accepted row — its stream, ``t1`` and place in the table, never its
values — with the (shard, lane) pairs it goes to: :func:`destinations` for a
routed piece, :func:`front_destinations` for the front's own routing.  When
the gate releases rows, :func:`lane_table` takes each lane's rows out of their
tables in the gate's order, and the shard receives them as Arrow
(``LaneEvents.arrow``).  So an event is never encoded as a protobuf message
in the front, and only the events a global subscription's static interest is
probed for are read into Python values.

>>> import pyarrow as pa
>>> table = pa.table({"stream": ["S", "S"], "t0": [1, 2], "t1": [1, 2], "S/k": ["a", "b"]})
>>> rows = rows_of(table)
>>> rows[1].stream, rows[1].t1, rows[1].event()
('S', 2, Event(stream='S', t0=2, t1=2, values=(('k', 'b'),)))
>>> lane_table([rows[1], rows[0]]).column("S/k").to_pylist()
['b', 'a']
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cesar.automata.schema import Event, Value
from cesar.server.wire.arrowevents import column, events_of
from cesar.server.wire.arrowroute import key_shards
from cesar.server.wire.routing import GLOBAL, RoutingTable, StreamRoute, key_lane

WIRE_COLUMNS = ("stream", "t0", "t1")
"""The columns every lane table starts with; attribute columns follow."""


class Row(NamedTuple):
    """One accepted row of a routed piece: what the epoch gate reads, and where the row is."""

    stream: str
    t1: int
    table: pa.Table
    position: int

    def event(self) -> Event:
        """The row as an event (for a checkpoint, or a lane that also holds other events)."""
        return events_of(self.table.slice(self.position, 1))[0]


def event_of(item: Event | Row) -> Event:
    """An event, or a row of a routed piece as one."""
    return item if isinstance(item, Event) else item.event()


def rows_of(table: pa.Table) -> list[Row]:
    """A :class:`Row` for each row of ``table`` (in the normal form of ``check``), in order.

    O(rows): two columns read into Python, no attribute value.
    """
    streams = table.column("stream").to_pylist()
    t1s = table.column("t1").to_pylist()
    return [Row(s, t1, table, i) for i, (s, t1) in enumerate(zip(streams, t1s, strict=True))]


def destinations(table: pa.Table, routing: RoutingTable, shard: int) -> list[list[tuple[int, str]]]:
    """For each row of ``table`` (routed to ``shard``), the (shard, lane) pairs it goes to.

    A key lane takes the rows whose key is the shard's (``crc32`` of the key
    bytes, as :meth:`~cesar.server.wire.routing.RoutingTable.key_destinations`);
    the global lane, when the shard runs global subscriptions reading the
    stream, takes every row: the feed sent the shard only rows that its keys or
    its subscriptions' static interest admit, and a row that no static conjunct
    admits changes no output (:func:`cesar.automata.partition.static_interest`),
    so the front neither compiles nor evaluates the interest again.  One Arrow
    pass per stream and key; Python appends one pair per row and lane.
    """
    out: list[list[tuple[int, str]]] = [[] for _ in range(table.num_rows)]
    for name, route, where, rows in _routed_streams(table, routing):
        for key in route.keys:
            owners = key_shards(rows.column(column(name, key)), routing.shards)
            hit = np.asarray(pc.equal(owners, shard).to_numpy(zero_copy_only=False), bool)
            pair = (shard, key_lane(key))
            for i in where[hit].tolist():
                out[i].append(pair)
        if shard in route.global_shards:
            pair = (shard, GLOBAL)
            for i in where.tolist():
                out[i].append(pair)
    return out


def front_destinations(
    table: pa.Table,
    routing: RoutingTable,
    interested: Callable[[str, dict[str, Value]], list[int]],
) -> list[list[tuple[int, str]]]:
    """For each row of ``table`` (in the normal form), the (shard, lane) pairs the front
    routes it to, as :meth:`~cesar.server.front.registry.Registry.destinations` does one event.

    A key lane takes each row on the shard of its key (:func:`key_shards`: one Arrow pass
    per stream and key); a global lane on each shard ``interested`` names (the static
    interest of its global subscriptions, probed with the row's values, read into Python
    for the streams global subscriptions read only).
    """
    out: list[list[tuple[int, str]]] = [[] for _ in range(table.num_rows)]
    for name, route, where, rows in _routed_streams(table, routing):
        positions = where.tolist()
        for key in route.keys:
            owners = key_shards(rows.column(column(name, key)), routing.shards).to_pylist()
            lane = key_lane(key)
            for i, owner in zip(positions, owners, strict=True):
                out[i].append((owner, lane))
        if route.global_shards:
            prefix = f"{name}/"
            attributes = [c for c in rows.column_names if c.startswith(prefix)]
            values = rows.select(attributes).rename_columns([c[len(prefix) :] for c in attributes])
            for i, row in zip(positions, values.to_pylist(), strict=True):
                out[i].extend((k, GLOBAL) for k in interested(name, row))
    return out


def _routed_streams(
    table: pa.Table, routing: RoutingTable
) -> Iterator[tuple[str, StreamRoute, np.ndarray, pa.Table]]:
    """Per stream of ``table`` that the routing table routes: its name, its route, the
    positions of its rows in ``table`` and those rows.  One Arrow pass per stream."""
    stream = table.column("stream")
    for name in pc.unique(stream).to_pylist():
        route = routing.streams.get(name)
        if route is None:
            continue
        mine = pc.equal(stream, name)
        yield name, route, pc.indices_nonzero(mine).to_numpy(), table.filter(mine)


def lane_table(rows: Sequence[Row]) -> pa.Table:
    """The rows (of one or more tables) as one table, in the order given.

    Columns: ``stream``, ``t0``, ``t1``, then every attribute column of the
    streams present; O(rows) in Arrow, O(tables) in Python.
    """
    starts: dict[int, int] = {}  # by the id of a table (its rows hold it): its first row
    parts: list[pa.Table] = []
    total = 0
    for row in rows:
        if id(row.table) not in starts:
            starts[id(row.table)] = total
            parts.append(_wire(row.table))
            total += row.table.num_rows
    whole = parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")
    offsets = [starts[id(row.table)] + row.position for row in rows]
    return whole.take(pa.array(offsets, pa.int64()))


def _wire(table: pa.Table) -> pa.Table:
    """``table`` with the columns a shard reads: times, stream and attributes."""
    keep = [*WIRE_COLUMNS, *(name for name in table.column_names if "/" in name)]
    return table.select(keep)
