"""The multi-query engine (Section 4.3): one merged DAG, FR / AN / AI indices, one epoch per call.

:class:`Engine` pairs a :class:`~cesar.server.engine.program.QueryProgram`
(every subscription's automata merged into one DAG, their generated code and
the FR index: what subscribe and unsubscribe change) with an
:class:`~cesar.server.engine.state.EngineState` (the live instances, the AN and
AI indices, deadlines and counters: what an epoch changes), as Flink CEP keeps
``NFA`` apart from ``NFAState``.  :meth:`Engine.process` consumes one epoch
exactly as Section 4.3 describes, per event of the epoch:

1. FR probe: the ∃-edges whose static part the event satisfies;
2. the start node fires those of its edges whose dynamic part holds;
3. AN probe: the active nodes whose filter's static part the event satisfies;
4. AI probe per such node: the instances its filter's dynamic part may hold
   for, verified; those are the *affected* instances (they leave their node);
5. each affected instance fires every FR-hit ∃-edge of its node whose dynamic
   part and guards hold.

New instances are installed, and affected ones removed, together at the end
(per stream rank, see below); outputs are emitted per subscription.  Streams
published by one subscription and read by another, internal resubscription
streams included, are processed in the same epoch after their producers: a
stream's *rank* is one more than the highest rank it reads, and ranks run in
order (installing between ranks is safe: a node's edges all read one stream).

A subscription added after epoch ``E`` receives exactly the matches made only
of events of later epochs: every instance carries its *root*, the earliest
epoch of the events it holds, and a match is emitted to a subscription only
if its root is later than the subscription's start — even when it was found
through nodes and instances shared with older subscriptions.

Options turn the optimisations off for comparison (Section 5.2.1): without
``merge`` each automaton has its own nodes; without ``indices`` the AN and AI
indices are not used: every node of every automaton looks at every event of
its stream (``nodes_visited``) and checks each of its instances — the paper's
naive system, in which each user runs her own automaton behind a shared
FR index.

Memory safety: an instance that can never fire again because every ∃-edge of
its node bounds DUR from above is collected once that bound has passed; with
``max_instances_per_node`` or ``max_instances`` set, the oldest instances are
dropped when a limit is exceeded and every subscription using the node gets a
:class:`Notice`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from cesar.automata.automaton import Automaton
from cesar.automata.evaluate import ArithmeticFault, Faults
from cesar.automata.schema import Event, Value, epoch_t1, run_epochs
from cesar.server.engine.dag import ROOT
from cesar.server.engine.program import CompiledEdge, EngineOptions, QueryProgram
from cesar.server.engine.state import EngineCounters, EngineInstance, EngineState, Notice

__all__ = ["Engine", "EngineCounters", "EngineOptions", "Notice"]

_EMPTY: Mapping[str, Value] = {}


class Engine:
    """The multi-query engine: a compiled program and its run state.

    Methods by role: :meth:`subscribe` and :meth:`unsubscribe` between epochs
    (O(edges of the subscription)); :meth:`process` one epoch, :meth:`run` a
    finite event list; :meth:`check_valid` asserts every invariant.
    """

    def __init__(self, options: EngineOptions | None = None) -> None:
        self.options = options or EngineOptions()
        self.program = QueryProgram(self.options)
        self.state = EngineState()

    @property
    def faults(self) -> Faults:
        """Arithmetic faults met by the generated code (atoms made false, maps skipped)."""
        return self.program.faults

    @property
    def counters(self) -> EngineCounters:
        """The deterministic work counters."""
        return self.state.counters

    @property
    def notices(self) -> list[Notice]:
        """Notices owed to subscriptions; the caller takes and clears them."""
        return self.state.notices

    @property
    def subscriptions(self) -> list[str]:
        """Ids of the live subscriptions, oldest first."""
        return self.program.subscriptions

    # ------------------------------------------------------------ subscriptions

    def subscribe(self, subscription: str, automata: Sequence[Automaton]) -> None:
        """Add a subscription's automata (producers first) between epochs.

        It receives the matches made only of events of later epochs.  Raises
        ValueError for a subscription id or a published stream that exists.
        """
        program, state = self.program, self.state
        groups = program.groups
        streams = {s for a in automata for s in (a.name, *a.reads)}
        since = max(state.group_clock.get(groups.find(s), -math.inf) for s in streams)
        touched = program.subscribe(subscription, automata, since)
        state.regroup(groups.join(streams), groups)
        for node in touched:
            state.queue(node, program.clock_group(node), program.bound[node])

    def unsubscribe(self, subscription: str) -> None:
        """Remove a subscription; what only it used goes, other subscriptions are untouched."""
        program, state = self.program, self.state
        deleted, rebound = program.unsubscribe(subscription)
        for node in deleted:
            state.drop_node(node)
        for node in rebound:
            state.queue(node, program.clock_group(node), program.bound[node])

    # ------------------------------------------------------------------ epochs

    def process(self, epoch: Sequence[Event]) -> list[Event]:
        """Process one epoch (events with one ``t1``, later than each stream's last); the matches.

        Raises ValueError for events of several ``t1`` or one not after the
        last epoch of its stream: streams keep their own clocks, and the caller
        orders the epochs of each clock group (:mod:`cesar.server.engine.clocks`).
        """
        state = self.state
        if not epoch:
            return []
        t1 = epoch_t1(epoch, None)
        clock = state.clock
        streams = {event.stream for event in epoch}
        for stream in streams:
            if t1 <= clock.get(stream, -math.inf):
                raise ValueError(
                    f"an epoch of {stream} at t1 = {t1} is not after its last, t1 = {clock[stream]}"
                )
        state.counters.epochs += 1
        state.counters.events += len(epoch)
        state.counters.active_nodes_sum += len(state.live)
        rank = self.program.rank
        pending: dict[int, list[tuple[Event, float]]] = {}
        for event in epoch:
            pending.setdefault(rank.get(event.stream, 0), []).append((event, t1))
        published: list[Event] = []
        while pending:
            produced = self._round(pending.pop(min(pending)))
            for event, root in produced:
                if event.stream not in self.program.internal:
                    published.append(event)
                pending.setdefault(rank[event.stream], []).append((event, root))
        groups = {self.program.groups.find(stream) for stream in streams}
        for stream in streams:
            clock[stream] = t1
        for group in groups:
            state.group_clock[group] = max(state.group_clock.get(group, t1), t1)
        state.collect(t1, groups, self.program.bound)
        return published

    def run(self, events: Iterable[Event]) -> list[Event]:
        """Process a finite list of events grouped into epochs by ``t1``."""
        return run_epochs(self.process, events)

    def _round(self, events: list[tuple[Event, float]]) -> list[tuple[Event, float]]:
        """One rank of an epoch: Section 4.3's steps for each event, then install."""
        spawned: list[EngineInstance] = []
        killed: dict[int, EngineInstance] = {}
        produced: list[tuple[Event, float]] = []
        counters = self.state.counters
        for event, root in events:
            attrs = event.attrs()
            own = event.t1 - event.t0 + 1
            hits = self.program.fr.probe(event.stream, attrs)
            counters.fr_hits += len(hits)
            for edge_id, positions in hits.items():
                compiled = self.program.edges[edge_id]
                if compiled.source == ROOT and self._holds(
                    compiled, positions, _EMPTY, attrs, own, own
                ):
                    self._fire(compiled, None, event, attrs, own, root, spawned, produced)
            for node, affected in self._affected(event, attrs, own):
                firing = self._firing(node, hits)
                for instance in affected:
                    killed[instance.id] = instance
                    dur = event.t1 - instance.t0 + 1
                    for edge_id, edge_positions in firing:
                        compiled = self.program.edges[edge_id]
                        if self._holds(compiled, edge_positions, instance.binding, attrs, dur, own):
                            self._fire(
                                compiled, instance, event, attrs, own, root, spawned, produced
                            )
        self._install(killed, spawned)
        return produced

    def _holds(
        self,
        compiled: CompiledEdge,
        positions: Iterable[int],
        binding: Mapping[str, Value],
        attrs: Mapping[str, Value],
        dur: int,
        own: int,
    ) -> bool:
        dynamic = compiled.dynamic
        return any(dynamic[p](binding, attrs, dur, own) for p in positions) and compiled.guards(
            binding, attrs, dur, own
        )

    def _firing(
        self, node: int, hits: Mapping[int, Sequence[int]]
    ) -> list[tuple[int, Sequence[int]]]:
        """The edges leaving ``node`` that the FR index hit, with their positions, in edge order.

        Only a hit edge can fire, so this walks whichever is shorter: the node's
        leaving edges or the hits.  O(min(leaving, hits)) — a node shared by many
        subscriptions (one NEXT, thousands of FILTERs after it) has thousands of
        leaving edges, of which an event hits a few.
        """
        leaving = self.program.dag.nodes[node].leaving
        if len(hits) < len(leaving):
            edges = self.program.edges
            return sorted((e, p) for e, p in hits.items() if edges[e].source == node)
        return [(e, hits[e]) for e in leaving if e in hits]

    def _affected(
        self, event: Event, attrs: Mapping[str, Value], own: int
    ) -> Iterable[tuple[int, list[EngineInstance]]]:
        """The active nodes the event may touch and, for each, the instances it affects."""
        counters = self.state.counters
        if self.options.indices:
            nodes = self.state.an.probe(event.stream, attrs)
        else:
            # Every subscription's automaton looks at every event: all nodes are visited.
            nodes = {}
            for dag_node in self.program.dag.nodes.values():
                if dag_node.filter is None:
                    continue
                compiled = self.program.edges[dag_node.filter]
                if compiled.edge.stream == event.stream:
                    counters.nodes_visited += 1
                    if dag_node.id in self.state.live:
                        nodes[dag_node.id] = list(range(len(compiled.edge.conjuncts)))
        counters.nodes_touched += len(nodes)
        for node, positions in nodes.items():
            index = self.state.live[node]
            compiled = self.program.filter_of(node)
            tests = compiled.dynamic if self.options.indices else compiled.whole
            affected: dict[int, EngineInstance] = {}
            for position in positions:
                test = tests[position]
                candidates = (
                    index.probe(position, attrs) if self.options.indices else index.instances()
                )
                for instance in candidates:
                    counters.instances_touched += 1
                    if instance.id in affected or event.t0 <= instance.t1:
                        continue
                    dur = event.t1 - instance.t0 + 1
                    if test(instance.binding, attrs, dur, own) and compiled.guards(
                        instance.binding, attrs, dur, own
                    ):
                        affected[instance.id] = instance
            if affected:
                yield node, list(affected.values())

    def _fire(
        self,
        compiled: CompiledEdge,
        instance: EngineInstance | None,
        event: Event,
        attrs: Mapping[str, Value],
        own: int,
        root: float,
        spawned: list[EngineInstance],
        produced: list[tuple[Event, float]],
    ) -> None:
        binding_in = _EMPTY if instance is None else instance.binding
        t0 = event.t0 if instance is None else instance.t0
        dur = event.t1 - t0 + 1
        try:
            assert compiled.build is not None
            binding = compiled.build(binding_in, attrs, dur, own)
        except ArithmeticFault:
            self.program.faults.arithmetic += 1
            return
        new_root = root if instance is None else min(root, instance.root)
        node = self.program.dag.nodes[compiled.target]
        for stream in node.outputs:
            if new_root > self.program.since[stream]:
                self.state.counters.matches += 1
                produced.append((Event.of(stream, t0, event.t1, binding), new_root))
        if node.filter is not None:
            self.state.counters.spawned += 1
            spawned.append(
                EngineInstance(
                    self.state.new_id(), compiled.target, binding, t0, event.t1, new_root
                )
            )

    def _install(self, killed: Mapping[int, EngineInstance], spawned: list[EngineInstance]) -> None:
        state, program = self.state, self.program
        for instance in killed.values():
            state.remove(instance)
        for instance in spawned:
            compiled = program.filter_of(instance.node)
            stream = compiled.edge.stream
            state.add(
                instance,
                stream,
                compiled.statics,
                compiled.accesses,
                program.bound.get(instance.node),
                program.groups.find(stream),
            )
        self._enforce_limits({i.node for i in spawned})

    def _enforce_limits(self, nodes: set[int]) -> None:
        """Drop the oldest instances over a limit; notify once per episode over it.

        A node (or the engine) that goes over its limit notifies the
        subscriptions using it once; it notifies again only after an epoch in
        which it gained instances and stayed within the limit (it recovered).
        """
        live, instances, capped = self.state.live, self.state.instances, self.state.capped
        per_node = self.options.max_instances_per_node
        if per_node is not None:
            for node in nodes:
                index = live.get(node)
                if index is not None and len(index) > per_node:
                    excess = index.instances()[: len(index) - per_node]
                    self._drop(excess, node, f"node {node} exceeded {per_node} live instances")
                else:
                    capped.discard(node)
        total = self.options.max_instances
        if total is not None and len(instances) > total:
            excess = list(instances.values())[: len(instances) - total]
            self._drop(excess, None, f"the engine exceeded {total} live instances")
        elif nodes:
            capped.discard(None)

    def _drop(self, instances: list[EngineInstance], over: int | None, reason: str) -> None:
        state = self.state
        for instance in instances:
            state.remove(instance)
        state.counters.dropped += len(instances)
        if over in state.capped:
            return
        state.capped.add(over)
        for subscription in self.program.users({i.node for i in instances}):
            state.notices.append(
                Notice(
                    subscription,
                    f"{reason}; the oldest partial matches are dropped (one notice until "
                    "it recovers)",
                )
            )

    # -------------------------------------------------------------- inspection

    def check_valid(self) -> None:
        """Assert every invariant of the program, the run state and how they meet."""
        program, state = self.program, self.state
        program.check_valid()
        state.check_valid()
        for node in state.live:
            assert program.dag.nodes[node].filter is not None
