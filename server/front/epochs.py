"""The epoch gate: each shard receives whole epochs, in increasing ``t1`` per clock group (§3.1).

Simultaneous events (one ``t1``) form an epoch and must reach a shard
together; a shard must never see an epoch older than one it has seen of the
same *clock group* — the streams some subscription reads together
(:class:`~cesar.server.engine.clocks.StreamGroups`).  Streams in different
groups keep independent event time: a stream far ahead of the others (a wrong
timestamp, a replayed day) makes only its own group's older events late.

The front learns events in two ways, and the :class:`EpochGate` holds each
shard's *pending* events, sorted by ``(t1, arrival)``, until their epoch is
closed:

* events the front routes itself (``shard`` None): an epoch of a group closes
  when a later ``t1`` of that group arrives (the group's *horizon*, the newest
  ``t1`` of its streams) or a watermark passes it.  Such a request's watermark is
  a time in its events' unit, so it closes the epochs of the streams counting
  time in the units of the events it brought (``[min]`` ticks say nothing of
  ``[sec]`` ones); one with no event closes every stream's;
* the feed's batches are routed to one shard each, and the pieces of a
  micro-batch may arrive in any order: their events close only when that
  shard's watermark (one for all streams) passes them.

An epoch leaves whole: when the front's own events and a routed batch's share
a ``t1`` on one shard, the epoch waits until all of it is ready.

:meth:`EpochGate.settled` tells whether an event is late (its group's epoch at
its ``t1`` is already being processed); :meth:`EpochGate.advance` adds
accepted events and returns what each shard may now apply.

>>> from cesar.automata.schema import Event
>>> from cesar.server.engine.clocks import StreamGroups
>>> gate = EpochGate(shards=2, groups=StreamGroups(), unit_of={"S": "min", "T": "sec"}.get)
>>> a, b = Event.of("S", 1, 1, {}), Event.of("S", 2, 2, {})
>>> [len(r) for r in gate.advance([(a, [(0, "global")])], None, None)]
[0, 0]
>>> [[p.event.t1 for p in r] for r in gate.advance([(b, [(1, "global")])], None, None)]
[[1], []]
>>> gate.settled(1, "S", None), gate.settled(2, "S", None)  # S's horizon is 2
(2, None)
>>> gate.settled(1, "T", None) is None  # T shares no clock with S
True
>>> c = Event.of("S", 5, 5, {})
>>> [len(r) for r in gate.advance([(c, [(0, "global")])], 5, None)]  # a watermark in [min]
[1, 1]
>>> gate.settled(4, "S", None), gate.settled(4, "T", None)  # T counts in [sec]: still open
(5, None)
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from cesar.automata.schema import Event
from cesar.server.engine.clocks import StreamGroups
from cesar.server.front.pieces import Rows, events_in, lane_table
from cesar.server.wire.arrowevents import encode as encode_arrow
from cesar.server.wire.convert import to_event
from cesar.v1 import shard_pb2


class Pending(NamedTuple):
    """An event (or a block of rows of one ``t1``) waiting for its epoch to close on one
    shard, ordered by (t1, arrival); ``owner`` is the client that published it ("": not
    known, a batch logged before owners were)."""

    t1: int
    tick: int
    routed: bool
    lane: str
    event: Event | Rows
    owner: str = ""

    def size(self) -> int:
        """The events it stands for: 1, or the rows of its block."""
        return 1 if isinstance(self.event, Event) else len(self.event.positions)


Arrival = tuple[Event | Rows, Sequence[tuple[int, str]]]
"""An accepted event, or a block of a batch's rows, and the (shard, lane) pairs it goes to."""


