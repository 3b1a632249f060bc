"""Batches in the front as rows kept in Arrow from the request to the shard.

Every batch reaches the front's admission as an Arrow table
(:mod:`cesar.server.front.columns`): a client's events, or a piece the feed
routed to one shard (:mod:`cesar.server.wire.arrowevents`).  The front logs
its accepted rows as one Arrow table, and works out for each (shard, lane) the
positions of the rows it takes: :func:`destinations` for a routed piece,
:func:`front_destinations` for the front's own routing.  :func:`blocks` cuts
each destination's positions into :class:`Rows` — the rows of one stream and
one ``t1`` in a run of the table, never their values — and those pass the
epoch gate, one item each (a request of 1,000 quotes at 100 a tick is ten
items a shard and lane, not a thousand).  When the gate releases them,
:func:`lane_table` takes each lane's rows out of their tables in the gate's
order, and the shard receives them as Arrow (``LaneEvents.arrow``).  So an
event is never encoded as a protobuf message in the front, and only the
events a global subscription's static interest is probed for are read into
Python values.

>>> import pyarrow as pa
>>> table = pa.table({"stream": ["S", "S", "S"], "t0": [1, 1, 2], "t1": [1, 1, 2],
...                   "S/k": ["a", "b", "c"]})
>>> items = blocks(table, {(0, "global"): np.arange(3)})
>>> [(rows.t1, rows.positions.tolist(), pairs) for rows, pairs in items]
[(1, [0, 1], [(0, 'global')]), (2, [2], [(0, 'global')])]
>>> items[1][0].events()
[Event(stream='S', t0=2, t1=2, values=(('k', 'c'),))]
>>> lane_table([items[1][0], items[0][0]]).column("S/k").to_pylist()
['c', 'a', 'b']
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cesar.automata.schema import Event
from cesar.server.front.registry import Registry
from cesar.server.wire.arrowevents import column, events_of
from cesar.server.wire.arrowroute import key_shards
from cesar.server.wire.routing import GLOBAL, RoutingTable, StreamRoute, key_lane

WIRE_COLUMNS = ("stream", "t0", "t1")
"""The columns every lane table starts with; attribute columns follow."""

BLOCK_BYTES = 1 << 20
"""About the most bytes of rows one block holds: an epoch bigger than that passes the gate in
several blocks, so a shard's requests can still be cut inside it
(:func:`~cesar.server.front.epochs.apply_requests`)."""

Destination = tuple[int, str]
"""A (shard, lane) pair."""

Routes = dict[Destination, np.ndarray]
"""Per (shard, lane), the positions (ascending) of the table's rows it takes."""


class Rows(NamedTuple):
    """Rows of one accepted table, one stream and one ``t1``, bound for one (shard, lane):
    what the epoch gate holds, and where the rows are."""

    stream: str
    t1: int
    table: pa.Table
    positions: np.ndarray

    def events(self) -> list[Event]:
        """The rows as events (for a checkpoint, or a lane that also holds other events)."""
        return events_of(self.table.take(pa.array(self.positions, pa.int64())))


def events_in(item: Event | Rows) -> list[Event]:
    """An event as a list of one, or the rows of a block as events."""
    return [item] if isinstance(item, Event) else item.events()


