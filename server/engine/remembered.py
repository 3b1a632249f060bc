"""The events an UNLESS edge asks about: each stream's past events that still matter (Section 4.3).

An UNLESS edge (a negation: "no event of S in between") is asked, when its
instance would fire, whether some event of an earlier epoch stopped it.  A
:class:`Remembered` keeps, per stream such an edge reads, the events of earlier
epochs in arrival order, and per (stream, attribute) the edge joins on
(``$1.Name = Name``) the same events by that attribute's value, so an edge asks
only the events of its instance's value.  The engine adds each epoch's events,
then drops those that start before the horizon its UNLESS edges can reach and
those beyond the instance limit; the snapshot saves the events, the buckets are
derived.

>>> from cesar.automata.schema import Event
>>> kept = Remembered()
>>> for t, name in ((1, "IBM"), (2, "SUN"), (3, "IBM")):
...     kept.remember(Event("S", t, t, (("Name", name),)))
>>> [e.t1 for e in kept.recalled("S", "Name", "IBM")]
[1, 3]
>>> kept.forget_before("S", 2)
>>> [e.t1 for e in kept.events("S")], [e.t1 for e in kept.recalled("S", "Name", "IBM")]
([2, 3], [3])
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

from cesar.automata.schema import Event, Value


class Remembered:
    """Per stream its remembered events in arrival order, and their recall buckets.

    Methods: :meth:`remember`, :meth:`remember_past`, :meth:`events`, :meth:`items`,
    :meth:`recalled`, :meth:`forget_before`, :meth:`forget_beyond`, :meth:`check_valid`.
    """

    def __init__(self) -> None:
        self.by_stream: dict[str, deque[Event]] = {}
        """Per stream an UNLESS edge reads: its events of earlier epochs that still matter."""
        self.recall: dict[tuple[str, str], dict[Value | None, deque[Event]]] = {}
        """Per (stream, attribute) an UNLESS edge joins on: the remembered events by that
        value, each bucket in arrival order."""

    def items(self) -> Iterator[tuple[str, deque[Event]]]:
        """Each stream with its remembered events, oldest first."""
        return iter(self.by_stream.items())

    def events(self, stream: str) -> Iterable[Event]:
        """The remembered events of ``stream``, oldest first.  O(1)."""
        return self.by_stream.get(stream, ())

    def remember(self, event: Event) -> None:
        """Keep ``event`` for the UNLESS edges that read its stream.  O(indexed attributes)."""
        self.by_stream.setdefault(event.stream, deque()).append(event)
        for (stream, attr), buckets in self.recall.items():
            if stream == event.stream:
                buckets.setdefault(event.value(attr), deque()).append(event)

    def remember_past(self, events: Iterable[Event]) -> None:
        """Add events of earlier epochs to those remembered (a plan that looked back switched
        to the DAG): each stream's remembered events stay in arrival order, an event equal to
        one kept is kept once (an UNLESS edge asks only whether one exists), and the recall
        index is rebuilt for the streams touched.  O(events remembered of those streams)."""
        by_stream: dict[str, list[Event]] = {}
        for event in events:
            by_stream.setdefault(event.stream, []).append(event)
        for stream, past in by_stream.items():
            merged = sorted({*self.by_stream.get(stream, ()), *past}, key=lambda e: e.t1)
            self.by_stream[stream] = deque(merged)
            for name, attr in self.recall:
                if name == stream:
                    self.recall[name, attr] = _buckets(merged, attr)

    def recalled(self, stream: str, attr: str, value: Value | None) -> Iterable[Event]:
        """The remembered events of ``stream`` whose ``attr`` is ``value``; the index is built
        the first time it is asked for.  O(1), O(events remembered) the first time."""
        buckets = self.recall.get((stream, attr))
        if buckets is None:
            buckets = self.recall[stream, attr] = _buckets(self.by_stream.get(stream, ()), attr)
        return buckets.get(value, ())

    def forget_before(self, stream: str, t0: float) -> None:
        """Drop the remembered events of ``stream`` from the oldest on while they start before
        ``t0`` (one that started earlier behind a later one stays until it is at the front:
        an UNLESS predicate bounds time itself).  O(events dropped × indexed attributes)."""
        kept = self.by_stream.get(stream)
        while kept and kept[0].t0 < t0:
            self._forget_oldest(stream)

    def forget_beyond(self, stream: str, limit: int) -> int:
        """Drop the oldest remembered events of ``stream`` beyond ``limit``; how many.
        O(events dropped × indexed attributes)."""
        over = max(len(self.by_stream.get(stream, ())) - limit, 0)
        for _ in range(over):
            self._forget_oldest(stream)
        return over

    def _forget_oldest(self, stream: str) -> None:
        kept = self.by_stream[stream]
        event = kept.popleft()
        for (indexed, attr), buckets in self.recall.items():
            if indexed == stream:
                value = event.value(attr)
                bucket = buckets[value]
                bucket.popleft()  # the oldest of its bucket, as it was of the stream
                if not bucket:
                    del buckets[value]
        if not kept:
            del self.by_stream[stream]

    def check_valid(self) -> None:
        """Assert that every recall bucket holds, in order, the stream's events of its value,
        and that no stream is kept empty."""
        assert all(self.by_stream.values()), "a stream kept with no events"
        for (stream, attr), buckets in self.recall.items():
            expected: dict[Value | None, list[Event]] = {}
            for event in self.by_stream.get(stream, ()):
                expected.setdefault(event.value(attr), []).append(event)
            assert {v: list(b) for v, b in buckets.items()} == expected, (stream, attr)


def _buckets(events: Iterable[Event], attr: str) -> dict[Value | None, deque[Event]]:
    """``events`` by their value of ``attr`` (None: they have none), each bucket in their
    order.  O(events × attributes)."""
    buckets: dict[Value | None, deque[Event]] = {}
    for event in events:
        buckets.setdefault(event.value(attr), deque()).append(event)
    return buckets