class EpochGate:
    """Per shard, the pending events and how far epochs are closed; see the module docstring.

    Methods: :meth:`settled`, :meth:`advance`, :meth:`pending_events`, :meth:`held_by`,
    :meth:`to_data` and :meth:`restore` (checkpoints), :meth:`check_valid`.
    ``groups`` is the front's (it only reads them).
    What is kept per clock group is keyed by the group's representative and
    moved when groups merged: ``pending[k]`` (shard ``k``'s waiting events),
    ``group_applied[k]`` and ``horizon``.  ``applied[k]`` is per stream;
    ``closed[k]`` is how far watermarks for every stream closed shard ``k``'s epochs,
    ``unit_closed`` how far the front's own requests' watermarks closed those of the
    streams in each time unit (``unit_of`` names a stream's unit).  ``held`` counts each
    client's (event, shard) pairs waiting, for its budget (``max_open_epoch_events``).
    Cost: :meth:`settled` O(shards); an advance O(log p) per destination to
    insert (p pending events of its group), O(released + groups) to release.
    """

    def __init__(
        self, shards: int, groups: StreamGroups, unit_of: Callable[[str], str | None]
    ) -> None:
        self.shards = shards
        self.groups = groups
        self.unit_of = unit_of
        self.pending: list[dict[str, list[Pending]]] = [{} for _ in range(shards)]
        self.ticks = 0
        self.applied: list[dict[str, int]] = [{} for _ in range(shards)]
        self.group_applied: list[dict[str, int]] = [{} for _ in range(shards)]
        self.horizon: dict[str, int] = {}
        self.closed: list[int | None] = [None] * shards
        self.unit_closed: dict[str, int] = {}
        self.held: dict[str, int] = {}
        self._merges = groups.merges

    def pending_events(self) -> int:
        """The number of (event, shard) pairs waiting."""
        return sum(self.waiting(shard) for shard in range(len(self.pending)))

    def waiting(self, shard: int) -> int:
        """The number of events waiting for ``shard`` in open epochs.  O(items waiting)."""
        return sum(p.size() for group in self.pending[shard].values() for p in group)

    def held_by(self, owner: str) -> int:
        """The (event, shard) pairs of ``owner``'s batches waiting in open epochs.  O(1)."""
        return self.held.get(owner, 0)

    def settled(self, t1: int, stream: str, shard: int | None) -> int | None:
        """None if an event of ``stream`` at ``t1`` may still join its epoch; else how far.

        For the front's own routing (``shard`` None) every shard counts: a later
        epoch of the stream's group is open (the horizon is past ``t1``), a
        watermark closed ``t1``'s, or the group applied ``t1`` somewhere.  A
        routed batch's event is late on its shard only once a watermark closed
        its epoch or a later epoch of its group was applied there.  The per-event
        definition of lateness: admission asks :meth:`front_bounds` and
        :meth:`routed_bound`, its bounds for every ``t1`` at once, tested against it.
        """
        group = self._group(stream)
        mark: int | None = None
        for k in range(self.shards) if shard is None else (shard,):
            m = self._settled_on(k, group, stream)
            if m is not None and t1 <= m and (mark is None or m > mark):
                mark = m
        if shard is None:
            horizon = self.horizon.get(group)
            if horizon is not None and t1 < horizon and (mark is None or horizon > mark):
                mark = horizon
        return mark

    def front_bounds(self, stream: str) -> tuple[int | None, int | None]:
        """For the front's own routing, (settled, horizon): an event of ``stream`` is late
        when its ``t1`` is at or before ``settled`` (the latest settled on any shard) or
        before ``horizon`` (its group's newest ``t1``) (:meth:`settled` for every ``t1`` at
        once).  O(shards)."""
        group = self._group(stream)
        marks = [self._settled_on(k, group, stream) for k in range(self.shards)]
        found = [m for m in marks if m is not None]
        return (max(found) if found else None), self.horizon.get(group)

    def routed_bound(self, stream: str, shard: int) -> int | None:
        """The latest ``t1`` settled for ``stream`` on ``shard``: a routed batch's events at
        or before it are late (:meth:`settled` for every ``t1`` at once)."""
        return self._settled_on(shard, self._group(stream), stream)

    def _settled_on(self, shard: int, group: str, stream: str) -> int | None:
        marks = [
            m
            for m in (self._closed_on(shard, stream), self.group_applied[shard].get(group))
            if m is not None
        ]
        return max(marks) if marks else None

    def _closed_on(self, shard: int, stream: str) -> int | None:
        """How far watermarks closed ``stream``'s epochs on ``shard``: those for every stream
        and those for its unit, whichever reach later."""
        if not self.unit_closed:  # the common case: no front-routed watermark yet
            return self.closed[shard]
        unit = self.unit_of(stream)
        marks = [self.closed[shard], None if unit is None else self.unit_closed.get(unit)]
        found = [m for m in marks if m is not None]
        return max(found) if found else None

    def advance(
        self,
        arrivals: Sequence[Arrival],
        watermark: int | None,
        shard: int | None,
        owner: str = "",
    ) -> list[list[Pending]]:
        """Add ``arrivals`` (accepted, in (t1, arrival) order) of ``owner``'s; per shard, the
        events now ready.

        ``shard`` is the shard a routed batch is for (None: the front routed
        it).  Ready events leave in order within each clock group, whole epochs
        only.  What waits is counted in ``owner``'s :meth:`held_by` until it leaves.
        """
        routed = shard is not None
        shards = range(self.shards) if shard is None else [shard]
        self._sync()
        groups: dict[str, str] = {}  # by stream, for this call
        newest: dict[str, int] = {}  # by group: the newest t1 of the front's own events
        tick = self.ticks
        added = 0
        for event, destinations in arrivals:
            tick += 1
            stream, t1 = event.stream, event.t1
            group = groups.get(stream)
            if group is None:
                group = groups[stream] = self.groups.find(stream)
            for k, lane in destinations:
                waiting = self.pending[k].setdefault(group, [])
                item = Pending(t1, tick, routed, lane, event, owner)
                if not waiting or waiting[-1].t1 <= t1:  # the usual case: in time order
                    waiting.append(item)
                else:
                    bisect.insort(waiting, item)
            if destinations:
                added += len(destinations) * item.size()
            if not routed and newest.get(group, t1) <= t1:
                newest[group] = t1
        self.ticks = tick
        if added:
            self.held[owner] = self.held.get(owner, 0) + added
        for group, t1 in newest.items():
            self.horizon[group] = max(self.horizon.get(group, t1), t1)
        if watermark and (routed or not arrivals):
            for k in shards:
                self.closed[k] = max(self.closed[k] or watermark, watermark)
        elif watermark:
            for unit in {self.unit_of(e.stream) for e, _ in arrivals} - {None}:
                assert unit is not None
                self.unit_closed[unit] = max(self.unit_closed.get(unit, watermark), watermark)
        released: list[list[Pending]] = [[] for _ in range(self.shards)]
        held = self.held
        for k in shards:
            pending, applied, group_applied = (
                self.pending[k],
                self.applied[k],
                self.group_applied[k],
            )
            groups_released = 0
            for group, waiting in list(pending.items()):
                ready = self._ready(waiting, k, self.horizon.get(group))
                if not ready:
                    continue
                groups_released += 1
                released[k].extend(waiting[:ready])
                for item in waiting[:ready]:
                    event = item.event
                    applied[event.stream] = item.t1
                    # Pending.size, inline: once per event or block released
                    held[item.owner] -= 1 if isinstance(event, Event) else len(event.positions)
                latest = waiting[ready - 1].t1
                group_applied[group] = max(group_applied.get(group, latest), latest)
                if ready == len(waiting):
                    del pending[group]
                else:
                    del waiting[:ready]
            if groups_released > 1:
                released[k].sort()
        for gone in [name for name, count in held.items() if not count]:
            del held[gone]
        return released

    def _group(self, stream: str) -> str:
        """``stream``'s clock group, after moving what groups that merged kept."""
        self._sync()
        return self.groups.find(stream)

    def _sync(self) -> None:
        """After groups merged: key everything kept per group by the current representatives.

        Merged groups' pending lists become one sorted list, so their events
        leave in the merged group's order from the next release on.
        """
        if self.groups.merges == self._merges:
            return
        self._merges = self.groups.merges
        find = self.groups.find
        for table in (self.horizon, *self.group_applied):
            for old in [g for g in table if find(g) != g]:
                latest = table.pop(old)
                table[find(old)] = max(table.get(find(old), latest), latest)
        for pending in self.pending:
            for old in [g for g in pending if find(g) != g]:
                into = pending.setdefault(find(old), [])
                into.extend(pending.pop(old))
                into.sort()

    def _ready(self, waiting: list[Pending], shard: int, horizon: int | None) -> int:
        """How many of one group's pending events (sorted) on ``shard`` may leave: whole
        epochs, in order."""
        split = 0
        closes: dict[str, int | None] = {}  # by stream, for this call
        for item in waiting:
            stream = item.event.stream
            if stream in closes:
                closed = closes[stream]
            else:
                closed = closes[stream] = self._closed_on(shard, stream)
            if (closed is not None and item.t1 <= closed) or (
                not item.routed and horizon is not None and item.t1 < horizon
            ):
                split += 1
            else:
                break
        if split < len(waiting):  # never part of an epoch: the rest may still wait
            while split and waiting[split - 1].t1 == waiting[split].t1:
                split -= 1
        return split

    def to_data(self) -> dict[str, Any]:
        """The gate as plain data (for a checkpoint); :meth:`restore` reads it back.

        A block of rows is saved as its events, one entry each with the block's tick.
        """
        return {
            "pending": [
                {
                    group: [
                        (p.t1, p.tick, p.routed, p.lane, (e.stream, e.t0, e.t1, e.values), p.owner)
                        for p in waiting
                        for e in events_in(p.event)
                    ]
                    for group, waiting in pending.items()
                }
                for pending in self.pending
            ],
            "ticks": self.ticks,
            "applied": self.applied,
            "group_applied": self.group_applied,
            "horizon": self.horizon,
            "closed": self.closed,
            "unit_closed": self.unit_closed,
        }

    def restore(self, data: dict[str, Any]) -> None:
        """Take the state :meth:`to_data` saved (of a gate with as many shards).

        The events of a saved block shared its tick: every pending event gets a tick of its
        own again, numbered in the saved order ((tick, place in its block), the same on every
        shard), and new arrivals count on from the last.  Groups may have merged since: what
        is kept per group is re-keyed at the next call.  A checkpoint from before owners were
        saved gives its events the owner "" (nobody's budget).
        """
        keyed = [
            {group: list(_keyed(waiting)) for group, waiting in pending.items()}
            for pending in data["pending"]
        ]
        order = sorted({e[1] for pending in keyed for waiting in pending.values() for e in waiting})
        number = {key: n for n, key in enumerate(order, start=1)}
        self.pending = [
            {
                group: [
                    Pending(t1, number[key], routed, lane, Event(*event), owner)
                    for t1, key, routed, lane, event, owner in waiting
                ]
                for group, waiting in pending.items()
            }
            for pending in keyed
        ]
        self.ticks = len(order)
        self.held = self._count_held()
        self.applied = data["applied"]
        self.group_applied = data["group_applied"]
        self.horizon = data["horizon"]
        self.closed = data["closed"]
        self.unit_closed = data.get("unit_closed", {})  # a checkpoint from before it was kept
        self._merges = -1

    def check_valid(self) -> None:
        """Assert: pending events sorted per group, each after its stream's applied and its
        shard's watermark for every stream (one unit's watermark may pass an event whose
        epoch still waits for its events of another unit: they leave together)."""
        for k, groups in enumerate(self.pending):
            pending = [item for waiting in groups.values() for item in waiting]
            for group, waiting in groups.items():
                assert waiting == sorted(waiting) and waiting, f"shard {k}: {group} out of order"
                assert all(self.groups.same(i.event.stream, group) for i in waiting)
            assert len({p.tick for p in pending}) == len(pending)
            closed = self.closed[k]  # a unit's own mark may pass an event whose epoch waits
            for item in pending:  # for its part in another unit (a group mixing units)
                applied = self.applied[k].get(item.event.stream)
                assert applied is None or item.t1 > applied, f"shard {k}: {item.t1} was settled"
                assert closed is None or item.t1 > closed, f"shard {k}: {item.t1} is closed"
                assert item.tick <= self.ticks
        counted = self._count_held()
        assert self.held == counted, f"held {self.held}, waiting {counted}"

    def _count_held(self) -> dict[str, int]:
        """Each owner's (event, shard) pairs waiting, counted afresh (what ``held`` keeps up
        to date).  O(items waiting)."""
        counted: dict[str, int] = {}
        for groups in self.pending:
            for waiting in groups.values():
                for item in waiting:
                    counted[item.owner] = counted.get(item.owner, 0) + item.size()
        return counted