def blocks(table: pa.Table, routes: Routes) -> list[tuple[Rows, list[Destination]]]:
    """Each destination's rows of ``table`` (in (t1, arrival) order) cut into blocks of one
    stream and one ``t1`` (a run of the table's rows; of about :data:`BLOCK_BYTES` at most),
    each with its destinations (those taking the same rows share blocks), in the order of their
    first rows: the gate's arrivals for the table.  The rows no destination takes come in
    blocks with none (their times still move the gate's horizon and name the streams a
    watermark closes).

    O(rows) in numpy, O(blocks) in Python.
    """
    if not table.num_rows:
        return []
    t1s = table.column("t1").to_numpy()
    encoded = pc.dictionary_encode(table.column("stream")).combine_chunks()
    codes = encoded.indices.to_numpy()
    names = encoded.dictionary.to_pylist()
    change = np.ones(len(t1s), bool)
    change[1:] = (t1s[1:] != t1s[:-1]) | (codes[1:] != codes[:-1])
    run = np.cumsum(change)
    covered = np.zeros(len(t1s), bool)
    for positions in routes.values():
        covered[positions] = True
    most = max(1, BLOCK_BYTES * table.num_rows // max(1, int(table.nbytes)))
    found: list[tuple[int, list[Destination], Rows]] = []
    for pairs, positions in [*_alike(routes), ([], np.flatnonzero(~covered))]:
        if not len(positions):
            continue
        runs = run[positions]
        cuts = np.flatnonzero(runs[1:] != runs[:-1]) + 1
        if len(positions) > most:  # an epoch this big goes in blocks of about BLOCK_BYTES
            starts = np.concatenate(([0], cuts))
            place = np.arange(len(positions)) - np.repeat(starts, np.diff([*starts, len(runs)]))
            cuts = np.union1d(cuts, np.flatnonzero((place % most == 0) & (place > 0)))
        for part in np.split(positions, cuts) if len(cuts) else (positions,):
            first = int(part[0])
            rows = Rows(names[codes[first]], int(t1s[first]), table, part)
            found.append((first, pairs, rows))
    found.sort(key=itemgetter(0))
    return [(rows, pairs) for _, pairs, rows in found]


def _alike(routes: Routes) -> list[tuple[list[Destination], np.ndarray]]:
    """The routes with the destinations that take the same rows together (a shard's
    key-partitioned lane and its global lane, where every row goes to both), so that their
    blocks are one :class:`Rows` each, encoded once for the shard.  O(destinations × rows).
    """
    alike: dict[bytes, tuple[list[Destination], np.ndarray]] = {}
    for destination, positions in routes.items():
        key = positions.tobytes()
        same = alike.get(key)
        if same is None:
            alike[key] = ([destination], positions)
        else:
            same[0].append(destination)
    return list(alike.values())


def destinations(table: pa.Table, routing: RoutingTable, shard: int) -> Routes:
    """For ``table`` (routed to ``shard``), the positions of the rows each (shard, lane) takes.

    A key lane takes the rows whose key is the shard's (``crc32`` of the key
    bytes, as :meth:`~cesar.server.wire.routing.RoutingTable.key_destinations`);
    the global lane, when the shard runs global subscriptions reading the
    stream, takes every row: the feed sent the shard only rows that its keys or
    its subscriptions' static interest admit, and a row that no static conjunct
    admits changes no output (:func:`cesar.automata.partition.static_interest`),
    so the front neither compiles nor evaluates the interest again.  One Arrow
    pass per stream and key, no Python per row.
    """
    out: dict[Destination, list[np.ndarray]] = {}
    for name, route, where, rows in _routed_streams(table, routing):
        for key in route.keys:
            owners = key_shards(rows.column(column(name, key)), routing.shards)
            hit = np.asarray(pc.equal(owners, shard).to_numpy(zero_copy_only=False), bool)
            out.setdefault((shard, key_lane(key)), []).append(where[hit])
        if shard in route.global_shards:
            out.setdefault((shard, GLOBAL), []).append(where)
    return _joined(out)


def front_destinations(table: pa.Table, registry: Registry) -> Routes:
    """For ``table`` (in the normal form), the positions of the rows each (shard, lane) takes
    when the front routes them, as :meth:`~cesar.server.front.registry.Registry.destinations`
    does one event.

    A key lane takes each row on the shard of its key (:func:`key_shards`: one Arrow pass
    per stream and key); a global lane the rows of the streams its global subscriptions
    read that their static interest admits: by the interest compiled for Arrow
    (:meth:`~cesar.server.front.registry.Registry.interest_masks`: every row the interest
    admits, and maybe a few more, harmless), or, where there is none (too many
    subscriptions or filters), by probing each row's values
    (:meth:`~cesar.server.front.registry.Registry.interested`).
    """
    routing = registry.routing
    out: dict[Destination, list[np.ndarray]] = {}
    for name, route, where, rows in _routed_streams(table, routing):
        for key in route.keys:
            owners = key_shards(rows.column(column(name, key)), routing.shards).to_numpy()
            lane = key_lane(key)
            for owner in np.unique(owners).tolist():
                out.setdefault((owner, lane), []).append(where[owners == owner])
        compiled = registry.interest_masks(name) if route.global_shards else None
        if compiled is not None:
            for k, mask in compiled.items():
                hit = np.asarray(mask(rows).to_numpy(zero_copy_only=False), bool)
                out.setdefault((k, GLOBAL), []).append(where[hit])
        elif route.global_shards:
            prefix = f"{name}/"
            attributes = [c for c in rows.column_names if c.startswith(prefix)]
            values = rows.select(attributes).rename_columns([c[len(prefix) :] for c in attributes])
            taken: dict[int, list[int]] = {}
            for i, row in zip(where.tolist(), values.to_pylist(), strict=True):
                for k in registry.interested(name, row):
                    taken.setdefault(k, []).append(i)
            for k, positions in taken.items():
                out.setdefault((k, GLOBAL), []).append(np.array(positions, np.int64))
    return _joined(out)


def _joined(parts: dict[Destination, list[np.ndarray]]) -> Routes:
    """Each destination's positions as one ascending array (its streams' rows merged)."""
    routes: Routes = {}
    for destination, found in parts.items():
        positions = found[0] if len(found) == 1 else np.sort(np.concatenate(found))
        if len(positions):
            routes[destination] = positions
    return routes


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
        where = pc.indices_nonzero(mine).to_numpy().astype(np.int64)
        yield name, route, where, table.filter(mine)


def lane_table(items: Sequence[Rows]) -> pa.Table:
    """The blocks' rows (of one or more tables) as one table, in the order given.

    Columns: ``stream``, ``t0``, ``t1``, then every attribute column of the
    streams present; O(rows) in Arrow and numpy, O(blocks) in Python.
    """
    starts: dict[int, int] = {}  # by the id of a table (its blocks hold it): its first row
    parts: list[pa.Table] = []
    offsets: list[np.ndarray] = []
    total = 0
    for rows in items:
        start = starts.get(id(rows.table))
        if start is None:
            start = starts[id(rows.table)] = total
            parts.append(_wire(rows.table))
            total += rows.table.num_rows
        offsets.append(rows.positions + start)
    whole = parts[0] if len(parts) == 1 else pa.concat_tables(parts, promote_options="default")
    return whole.take(pa.array(np.concatenate(offsets), pa.int64()))


def _wire(table: pa.Table) -> pa.Table:
    """``table`` with the columns a shard reads: times, stream and attributes."""
    keep = [*WIRE_COLUMNS, *(name for name in table.column_names if "/" in name)]
    return table.select(keep)
