"""The engine's after-match policies: each subscription's held matches, judged by its clock.

A pattern with ``AFTER MATCH SKIP`` compiles to an automaton whose matches carry
hidden attributes (:mod:`cesar.automata.skipping`).  The engine takes them out of
what an epoch publishes, holds them in the subscription's
:class:`~cesar.automata.skipping.Skipper`, and publishes those the policy keeps
once the subscription's clock group has passed their start by the window, or when a
finite input ends (:meth:`Skipping.finish`).

No query may read such a subscription's stream: its matches are published late,
out of the order of the stream's time, so :meth:`Skipping.check` refuses a reader
(and a policy on a stream someone reads).  An engine without a policy pays one
truth test per epoch; with one, a look-up per match (by its first stream).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cesar.automata.automaton import Automaton
from cesar.automata.schema import Event
from cesar.automata.skipping import Skipper
from cesar.server.engine.clocks import StreamGroups
from cesar.server.engine.matches import Match, Output


class Skipping:
    """The skippers of an engine's subscriptions, by the stream each publishes."""

    def __init__(self) -> None:
        self.skippers: dict[str, Skipper] = {}
        """Per stream published under a policy, its held matches."""
        self.streams: dict[str, list[str]] = {}
        """Per subscription with a policy, the streams it publishes under one."""
        self.reads: dict[str, str] = {}
        """Per such stream, one stream its automaton reads (its clock group's)."""

    def __bool__(self) -> bool:
        return bool(self.skippers)

    def check(self, automata: Sequence[Automaton], is_read: Callable[[str], bool]) -> None:
        """Raise ValueError if ``automata`` read a stream published under a policy, or publish
        one under a policy that some query reads (``is_read``).  O(streams the automata read)."""
        for automaton in automata:
            taken = sorted(automaton.reads.intersection(self.skippers))
            if taken:
                raise ValueError(
                    f"stream {taken[0]} is published under AFTER MATCH SKIP, late and out of "
                    "time order, so no query may read it"
                )
            if automaton.skip is not None and is_read(automaton.name):
                raise ValueError(
                    f"stream {automaton.name} is read by a query, so it cannot be published "
                    f"under {automaton.skip} (its matches come late and out of time order)"
                )

    def add(self, subscription: str, automata: Sequence[Automaton]) -> None:
        """Give each stream ``subscription`` publishes under a policy its skipper (one for
        all the automata publishing it: a pattern's alternatives are judged together)."""
        for automaton in automata:
            if automaton.skip is not None and automaton.name not in self.skippers:
                self.skippers[automaton.name] = Skipper(automaton.skip)
                self.streams.setdefault(subscription, []).append(automaton.name)
                self.reads[automaton.name] = min(automaton.reads)

    def remove(self, subscription: str) -> None:
        """Forget ``subscription``'s skippers and the matches they held.  O(its streams)."""
        for stream in self.streams.pop(subscription, ()):
            del self.skippers[stream], self.reads[stream]

    def judge(
        self,
        published: Output,
        moved: set[str],
        clocks: Mapping[str, float],
        groups: StreamGroups,
    ) -> Output:
        """``published`` without the matches of streams under a policy, which are held, and
        with the held matches the policies publish now that the clock groups ``moved`` have
        reached ``clocks``."""
        skippers = self.skippers
        out: Output = []
        for item in published:
            if isinstance(item, Match):
                # The hidden attributes are a policy's alone: a match reaching one such
                # subscription reaches only such, so its first stream tells.
                if item.first_stream() not in skippers:
                    out.append(item)
                    continue
                for stream in item.streams():
                    skippers[stream].add_values(stream, item.t0, item.t1, item.values)
            elif item.stream in skippers:
                skippers[item.stream].add(item)
            else:
                out.append(item)
        for stream, skipper in skippers.items():
            group = groups.find(self.reads[stream])
            if group in moved:
                out.extend(skipper.release(int(clocks[group])))
        return out

    def finish(self) -> list[Event]:
        """The input ended: every held match each policy keeps (no run can complete any more,
        as when Flink's final watermark passes).  O(held × log held)."""
        return [event for skipper in self.skippers.values() for event in skipper.release(math.inf)]

    def to_data(self) -> dict[str, Any]:
        """Each skipper's state as plain data, by stream (:meth:`restore` reads it back)."""
        return {stream: skipper.to_data() for stream, skipper in self.skippers.items()}

    def restore(self, data: Mapping[str, Any]) -> None:
        """Take back the states :meth:`to_data` saved, for the streams still under a policy."""
        for stream, saved in data.items():
            skipper = self.skippers.get(stream)
            if skipper is not None:
                skipper.restore(saved, stream)

    def check_valid(self, live: Iterable[str]) -> None:
        """Assert each skipper's invariants, and that each belongs to a ``live`` subscription."""
        listed = [stream for streams in self.streams.values() for stream in streams]
        assert sorted(listed) == sorted(self.skippers) == sorted(self.reads)
        assert set(self.streams) <= set(live)
        for skipper in self.skippers.values():
            skipper.check_valid()