def _keyed(
    waiting: list[tuple[Any, ...]],
) -> Iterator[tuple[int, tuple[int, int], bool, str, Any, str]]:
    """Saved entries of one group with (tick, place among the entries of that tick) in the
    place of their tick: the events of a saved block follow each other under one tick.  An
    entry saved before owners were has none: ""."""
    previous, place = None, 0
    for t1, tick, routed, lane, event, *owner in waiting:
        place = place + 1 if tick == previous else 0
        previous = tick
        yield t1, (tick, place), routed, lane, event, owner[0] if owner else ""


APPLY_BYTES = 32 << 20
"""About the most event bytes one Apply request to a shard carries: released epochs are cut
into requests of about this size, between epochs where it can and inside an epoch bigger than
that (its parts marked ``continued``), so no request comes near a transport limit."""


def apply_requests(
    ready: Sequence[Pending], limit: int = APPLY_BYTES
) -> list[shard_pb2.ApplyRequest]:
    """One shard's released items (in (t1, arrival) order) as Apply requests, in order.

    Each lane's items go as one Arrow table when all are rows of routed pieces,
    else as events; a lane's items are cut into parts of about ``limit`` bytes,
    between epochs where one fits and inside an epoch that does not (the part
    before such a cut is ``continued``: the shard holds the epoch's events until
    its last part), and the parts fill requests of that size, a lane's later
    parts each in a request after its earlier ones.
    """
    lanes: dict[str, list[Pending]] = {}
    for item in ready:
        lanes.setdefault(item.lane, []).append(item)
    requests = [shard_pb2.ApplyRequest()]
    size = 0
    tables: dict[tuple[int, ...], bytes] = {}
    for lane, items in lanes.items():
        whole = _lane_message(lane, items, tables)
        parts = [whole]
        if whole.ByteSize() > limit:  # rare: only then is each item's size estimated
            cut = _parts(items, limit)
            parts = [_lane_message(lane, part, tables) for part in cut]
            for message, part, after in zip(parts, cut, cut[1:], strict=False):
                message.continued = part[-1].t1 == after[0].t1
        for number, message in enumerate(parts):
            bytes_ = message.ByteSize()
            if number or (size and size + bytes_ > limit):
                requests.append(shard_pb2.ApplyRequest())
                size = 0
            requests[-1].lanes.append(message)
            size += bytes_
    return [request for request in requests if request.lanes]


