"""Tumbling time-window aggregates: ``AVG_TUMBLING(Price, 5 MIN, Name)`` and its kin.

Flink's TUMBLE, Siddhi's ``#window.timeBatch`` and Esper's ``win:time_batch`` cut time into
buckets of ``w``: ``[n·w, (n+1)·w)`` ticks from tick 0, read on the clock of the stream's
zone and shifted by the window's offset (:meth:`~cesar.automata.windows.Window.bucket_of`;
``COUNT_TUMBLING(1 DAY, 570 MIN, Name)`` counts from 9:30).  For an event ``e``,
``AVG_TUMBLING(Price, w, Name)`` is the average ``Price`` of the events of ``e``'s stream
with ``e``'s ``Name`` in ``e``'s bucket up to ``e`` (``t1`` from the bucket's start to
``e.t1``, ``e``'s own epoch and ``e`` included): the bucket so far, which is the bucket's
value at its last event.  ``SUM_``, ``MIN_``, ``MAX_`` and ``COUNT_TUMBLING(w, keys…)`` read
the same bucket.  Like a sliding window (:mod:`cesar.automata.windows`) it is a derived
attribute of the event, named as its call; its literal value is
:func:`~cesar.automata.windows.literal`.

:class:`TumblingState` is the engine's: per key one running aggregate of the current bucket,
O(1) per event, every key cleared when a bucket ends; a bucket the zone's clock goes back
into (the repeated hour when summer time ends) starts again, as
:func:`~cesar.automata.windows.literal` defines it.  ``limit`` bounds the keys held; beyond
it the least recently updated goes (its next event starts it again) and ``dropped`` counts.

>>> from cesar.automata.windows import Window
>>> w = Window("COUNT_TUMBLING", None, 3, ("k",))
>>> state = TumblingState(w)
>>> [state.step([Event.of("S", t, t, {"k": "a"})])[0].value(w.name) for t in (1, 2, 3, 4, 6)]
[1, 2, 1, 2, 1]
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from cesar.automata.schema import Event, Value
from cesar.automata.windows import Key, Window, summed


@dataclass
class _Running:
    """One key's aggregate of the current bucket: count, exact total, floats or ints, and the
    least or greatest value."""

    count: int = 0
    total: int | Fraction = 0
    floats: bool = False
    extreme: Any = None


@dataclass
class TumblingState:
    """A tumbling window over one stream, kept as events come (module docstring)."""

    window: Window
    limit: int | None = None
    bucket: int | None = None
    """The current bucket's number (:meth:`Window.bucket_of`)."""
    partitions: OrderedDict[Key, _Running] = field(default_factory=OrderedDict)
    added: int = 0
    dropped: int = 0

    def step(self, epoch: Sequence[Event]) -> list[Event]:
        """Add ``epoch`` (one ``t1``, after the last) and return its events with the bucket's
        value so far for each.  O(events)."""
        window = self.window
        bucket = window.bucket_of(epoch[0].t1)
        if bucket != self.bucket:
            self.partitions.clear()
            self.bucket = bucket
        for event in epoch:
            self._add(window.key_of(event), 1 if window.attr is None else event.value(window.attr))
        out = [e.with_values([(window.name, self.value(window.key_of(e)))]) for e in epoch]
        while self.limit is not None and len(self.partitions) > self.limit:
            self.partitions.popitem(last=False)
            self.dropped += 1
        return out

    def value(self, key: Key) -> Value:
        """The bucket's value so far for partition ``key``.  O(1)."""
        part = self.partitions[key]
        aggregate = self.window.aggregate
        if aggregate == "COUNT":
            return part.count
        if aggregate in ("MIN", "MAX"):
            value: Value = part.extreme
            return value
        return summed(aggregate, part.total, part.count, part.floats)

    def _add(self, key: Key, value: Any) -> None:
        part = self.partitions.get(key)
        if part is None:
            part = self.partitions[key] = _Running(floats=isinstance(value, float))
        self.partitions.move_to_end(key)
        self.added += 1
        part.count += 1
        aggregate = self.window.aggregate
        if aggregate in ("AVG", "SUM"):
            part.total += Fraction(value) if isinstance(value, float) else value
        elif aggregate in ("MIN", "MAX"):
            low = aggregate == "MIN"
            if part.extreme is None or (value < part.extreme if low else value > part.extreme):
                part.extreme = value

    def to_data(self) -> dict[str, Any]:
        """The current bucket's aggregates, least recently updated first, as plain data."""
        held = []
        for key, part in self.partitions.items():
            total = Fraction(part.total)
            exact = [total.numerator, total.denominator]
            held.append([list(key), part.count, exact, part.floats, part.extreme])
        return {"bucket": self.bucket, "held": held, "dropped": self.dropped}

    def restore(self, data: Mapping[str, Any]) -> None:
        """Hold again the aggregates :meth:`to_data` saved."""
        self.partitions.clear()
        self.bucket = data["bucket"]
        for key, count, (numerator, denominator), floats, extreme in data["held"]:
            total = Fraction(numerator, denominator)
            exact: int | Fraction = total if floats else int(total)
            self.partitions[tuple(key)] = _Running(count, exact, floats, extreme)
        self.dropped = data["dropped"]

    def check_valid(self) -> None:
        """Assert the invariants: every key held has counted an event of the current bucket,
        and a key's minimum or maximum is set."""
        assert not self.partitions or self.bucket is not None
        for part in self.partitions.values():
            assert part.count >= 1
            if self.window.aggregate in ("MIN", "MAX"):
                assert part.extreme is not None
