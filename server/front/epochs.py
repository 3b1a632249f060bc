"""The epoch gate: each shard receives whole epochs, in increasing ``t1`` (Section 3.1).

Simultaneous events (one ``t1``) form an epoch and must reach a shard
together; a shard must never see an epoch older than one it has seen.  The
front learns events in two ways, and the :class:`EpochGate` holds each
shard's *pending* events, sorted by ``(t1, arrival)``, until their epoch is
closed:

* events the front routes itself (``shard`` None) form one ordered stream for
  every shard: an epoch closes when a later ``t1`` arrives (the *horizon*) or a
  watermark passes it;
* the feed's batches are routed to one shard each, and the pieces of a
  micro-batch may arrive in any order: their events close only when that
  shard's watermark passes them.

An epoch leaves whole: when the front's own events and a routed batch's share
a ``t1`` on one shard, the epoch waits until all of it is ready.

:meth:`EpochGate.settled` tells whether an event at ``t1`` is late (its epoch
is already being processed); :meth:`EpochGate.advance` adds accepted events
and returns what each shard may now apply.

>>> from cesar.automata.schema import Event
>>> gate = EpochGate(shards=2)
>>> a, b = Event.of("S", 1, 1, {}), Event.of("S", 2, 2, {})
>>> [len(r) for r in gate.advance([(a, [(0, "global")])], None, None)]
[0, 0]
>>> [[p.event.t1 for p in r] for r in gate.advance([(b, [(1, "global")])], None, None)]
[[1], []]
>>> gate.settled(1, None), gate.settled(2, None)  # t1 = 1 is late: the horizon is 2
(2, None)
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

from cesar.automata.schema import Event


class Pending(NamedTuple):
    """An event waiting for its epoch to close on one shard, ordered by (t1, arrival)."""

    t1: int
    tick: int
    routed: bool
    lane: str
    event: Event


Arrival = tuple[Event, Sequence[tuple[int, str]]]
"""An accepted event and the (shard, lane) pairs it goes to."""


class EpochGate:
    """Per shard, the pending events and how far epochs are closed; see the module docstring.

    Methods: :meth:`settled`, :meth:`advance`, :meth:`pending_events`,
    :meth:`check_valid`.  Cost of an advance: O(log p) per destination to
    insert (p pending events), O(released) to release.
    """

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self.pending: list[list[Pending]] = [[] for _ in range(shards)]
        self.ticks = 0
        self.applied: list[int | None] = [None] * shards
        self.horizon: list[int | None] = [None] * shards
        self.closed: list[int | None] = [None] * shards

    def pending_events(self) -> int:
        """The number of (event, shard) pairs waiting."""
        return sum(len(p) for p in self.pending)

    def settled(self, t1: int, shard: int | None) -> int | None:
        """None if an event at ``t1`` may still join its epoch; else how far epochs are settled.

        For the front's own routing (``shard`` None) every shard counts: a later
        epoch is open (the horizon is past ``t1``) or a watermark closed
        ``t1``'s.  A routed batch's event is late on its shard only once a
        watermark closed its epoch or a later epoch was applied there.
        """
        if shard is not None:
            marks = [m for m in (self.closed[shard], self.applied[shard]) if m is not None]
            return max(marks) if marks and t1 <= max(marks) else None
        shards = range(self.shards)
        marks = [c for k in shards if (c := self.closed[k]) is not None and t1 <= c]
        marks += [h for k in shards if (h := self.horizon[k]) is not None and t1 < h]
        return max(marks, default=None)

    def advance(
        self, arrivals: Sequence[Arrival], watermark: int | None, shard: int | None
    ) -> list[list[Pending]]:
        """Add ``arrivals`` (accepted, in (t1, arrival) order); per shard, the events now ready.

        ``shard`` is the shard a routed batch is for (None: the front routed
        it).  Ready events leave in order, whole epochs only.
        """
        routed = shard is not None
        shards = range(self.shards) if shard is None else [shard]
        for event, destinations in arrivals:
            self.ticks += 1
            for k, lane in destinations:
                bisect.insort(self.pending[k], Pending(event.t1, self.ticks, routed, lane, event))
        if arrivals and not routed:
            last = arrivals[-1][0].t1
            for k in shards:
                self.horizon[k] = max(self.horizon[k] or last, last)
        if watermark:
            for k in shards:
                self.closed[k] = max(self.closed[k] or watermark, watermark)
        released: list[list[Pending]] = [[] for _ in range(self.shards)]
        for k in shards:
            horizon, closed = self.horizon[k], self.closed[k]
            split = 0
            for item in self.pending[k]:
                if (closed is not None and item.t1 <= closed) or (
                    not item.routed and horizon is not None and item.t1 < horizon
                ):
                    split += 1
                else:
                    break
            pending = self.pending[k]
            if split < len(pending):  # never part of an epoch: the rest may still wait
                while split and pending[split - 1].t1 == pending[split].t1:
                    split -= 1
            if split:
                released[k] = self.pending[k][:split]
                self.applied[k] = released[k][-1].t1
                del self.pending[k][:split]
        return released

    def check_valid(self) -> None:
        """Assert: pending events sorted, each after what its shard has applied or closed."""
        for k, pending in enumerate(self.pending):
            assert pending == sorted(pending), f"shard {k}: pending events out of order"
            assert len({p.tick for p in pending}) == len(pending)
            applied, closed = self.applied[k], self.closed[k]
            for item in pending:
                assert applied is None or item.t1 > applied, f"shard {k}: {item.t1} was settled"
                assert closed is None or item.t1 > closed, f"shard {k}: {item.t1} is closed"
                assert item.tick <= self.ticks