def _lane_message(
    lane: str, items: list[Pending], tables: dict[tuple[int, ...], bytes]
) -> shard_pb2.LaneEvents:
    """A lane's items as one Arrow table when all are rows of routed pieces, else as events.

    ``tables`` holds the Arrow tables encoded for the request so far, by the blocks of rows
    they hold: a lane whose rows are the same blocks as an earlier lane's (a key-partitioned
    lane and a global one on one shard) is sent the same bytes without encoding them again,
    and the shard decodes them once.
    """
    message = shard_pb2.LaneEvents(lane=lane)
    rows = [item.event for item in items if isinstance(item.event, Rows)]
    if len(rows) == len(items):
        blocks = tuple(map(id, rows))  # the blocks live as long as ``items`` does
        data = tables.get(blocks)
        if data is None:
            data = tables[blocks] = encode_arrow(lane_table(rows))
        message.arrow = data
    else:
        message.events.extend(to_event(e) for item in items for e in events_in(item.event))
    return message


def _parts(items: list[Pending], limit: int) -> list[list[Pending]]:
    """``items`` cut into parts of about ``limit`` bytes (estimated): between epochs once a
    part holds ``limit``, inside an epoch once it holds twice that."""
    parts: list[list[Pending]] = [[]]
    size = 0
    for item in items:
        bytes_ = _estimate(item.event)
        if parts[-1] and (
            (size > limit and item.t1 != parts[-1][-1].t1) or size + bytes_ > 2 * limit
        ):
            parts.append([])
            size = 0
        parts[-1].append(item)
        size += bytes_
    return parts


def _estimate(item: Event | Rows) -> int:
    """About the bytes an event or a block of rows takes on the wire."""
    if isinstance(item, Rows):
        return int(item.table.nbytes) * len(item.positions) // max(1, int(item.table.num_rows))
    size = 24
    for name, value in item.values:
        size += len(name) + (len(value) if isinstance(value, str) else 9)
    return size
