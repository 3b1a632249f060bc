"""Internal streams many subscriptions read, made once for all of them (Section 3.5, shared).

A pattern whose runs must see several streams at one node reads an internal *union* of
them (:func:`cesar.automata.pattern.construct.union_name`), an automaton marked ``shared``
and named by its content: every pattern reading the same streams compiles the same union
under the same name.  An engine that merges keeps one.  The first subscription that needs it
puts it on the DAG as a subscription of its own, whose id is the stream's name (no client's
id starts with ``#``); later ones only count among its readers; it leaves with the last.
Its events are made once per input event, however many patterns read them, and the
patterns' automata, all reading that one stream, merge on the DAG by template as patterns
over input streams do (docs/patterns.md, "What composite patterns share").

Its work (one step per event of its streams, like the FR probe's) is charged to no
subscription: the engine's count of steps has it, no client's budget does.  An engine that
does not merge (``EngineOptions(merge=False)``, the one-automaton-per-query baseline) gives
each subscription its own copy instead (:func:`private`).

>>> commons = Commons()
>>> from cesar.automata.automaton import Automaton, Node
>>> from cesar.automata.schema import StreamSchema
>>> union = Automaton(StreamSchema("#u", ()), (Node(0, ()), Node(1, ())), (), 1, True, True)
>>> own = Automaton(StreamSchema("P", ()), (Node(0, ()),), (), 0)
>>> [[a.name for a in part] for part in commons.split("s1", [union, own])]
[['P'], ['#u']]
>>> [[a.name for a in part] for part in commons.split("s2", [union, own])]
[['P'], []]
>>> commons.release("s1"), commons.release("s2")
([], ['#u'])
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from cesar.automata.automaton import Automaton, distinct


class Commons:
    """The shared internal streams on one engine's DAG and the subscriptions reading each."""

    def __init__(self) -> None:
        self.readers: dict[str, set[str]] = {}
        """Per shared stream on the DAG, the subscriptions whose automata read it."""
        self.uses: dict[str, list[str]] = {}
        """Per subscription, the shared streams it reads (the inverse of ``readers``)."""

    def __contains__(self, subscription: str) -> bool:
        """True if ``subscription`` is the id of a shared stream's producer.  O(1)."""
        return subscription in self.readers

    def split(
        self, subscription: str, automata: Sequence[Automaton]
    ) -> tuple[list[Automaton], list[Automaton]]:
        """``subscription``'s own automata, and the shared ones no subscription had yet (to
        put on the DAG, each as its own producer, before the own ones).  O(automata)."""
        own, new = [], []
        for automaton in automata:
            if not automaton.shared:
                own.append(automaton)
                continue
            readers = self.readers.setdefault(automaton.name, set())
            if not readers:
                new.append(automaton)
            if subscription not in readers:
                readers.add(subscription)
                self.uses.setdefault(subscription, []).append(automaton.name)
        return own, new

    def release(self, subscription: str) -> list[str]:
        """Forget ``subscription``'s reading; the shared streams no one reads any more (to
        take off the DAG).  O(streams it read)."""
        gone = []
        for stream in self.uses.pop(subscription, ()):
            readers = self.readers[stream]
            readers.discard(subscription)
            if not readers:
                del self.readers[stream]
                gone.append(stream)
        return gone

    def check_valid(self, live: Iterable[str]) -> None:
        """Assert: ``uses`` inverts ``readers``, every stream has a reader, and the readers
        and producers are the ``live`` subscriptions of the DAG."""
        live = set(live)
        pairs = {(s, r) for s, readers in self.readers.items() for r in readers}
        assert pairs == {(s, r) for r, streams in self.uses.items() for s in streams}
        assert all(self.readers.values())
        assert set(self.readers) <= live and set(self.uses) <= live


def private(subscription: str, automata: Sequence[Automaton]) -> tuple[Automaton, ...]:
    """``automata`` with each shared stream renamed for ``subscription`` alone, where it
    reads or publishes it (an engine that does not merge runs a copy per subscription).

    >>> from cesar.automata.automaton import Automaton, Node
    >>> from cesar.automata.schema import StreamSchema
    >>> union = Automaton(StreamSchema("#u", ()), (Node(0, ()),), (), 0, True, True)
    >>> [(a.name, a.shared) for a in private("s1", [union, union])]
    [('#u@s1', False)]
    """
    names = {a.name: f"{a.name}@{subscription}" for a in automata if a.shared}
    if not names:
        return tuple(automata)
    out = []
    for automaton in distinct(automata):
        edges = tuple(
            replace(edge, stream=names[edge.stream]) if edge.stream in names else edge
            for edge in automaton.edges
        )
        output = automaton.output
        if automaton.shared:
            output = replace(output, name=names[automaton.name])
        out.append(replace(automaton, output=output, edges=edges, shared=False))
    return tuple(out)
