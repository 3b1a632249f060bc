"""Which planned subscriptions an epoch concerns, and the lazy runs' shared buffers.

The planner (:mod:`cesar.server.engine.plans`) has work for a subscription with a lazy run,
rates to measure or a negation history; here such subscriptions are *registered*, and each
epoch's events are routed to those they concern:

* one probe of the own-condition index (:class:`~cesar.server.engine.fitting.FitIndex`) per
  event gives the component signatures it fits, however many subscriptions share them;
* from each signature the event goes to the components that need every event they fit
  (:func:`needs`: all of a subscription whose rates are measured, a lazy run's first
  component, a recomputation's last) and to the lazy runs with partial matches waiting there
  for its partition key (the pool's waiting lists);
* every lazy run it concerns meets it, then it joins the signatures' shared buffers once
  (:class:`~cesar.automata.pattern.buffers.BufferPool`; lazy chain automata §4, a buffer per
  event type), so no run finds in a buffer an event it has yet to meet;
* an event of a negated stream goes to every registered subscription negating it.

So an event costs the runs it concerns, not the number of subscriptions reading its stream.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from cesar.automata.pattern.buffers import BufferPool
from cesar.automata.pattern.plans import PlanKind
from cesar.automata.schema import Event
from cesar.server.engine.fitting import FitIndex
from cesar.server.engine.planned import Planned

Reached = dict[str, dict[int, list[int]]]
"""Per subscription an epoch concerns, per event (by ``id``) the components it reaches."""


def needs(planned: Planned) -> frozenset[int]:
    """The components of ``planned`` every event they fit must reach: all of them while its
    rates are measured, else its lazy runs' first (a recomputation's last); the others are
    reached by what waits for the event."""
    if not planned.idle:
        return frozenset(range(len(planned.pattern.steps)))
    return frozenset(
        run.last if run.plan.kind is PlanKind.RECOMPUTE else run.first for run in planned.runs
    )


class Reaching:
    """What the registered subscriptions reach: :meth:`register`, :meth:`route`,
    :meth:`check_valid`."""

    def __init__(self) -> None:
        self.fitting = FitIndex()
        """The own conditions of the registered subscriptions, by component signature."""
        self.negating: dict[str, dict[str, Planned]] = {}
        """Per negated stream, the registered subscriptions a negation of it may kill or spoil."""
        self.arrived: dict[str, int] = {}
        """Per stream, the events seen so far (a subscription's rates count its streams' events
        since it last counted)."""
        self.pool = BufferPool()
        """The lazy runs' event buffers, one per signature whatever the number of runs reading
        it, and the runs waiting per signature and key."""

    def __contains__(self, subscription: str) -> bool:
        return subscription in self.fitting

    def arrivals(self, planned: Planned) -> int:
        """The events of ``planned``'s streams seen so far."""
        return sum(self.arrived.get(stream, 0) for stream in planned.pattern.reads)

    def register(self, planned: Planned, active: bool) -> None:
        """Route to ``planned`` what concerns it (``active``), or nothing; the components that
        need every event they fit follow its rates and lazy runs (:func:`needs`)."""
        name = planned.subscription
        known = name in self.fitting
        if active and known:
            wanted = needs(planned)
            if self.fitting.needs[name] != wanted:
                self.fitting.remove(name)
                self.fitting.add(name, planned.fits, wanted)
            return
        if active == known:
            return
        if active:
            self.fitting.add(name, planned.fits, needs(planned))
        else:
            self.fitting.remove(name)
        for stream in planned.fits.negated:
            negating = self.negating.setdefault(stream, {})
            if active:
                negating[name] = planned
            else:
                del negating[name]
                if not negating:
                    del self.negating[stream]

    def route(
        self, epoch: Sequence[Event], planned: Mapping[str, Planned], out: list[Event]
    ) -> tuple[Reached, dict[str, list[Event]]]:
        """Take one epoch's events to the lazy runs they concern (their matches go to ``out``)
        and into the shared buffers; per subscription concerned, the components each event
        reaches and its events in order."""
        by_stream: dict[str, list[Event]] = {}
        for event in epoch:
            by_stream.setdefault(event.stream, []).append(event)
        reached: Reached = {}
        mine: dict[str, list[Event]] = {}
        for stream, events in by_stream.items():
            self.arrived[stream] = self.arrived.get(stream, 0) + len(events)
            negating = self.negating.get(stream, {})
            if not negating and not self.fitting.reads(stream):
                continue
            for event in events:
                hits = self.fitting.probe(event)
                found: dict[str, list[int]] = {}
                for signature in hits:
                    for name, n in self.fitting.always[signature]:
                        found.setdefault(name, []).append(n)
                    for name, waiting in self.pool.waiting(signature, event).items():
                        found.setdefault(name, []).extend(waiting)
                touched: list[tuple[Planned, list[int]]] = []
                for name, places in found.items():
                    if len(places) > 1:
                        places = sorted(set(places))
                    reached.setdefault(name, {})[id(event)] = places
                    mine.setdefault(name, []).append(event)
                    touched.append((planned[name], places))
                for name, negated in negating.items():
                    if id(event) not in reached.get(name, {}):
                        reached.setdefault(name, {})[id(event)] = []
                        mine.setdefault(name, []).append(event)
                        touched.append((negated, []))
                self._take(event, touched, hits, out)
        return reached, mine

    def _take(
        self,
        event: Event,
        touched: list[tuple[Planned, list[int]]],
        hits: list[Hashable],
        out: list[Event],
    ) -> None:
        """``event`` for the lazy runs of the subscriptions it concerns (``places``: the
        components it starts or has partial matches waiting at): every run meets it, then it
        joins the buffers of the signatures it fits (``hits``), each once, and the negated
        events of the runs that negate its stream."""
        negating = []
        for one, places in touched:
            for run in one.runs:
                key = run.take(event, places, out)
                if event.stream in run.fits.negated:
                    negating.append((run, key))
        self.pool.keep(event, hits)
        for run, key in negating:
            run.keep(event, [], key)

    def check_valid(self, planned: Mapping[str, Planned], busy: Mapping[str, Planned]) -> None:
        """Assert that exactly ``busy`` are registered, with their needs, and that the pool
        holds the buffers of ``planned``'s lazy runs, no more."""
        self.fitting.check_valid()
        self.pool.check_valid()
        assert set(self.fitting.fits) == set(busy)
        for name, one in busy.items():
            assert self.fitting.fits[name] is one.fits
            assert self.fitting.needs[name] == needs(one), name
        pairs = {(s, n) for s, negating in self.negating.items() for n in negating}
        assert pairs == {(s, n) for n, p in busy.items() for s in p.fits.negated}
        readers: dict[Hashable, int] = {}
        for one in planned.values():
            for run in one.runs:
                assert run.pool is self.pool
                for signature in run.signatures:
                    readers[signature] = readers.get(signature, 0) + 1
        assert readers == {s: self.pool.readers(s) for s in self.pool.shared}
