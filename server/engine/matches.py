"""A match made for many subscriptions at once: one interval and values, and who gets them.

Where subscriptions share an automaton (a family of one template, Section 4.2's merging),
one instance reaching a final state is one match for every slot it still holds: a
thousand subscriptions may get the same event.  The engine's output names them with the
slots' bitmask and their space's slot → stream map, and makes one
:class:`~cesar.automata.schema.Event` per subscription only when asked
(:meth:`Match.events`: the wire, a reading query, :meth:`Engine.process`).

A match that names its slots reads the space's map when asked: resolve it before the
engine's subscriptions change (the engine's own consumers do, in the same epoch).

>>> match = Match({0: "A", 3: "B"}, 0b1001, 1, 2, (("Price", 9.5),))
>>> len(match), match.streams(), match.first_stream()
(2, ['A', 'B'], 'A')
>>> [event.stream for event in match.events()]
['A', 'B']
>>> Match.of(["C"], 1, 2, ()).streams()
['C']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cesar.automata.making import made_events
from cesar.automata.schema import Event, Value
from cesar.index.masks import slots_of


class Match:
    """One event's interval and values for the subscriptions of ``slots`` (or ``streams``)."""

    __slots__ = ("_names", "_streams", "slots", "t0", "t1", "values")

    def __init__(
        self,
        names: Mapping[int, str],
        slots: int,
        t0: int,
        t1: int,
        values: tuple[tuple[str, Value], ...],
    ) -> None:
        self._names = names
        self._streams: list[str] | None = None
        self.slots = slots
        self.t0 = t0
        self.t1 = t1
        self.values = values

    @classmethod
    def of(
        cls, streams: Sequence[str], t0: int, t1: int, values: tuple[tuple[str, Value], ...]
    ) -> Match:
        """A match for the subscriptions publishing ``streams``, named outright."""
        match = cls({}, 0, t0, t1, values)
        match._streams = list(streams)
        return match

    def __len__(self) -> int:
        """The subscriptions that get it (alerts it stands for).  O(1)."""
        return len(self._streams) if self._streams is not None else self.slots.bit_count()

    def first_stream(self) -> str:
        """The output stream of the subscription of its lowest slot.  O(1)."""
        if self._streams is not None:
            return self._streams[0]
        return self._names[(self.slots & -self.slots).bit_length() - 1]

    def streams(self) -> list[str]:
        """The output streams of the subscriptions that get it, by slot.  O(slots)."""
        if self._streams is None:
            names = self._names
            self._streams = [names[slot] for slot in slots_of(self.slots)]
        return self._streams

    def events(self) -> list[Event]:
        """One event per subscription that gets it."""
        return made_events(self.streams(), self.t0, self.t1, self.values)


Output = list[Event | Match]
"""An epoch's matches: shared ones as :class:`Match`, one subscription's as an event."""


def expand(matches: Sequence[Match | Event]) -> list[Event]:
    """The events of ``matches``, in order (an event stands for itself)."""
    out: list[Event] = []
    for match in matches:
        if isinstance(match, Match):
            out.extend(match.events())
        else:
            out.append(match)
    return out
