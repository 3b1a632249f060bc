"""The single-automaton runtime: Algorithm 1 of Section 3.2, one epoch per call.

Runtime state is kept apart from the compiled :class:`~cesar.automata.automaton.Automaton`
(as Flink CEP keeps ``NFAState`` apart from ``NFA``): an :class:`Instance` is
a node, a binding and an interval ``[t0, t1]``, and :class:`AutomatonState`
holds the live instances per node.  :func:`process_epoch` consumes one
*epoch* — every event whose ``t1`` is the same — and returns the new state and
the output events, without mutating its inputs:

* the start node is always active with the empty instance ε;
* an event affects an instance only if it starts strictly after the instance ends;
* each FORWARD or REBIND edge fires once per affecting event that satisfies
  it (one static part, then the dynamic part of some DNF conjunct, then the
  guards and the attribute map without a fault), spawning its own instance;
* an instance stays only through a FILTER edge, and only if no affecting
  event of the epoch satisfies the filter's predicate but not the node's STAY
  edge's, if it has one (∀);
* all changes take effect together at the end of the epoch; instances that
  reach the final node are output and not kept;
* except at a node that joins (a pattern's AND): there an instance sees the
  events after the one that made it in the epoch's order (the streams' names,
  then each stream's), whatever their intervals, and spans the smallest ``t0``
  and the largest ``t1`` of its events;
* then an instance at a node with a TIMEOUT edge whose deadline (its start
  plus the edge's DUR bound, less one) the epoch has reached is output through
  it and dropped;
* an ∃-edge guarded by UNLESS edges fires only if no remembered event (of an
  earlier epoch, kept in the state for the UNLESS edge's horizon) satisfies
  one of them.

:class:`Runner` processes several automata epoch by epoch, producers before
consumers, feeding each automaton's output (internal resubscription streams
and PUBLISHed streams alike) to the automata that read it *in the same epoch*.

>>> from cesar.automata.compiler import compile_query
>>> from cesar.automata.schema import parse_stream_spec, Event
>>> q = compile_query("S NEXT{} S", {"S": parse_stream_spec("S(x:int)")}, "q")
>>> runner = Runner(q.automata)
>>> runner.process([Event.of("S", 1, 1, {"x": 1})])
[]
>>> [(e.t0, e.t1, e.attrs()) for e in runner.process([Event.of("S", 2, 2, {"x": 5})])]
[(1, 2, {'x': 5, 'x_1': 1})]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.automaton import Automaton, Edge, EdgeKind, distinct, dur_bound, own_bound
from cesar.automata.derived import state_of
from cesar.automata.evaluate import Env, Faults, eval_term, holds, store
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.schema import Event, Value, epoch_t1, run_epochs
from cesar.automata.skipping import Skipper
from cesar.automata.terms import Scope

_EMPTY: Mapping[str, Value] = {}


@dataclass(frozen=True, slots=True)
class Instance:
    """A partial match: its node, its binding (attribute values) and its interval."""

    node: int
    binding: Mapping[str, Value]
    t0: int
    t1: int


@dataclass(frozen=True)
class AutomatonState:
    """The live instances of one automaton, per node (the start node's ε is implicit), and
    the events its UNLESS edges remember, per stream."""

    instances: Mapping[int, tuple[Instance, ...]] = field(default_factory=dict)
    remembered: Mapping[str, tuple[Event, ...]] = field(default_factory=dict)

    def count(self) -> int:
        """The number of live instances."""
        return sum(len(group) for group in self.instances.values())

    def at(self, node: int) -> tuple[Instance, ...]:
        """The instances at ``node``."""
        return self.instances.get(node, ())


@dataclass
class Counters:
    """Deterministic work counters, for benchmarks beside wall time.

    ``instances_touched`` counts live instances run through their edges (ε
    included, once per epoch); ``edge_checks`` counts (edge, event) pairs whose
    predicate was evaluated; ``spawned`` and ``outputs`` count new instances
    and output events.
    """

    epochs: int = 0
    events: int = 0
    instances_touched: int = 0
    edge_checks: int = 0
    spawned: int = 0
    outputs: int = 0


@dataclass(frozen=True, slots=True)
class _Input:
    """An event of the epoch with its attribute mapping computed once and its place in the
    epoch's order."""

    event: Event
    attrs: Mapping[str, Value]
    place: int


class _Epoch:
    """One call of :func:`process_epoch`: the events, and what they spawn and kill."""

    def __init__(
        self,
        automaton: Automaton,
        events: Mapping[str, Sequence[Event]],
        faults: Faults,
        functions: FunctionRegistry,
        counters: Counters,
        remembered: Mapping[str, Sequence[Event]],
    ) -> None:
        self.automaton = automaton
        self.counters = counters
        self.remembered = remembered
        self.inputs: dict[str, list[_Input]] = {stream: [] for stream in automaton.reads}
        place = 0
        for stream in sorted(automaton.reads):
            for event in events.get(stream, ()):
                self.inputs[stream].append(_Input(event, event.attrs(), place))
                place += 1
        self.faults = faults
        self.functions = functions
        self.spawned: dict[int, list[Instance]] = {}
        self.joined: list[tuple[Instance, int]] = []
        """Instances made at joining nodes, each with the place of the event that made it."""
        self.outputs: list[Event] = []

    def env(self, binding: Mapping[str, Value], t0: int, t1: int, item: _Input) -> Env:
        """The edge's view of the instance ``[t0, t1]`` (``t0`` of the event's for ε)."""
        event = item.event
        return Env(
            {Scope.LEFT: binding, Scope.EVENT: item.attrs},
            max(event.t1, t1) - t0 + 1,
            event.t1 - event.t0 + 1,
        )

    def satisfied(self, edge: Edge, env: Env) -> bool:
        """Some conjunct holds (static part first) and every guard computes."""
        if not any(
            holds(c.static.pred(), env, self.faults, self.functions)
            and holds(c.dynamic.pred(), env, self.faults, self.functions)
            for c in edge.conjuncts
        ):
            return False
        try:
            for guard in edge.guards:
                eval_term(guard, env, self.functions)
        except ArithmeticFault:
            self.faults.arithmetic += 1
            return False
        return True

    def fire(self, edge: Edge, env: Env, t0: int, t1: int, place: int = -1) -> None:
        """Spawn the instance an ∃-edge makes, unless its attribute map faults; ``place`` is
        the firing event's in the epoch."""
        try:
            binding = {
                a.name: store(eval_term(a.term, env, self.functions), a.type) for a in edge.map
            }
        except ArithmeticFault:
            self.faults.arithmetic += 1
            return
        if edge.target == self.automaton.final:
            self.counters.outputs += 1
            self.outputs.append(Event.of(self.automaton.name, t0, t1, binding))
        else:
            self.counters.spawned += 1
            instance = Instance(edge.target, binding, t0, t1)
            if edge.target in self.automaton.joining:
                self.joined.append((instance, place))
            else:
                self.spawned.setdefault(edge.target, []).append(instance)

    def expire(self, edge: Edge, instances: list[Instance], t1: int) -> list[Instance]:
        """Output through the TIMEOUT ``edge`` the instances whose deadline is at most ``t1``;
        the others, kept."""
        bound = dur_bound(edge)
        kept = []
        for instance in instances:
            deadline = instance.t0 + bound - 1
            if deadline > t1:
                kept.append(instance)
                continue
            env = Env({Scope.LEFT: instance.binding, Scope.EVENT: _EMPTY}, int(bound))
            self.fire(edge, env, instance.t0, int(deadline))
        return kept

    def advance(
        self, node: int, binding: Mapping[str, Value], t0: int | None, t1: int, after: int = -1
    ) -> bool:
        """Run one instance (``t0 is None`` for ε) through its edges; True if it survives.

        At a joining node the instance sees the events placed after ``after``.
        """
        edges = self.automaton.outgoing[node]
        survives = any(edge.kind is EdgeKind.FILTER for edge in edges)
        stays = [edge for edge in edges if edge.kind is EdgeKind.STAY]
        joins = node in self.automaton.joining
        self.counters.instances_touched += 1
        took = False  # a REBIND took an event: an unless_taken record does not fire
        records: list[tuple[Edge, Env, int, int, int]] = []
        for edge in edges:
            if edge.kind in _NOT_FIRED:
                continue
            recorded = False  # a REBIND keeping the end records once an epoch, for any events
            for item in self.inputs[edge.stream]:
                event = item.event
                if item.place <= after if joins else event.t0 <= t1:
                    continue
                self.counters.edge_checks += 1
                start = event.t0 if t0 is None else min(t0, event.t0) if joins else t0
                env = self.env(binding, start, t1, item)
                if not self.satisfied(edge, env):
                    continue
                if edge.kind is EdgeKind.FILTER:
                    survives = survives and any(self.satisfied(stay, env) for stay in stays)
                elif edge.keeps_end:
                    if not recorded and not self.vetoed(edge, env, start, event):
                        recorded = True
                        records.append((edge, env, start, t1, item.place))
                elif not self.vetoed(edge, env, start, event):
                    took = took or edge.kind is EdgeKind.REBIND
                    self.fire(edge, env, start, max(t1, event.t1), item.place)
        for edge, env, start, end, place in records:
            if not (took and edge.unless_taken):
                self.fire(edge, env, start, end, place)
        return survives

    def vetoed(self, edge: Edge, env: Env, t0: int, event: Event) -> bool:
        """True if a remembered event satisfies an UNLESS edge guarding ``edge``."""
        guards = self.automaton.unless.get((edge.source, edge.target))
        if not guards:
            return False
        seen = {
            **env.scopes[Scope.LEFT],
            **{f"@e.{k}": v for k, v in env.scopes[Scope.EVENT].items()},
        }
        seen["@end"] = event.t1 - t0 + 1
        for guard in guards:
            for past in self.remembered.get(guard.stream, ()):
                self.counters.edge_checks += 1
                scopes = {Scope.LEFT: seen, Scope.EVENT: past.attrs()}
                if self.satisfied(guard, Env(scopes, past.t1 - t0 + 1, past.t1 - past.t0 + 1)):
                    return True
        return False


def process_epoch(
    automaton: Automaton,
    state: AutomatonState,
    events: Mapping[str, Sequence[Event]],
    faults: Faults | None = None,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
    counters: Counters | None = None,
    clock: int | None = None,
) -> tuple[AutomatonState, list[Event]]:
    """Process one epoch (``events`` per stream, all with the same ``t1``); Algorithm 1.

    ``clock`` is the epoch's time if it has no event the automaton reads (the
    TIMEOUT edges publish what is due by it), else the events' ``t1``.
    Returns the state after the epoch and the automaton's output events.
    Cost: O(instances × out-edges × events of the epoch) predicate evaluations.
    """
    epoch = _Epoch(
        automaton,
        events,
        faults if faults is not None else Faults(),
        functions,
        counters if counters is not None else Counters(),
        state.remembered,
    )
    epoch.advance(0, _EMPTY, None, _BEFORE_TIME)
    kept: dict[int, list[Instance]] = {}
    for node, group in state.instances.items():
        for instance in group:
            if epoch.advance(node, instance.binding, instance.t0, instance.t1):
                kept.setdefault(node, []).append(instance)
    while epoch.joined:  # instances made at joining nodes see the rest of the epoch
        joined, epoch.joined = epoch.joined, []
        for instance, place in joined:
            if epoch.advance(instance.node, instance.binding, instance.t0, instance.t1, place):
                kept.setdefault(instance.node, []).append(instance)
    for node, new in epoch.spawned.items():
        kept.setdefault(node, []).extend(new)
    clock = max((e.t1 for name in automaton.reads for e in events.get(name, ())), default=clock)
    if clock is not None:
        for node, alive in kept.items():
            for edge in automaton.outgoing[node]:
                if edge.kind is EdgeKind.TIMEOUT:
                    kept[node] = epoch.expire(edge, alive, clock)
    instances = {node: tuple(group) for node, group in kept.items() if group}
    return AutomatonState(instances, _remember(automaton, state.remembered, events, clock)), (
        epoch.outputs
    )


def _remember(
    automaton: Automaton,
    remembered: Mapping[str, tuple[Event, ...]],
    events: Mapping[str, Sequence[Event]],
    clock: int | None,
) -> Mapping[str, tuple[Event, ...]]:
    """The events the UNLESS edges remember after an epoch: the epoch's added, those that
    started longer ago than each stream's horizon (:func:`own_bound` less one) dropped."""
    horizons: dict[str, float] = {}
    for guards in automaton.unless.values():
        for guard in guards:
            horizons[guard.stream] = max(horizons.get(guard.stream, -1), own_bound(guard) - 1)
    if clock is None:
        return remembered
    return {
        stream: kept
        for stream, horizon in horizons.items()
        if (
            kept := tuple(
                e
                for e in (*remembered.get(stream, ()), *events.get(stream, ()))
                if e.t0 >= clock - horizon
            )
        )
    }


_NOT_FIRED = frozenset({EdgeKind.STAY, EdgeKind.TIMEOUT, EdgeKind.UNLESS})
"""Edges an event does not fire: STAY is judged with FILTER, TIMEOUT by the clock, UNLESS
with the ∃-edges it guards."""

_BEFORE_TIME = -(2**63)
"""ε ends before any event starts."""


class Runner:
    """Runs automata (producers first) epoch by epoch; the published events come back.

    Internal streams (``internal`` automata) feed later automata only; every
    other automaton's output is both returned and fed to later readers, except that of an
    automaton under an after-match policy, held until judged and then only returned.
    """

    def __init__(
        self,
        automata: Iterable[Automaton],
        faults: Faults | None = None,
        functions: FunctionRegistry = DEFAULT_FUNCTIONS,
    ) -> None:
        self.automata = tuple(distinct(automata))
        self.faults = faults if faults is not None else Faults()
        self.functions = functions
        self.states = [AutomatonState() for _ in self.automata]
        self.counters = Counters()
        self.last_t1: int | None = None
        self.skippers = {
            automaton.name: Skipper(automaton.skip)
            for automaton in self.automata
            if automaton.skip is not None
        }
        """The held matches of each stream published under an after-match policy, by every
        automaton publishing it (a pattern's alternatives: the policy is across them); no one
        reads them: they are published when judged."""
        self.windows = {pair: state_of(pair[1], None) for a in self.automata for pair in a.windows}
        """The time-window aggregates the automata read, per input stream and window."""

    def process(self, epoch: Sequence[Event]) -> list[Event]:
        """Process one epoch of input events (all with the same, increasing ``t1``).

        First, at its own time, each match a TIMEOUT edge has due before the
        epoch (its window ended earlier): its readers see it before the
        epoch's events, as they would have had an epoch come at its time.
        """
        if not epoch:
            return []
        t1 = self.last_t1 = epoch_t1(epoch, self.last_t1)
        self.counters.epochs += 1
        self.counters.events += len(epoch)
        streams: dict[str, list[Event]] = {}
        for event in epoch:
            streams.setdefault(event.stream, []).append(event)
        for (stream, _), window in self.windows.items():
            if stream in streams:
                streams[stream] = window.step(streams[stream])
        ticked = self._ticked(set(streams))
        published: list[Event] = []
        while (due := self._due(ticked)) is not None and due < t1:
            published += self._step({}, ticked, due)
        published += self._step(streams, ticked, t1)
        for name in sorted({self.automata[index].name for index in ticked} & self.skippers.keys()):
            published += self.skippers[name].release(t1)
        return published

    def _ticked(self, streams: set[str]) -> set[int]:
        """The automata an epoch of ``streams`` moves: readers of them, and of what those
        publish."""
        out: set[int] = set()
        for index, automaton in enumerate(self.automata):
            if automaton.reads & streams:
                out.add(index)
                streams.add(automaton.name)
        return out

    def _due(self, ticked: set[int]) -> int | None:
        """The earliest deadline of an instance a TIMEOUT edge of a ``ticked`` automaton
        publishes."""
        due: int | None = None
        for index in ticked:
            automaton = self.automata[index]
            for node, instances in self.states[index].instances.items():
                for edge in automaton.outgoing[node]:
                    if edge.kind is EdgeKind.TIMEOUT:
                        bound = int(dur_bound(edge))
                        first = min(i.t0 for i in instances) + bound - 1
                        due = first if due is None else min(due, first)
        return due

    def _step(self, streams: dict[str, list[Event]], ticked: set[int], clock: int) -> list[Event]:
        """Every automaton through one epoch of ``streams`` at ``clock`` (those not ``ticked``
        see no time pass), producers first; the published events."""
        published: list[Event] = []
        for index, automaton in enumerate(self.automata):
            self.states[index], outputs = process_epoch(
                automaton,
                self.states[index],
                streams,
                self.faults,
                self.functions,
                self.counters,
                clock if index in ticked else None,
            )
            skipper = self.skippers.get(automaton.name)
            if skipper is not None:
                for output in outputs:
                    skipper.add(output)
            elif outputs:
                streams.setdefault(automaton.name, []).extend(outputs)
                if not automaton.internal:
                    published.extend(outputs)
        return published

    def run(self, events: Iterable[Event]) -> list[Event]:
        """Process a finite list of events in any order: grouped into epochs by ``t1`` (the
        input goes on: :meth:`finish` ends it)."""
        return run_epochs(self.process, events)

    def finish(self) -> list[Event]:
        """End the input: the matches AFTER MATCH SKIP holds that its policies keep, now
        that no run can complete."""
        return [e for skipper in self.skippers.values() for e in skipper.release(math.inf)]
