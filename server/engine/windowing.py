"""The engine's time-window aggregates: one running window per (stream, window), shared.

Time functions (``HOUR(t1)``) are kept alike, as windows without state.

Every subscription that reads ``AVG_OVER(Price, 30 MIN, Name)`` of ``Stock`` reads
the same :class:`~cesar.automata.windows.WindowState`: the engine keeps it while
some subscription reads it, and adds its value to each event of the stream before
any automaton sees the event (so indices and shared nodes treat it as an attribute).
A window first read after events have come counts only the events since then.

Windows read input streams: one over a stream a query publishes is refused
(:meth:`Windows.check`): the engine takes windows as an epoch's input events come in,
before any query of the epoch publishes.
``limit`` (EngineOptions ``max_window_events``) bounds the events one window holds;
beyond it the oldest are dropped and its readers get one notice.  ``share=False``
(EngineOptions ``share_windows``, the benchmark's baseline) keeps one window per
subscription instead, each computing the same values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cesar.automata.automaton import Automaton
from cesar.automata.derived import Derived, DerivedState, not_an_input, state_of
from cesar.automata.schema import Event
from cesar.automata.windows import Window

Place = tuple[str, Derived, str]
"""A running window: (stream, window, the subscription keeping it, or "" when shared)."""


class Windows:
    """The windows an engine's subscriptions read, by (stream, window), with their readers."""

    def __init__(self, limit: int | None, share: bool = True) -> None:
        self.limit = limit
        self.share = share
        self.states: dict[Place, DerivedState] = {}
        self.readers: dict[Place, set[str]] = {}
        self.by_stream: dict[str, list[DerivedState]] = {}
        self.noticed: set[Place] = set()
        """The windows over their limit whose readers have had their notice."""
        self.places: dict[str, set[Place]] = {}
        """Per subscription reading windows, the windows it reads."""

    def __bool__(self) -> bool:
        return bool(self.states)

    @staticmethod
    def check(automata: Sequence[Automaton], is_published: Callable[[str], bool]) -> None:
        """Raise ValueError for a window or time function over a stream that a query
        publishes (``is_published``), with the reason the compile side gives
        (:func:`~cesar.automata.derived.check_inputs`).  O(the automata's windows)."""
        for automaton in automata:
            for stream, derived in automaton.windows:
                if is_published(stream):
                    raise ValueError(not_an_input(derived, stream))

    def add(self, subscription: str, automata: Sequence[Automaton]) -> None:
        """Let ``subscription`` read its automata's windows (a new one starts empty)."""
        for automaton in automata:
            for stream, window in automaton.windows:
                place = (stream, window, "" if self.share else subscription)
                if place not in self.states:
                    state = self.states[place] = state_of(window, self.limit)
                    self.by_stream.setdefault(stream, []).append(state)
                self.readers.setdefault(place, set()).add(subscription)
                self.places.setdefault(subscription, set()).add(place)

    def remove(self, subscription: str) -> None:
        """Stop ``subscription`` reading; a window no one reads goes.  O(its windows)."""
        for place in self.places.pop(subscription, ()):
            readers = self.readers[place]
            readers.discard(subscription)
            if not readers:
                del self.readers[place]
                state = self.states.pop(place)
                self.by_stream[place[0]].remove(state)
                if not self.by_stream[place[0]]:
                    del self.by_stream[place[0]]
                self.noticed.discard(place)

    def enrich(self, epoch: Sequence[Event]) -> tuple[list[Event], list[tuple[str, str]]]:
        """``epoch`` with each event carrying the windows over its stream, and the notices
        (subscription, reason) owed for windows that went over their limit."""
        by_stream = self.by_stream
        if not any(event.stream in by_stream for event in epoch):
            return list(epoch), []
        grouped: dict[str, list[Event]] = {}
        for event in epoch:
            grouped.setdefault(event.stream, []).append(event)
        out: list[Event] = []
        for stream, events in grouped.items():
            for state in by_stream.get(stream, ()):
                events = state.step(events)
            out.extend(events)
        return out, self._notices()

    def _notices(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for place, state in self.states.items():
            if state.dropped and place not in self.noticed:
                self.noticed.add(place)
                tumbling = isinstance(place[1], Window) and place[1].tumbling
                held = "keys" if tumbling else "events"
                reason = (
                    f"the window {place[1].name} of {place[0]} holds more than {self.limit} "
                    f"{held} (max_window_events); the oldest are dropped, so its value "
                    "covers less than the window"
                )
                out.extend((subscription, reason) for subscription in sorted(self.readers[place]))
        return out

    def to_data(self) -> list[tuple[str, str, str, dict[str, Any]]]:
        """Each window's events as plain data: (stream, window name, keeper, state)."""
        return [(s, w.name, k, state.to_data()) for (s, w, k), state in self.states.items()]

    def restore(self, data: Iterable[tuple[str, str, str, Mapping[str, Any]]]) -> None:
        """Take back the windows :meth:`to_data` saved that subscriptions still read."""
        named = {(s, w.name, k): state for (s, w, k), state in self.states.items()}
        for stream, name, keeper, saved in data:
            state = named.get((stream, name, keeper))
            if state is not None:
                state.restore(saved)

    def check_valid(self, live: Iterable[str]) -> None:
        """Assert each window's invariants, and that its readers are ``live``."""
        assert self.states.keys() == self.readers.keys()
        assert set().union(*self.readers.values()) <= set(live)
        assert {(p, s) for s, places in self.places.items() for p in places} == {
            (p, s) for p, readers in self.readers.items() for s in readers
        }
        listed = [id(s) for states in self.by_stream.values() for s in states]
        assert sorted(listed) == sorted(id(s) for s in self.states.values())
        for state in self.states.values():
            state.check_valid()
