"""The multi-query engine (Section 4.3): one merged DAG, FR / AN / AI indices, one epoch per call.

:class:`Engine` holds every subscription's automata merged into a
:class:`~server.engine.dag.QueryDag`, the indices of :mod:`index`, and the live
instances.  :meth:`Engine.process` consumes one epoch exactly as Section 4.3
describes, per event of the epoch:

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

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cesar.automata.automaton import Automaton, Edge, EdgeKind
from cesar.automata.evaluate import DEFAULT_FUNCTIONS, ArithmeticFault, Faults, FunctionRegistry
from cesar.automata.schema import Event, Value, epochs
from cesar.automata.terms import Const, Dur
from cesar.index.ai import Access, InstanceIndex, access_atom
from cesar.index.an import ActiveNodeIndex
from cesar.index.fr import ForwardRebindIndex
from cesar.server.engine.codegen import Build, Compiler, Test
from cesar.server.engine.dag import ROOT, Placement, QueryDag

_EMPTY: Mapping[str, Value] = {}
_NEVER = -math.inf


@dataclass(frozen=True)
class EngineOptions:
    """How the engine runs: optimisations on or off, and instance limits (None: unlimited)."""

    merge: bool = True
    indices: bool = True
    max_instances_per_node: int | None = None
    max_instances: int | None = None
    functions: FunctionRegistry = DEFAULT_FUNCTIONS


@dataclass
class EngineCounters:
    """Deterministic work counters (per engine, cumulative).

    ``nodes_touched``: nodes whose instances an event may affect (AN hits, or
    active nodes visited by the naive mode); ``nodes_visited``: nodes the
    naive mode looked at; ``instances_touched``: instances whose filter was
    evaluated.
    """

    epochs: int = 0
    events: int = 0
    fr_hits: int = 0
    nodes_touched: int = 0
    nodes_visited: int = 0
    instances_touched: int = 0
    spawned: int = 0
    matches: int = 0
    collected: int = 0
    dropped: int = 0
    active_nodes_sum: int = 0


@dataclass(frozen=True)
class Notice:
    """A message for a subscription: ``reason`` says what happened to its instances."""

    subscription: str
    reason: str


class Instance:
    """A live partial match: node, binding, interval and root epoch (see the module docstring)."""

    __slots__ = ("binding", "id", "node", "root", "t0", "t1")

    def __init__(
        self, id: int, node: int, binding: Mapping[str, Value], t0: int, t1: int, root: float
    ) -> None:
        self.id = id
        self.node = node
        self.binding = binding
        self.t0 = t0
        self.t1 = t1
        self.root = root


@dataclass
class _CompiledEdge:
    """An edge's generated code: per conjunct the dynamic test (and, naive mode, the whole one)."""

    edge: Edge
    source: int
    target: int
    dynamic: tuple[Test, ...]
    guards: Test
    whole: tuple[Test, ...] = ()
    build: Build | None = None
    accesses: tuple[Access | None, ...] = ()
    dur_bound: float = math.inf


@dataclass
class _Subscription:
    id: str
    streams: tuple[str, ...]
    placements: list[Placement] = field(default_factory=list)


def _dur_bound(edge: Edge) -> float:
    """The largest composite DUR (an integer) with which ``edge`` can still fire (inf: none)."""
    best = -math.inf
    for conjunct in edge.conjuncts:
        bound = math.inf
        for atom in conjunct.dynamic.atoms:
            if isinstance(atom.left, Dur) and isinstance(atom.right, Const):
                bound = min(bound, _max_dur(atom.op, atom.right.value))
        best = max(best, bound)
    return best


def _max_dur(op: str, value: Value) -> float:
    """The largest integer DUR satisfying ``DUR op value`` (inf if unbounded, -inf if none)."""
    if op not in ("<", "<=", "=") or isinstance(value, str | bool):
        return math.inf
    if math.isnan(value):
        return -math.inf
    if math.isinf(value):
        return value
    if op == "<":
        return float(math.ceil(value) - 1)
    if op == "<=" or value == math.floor(value):
        return float(math.floor(value))
    return -math.inf


class Engine:
    """The multi-query engine; subscribe / unsubscribe between epochs, process one epoch."""

    def __init__(self, options: EngineOptions | None = None) -> None:
        self.options = options or EngineOptions()
        self.faults = Faults()
        self.counters = EngineCounters()
        self.notices: list[Notice] = []
        self.dag = QueryDag(merge=self.options.merge)
        self.fr = ForwardRebindIndex()
        self.an = ActiveNodeIndex()
        self.live: dict[int, InstanceIndex[Instance]] = {}
        self.instances: dict[int, Instance] = {}
        self.last_t1: float = _NEVER
        self._compiler = Compiler(self.faults, self.options.functions)
        self._edges: dict[int, _CompiledEdge] = {}
        self._subscriptions: dict[str, _Subscription] = {}
        self._since: dict[str, float] = {}
        self._internal: set[str] = set()
        self._rank: dict[str, int] = {}
        self._bound: dict[int, float] = {}
        self._expiry: list[tuple[float, int]] = []
        self._next_instance = 0

    # ------------------------------------------------------------ subscriptions

    @property
    def subscriptions(self) -> list[str]:
        """Ids of the live subscriptions, oldest first."""
        return list(self._subscriptions)

    def subscribe(self, subscription: str, automata: Sequence[Automaton]) -> None:
        """Add a subscription's automata (producers first) between epochs.

        It receives the matches made only of events of later epochs.
        """
        if subscription in self._subscriptions:
            raise ValueError(f"subscription {subscription} exists")
        record = _Subscription(subscription, tuple(a.name for a in automata))
        touched: set[int] = set()
        for automaton in automata:
            if automaton.name in self._since:
                raise ValueError(f"stream {automaton.name} is already published")
            placement = self.dag.add(automaton)
            record.placements.append(placement)
            for edge_id in placement.created_edges:
                self._compile(edge_id)
                touched.add(self.dag.edges[edge_id].source)
            self._since[automaton.name] = self.last_t1
            if automaton.internal:
                self._internal.add(automaton.name)
            self._rank[automaton.name] = 1 + max(
                (self._rank.get(stream, 0) for stream in automaton.reads), default=0
            )
        self._subscriptions[subscription] = record
        touched.discard(ROOT)  # the start node holds no instances
        for node in touched:
            self._update_deadline(node)

    def unsubscribe(self, subscription: str) -> None:
        """Remove a subscription; what only it used goes, other subscriptions are untouched."""
        record = self._subscriptions.pop(subscription)
        touched: set[int] = set()
        for placement, stream in zip(
            reversed(record.placements), reversed(record.streams), strict=True
        ):
            dead_nodes, dead_edges = self.dag.remove(placement)
            for edge_id in dead_edges:
                compiled = self._edges.pop(edge_id)
                if compiled.edge.kind is not EdgeKind.FILTER:
                    self.fr.remove(edge_id)
                touched.add(compiled.source)
            for node in dead_nodes:
                self._drop_node(node)
                touched.discard(node)
            del self._since[stream]
            del self._rank[stream]
            self._internal.discard(stream)
        touched.discard(ROOT)
        for node in touched:
            if node in self.dag.nodes:
                self._update_deadline(node)

    def _compile(self, edge_id: int) -> None:
        dag_edge = self.dag.edges[edge_id]
        edge = dag_edge.label
        compiler = self._compiler
        compiled = _CompiledEdge(
            edge,
            dag_edge.source,
            dag_edge.target,
            tuple(compiler.conjunct(c.dynamic.atoms) for c in edge.conjuncts),
            compiler.guards(edge.guards),
        )
        if edge.kind is EdgeKind.FILTER:
            compiled.accesses = tuple(access_atom(c.dynamic) for c in edge.conjuncts)
            if not self.options.indices:
                # Without the AN index nothing has checked the static part: test it all.
                compiled.whole = tuple(
                    compiler.conjunct(c.static.atoms + c.dynamic.atoms) for c in edge.conjuncts
                )
        else:
            compiled.build = compiler.build(edge.map)
            compiled.dur_bound = _dur_bound(edge)
            self.fr.add(edge_id, edge)
        self._edges[edge_id] = compiled

    def _update_deadline(self, node: int) -> None:
        """Recompute the node's DUR bound; if it changed, re-queue its instances for collection."""
        leaving = self.dag.nodes[node].leaving
        bound = max((self._edges[e].dur_bound for e in leaving), default=math.inf)
        if bound == self._bound.get(node, math.inf):
            return  # the queued deadlines are still right
        if bound == math.inf:
            del self._bound[node]
            return
        self._bound[node] = bound
        index = self.live.get(node)
        for instance in index.instances() if index else ():
            heapq.heappush(self._expiry, (instance.t0 + bound - 1, instance.id))

    def _drop_node(self, node: int) -> None:
        index = self.live.pop(node, None)
        if index is not None:
            for instance in index.instances():
                del self.instances[instance.id]
            if node in self.an:
                self.an.remove(node)
        self._bound.pop(node, None)

    # ------------------------------------------------------------------ epochs

    def process(self, epoch: Sequence[Event]) -> list[Event]:
        """Process one epoch (events with one ``t1``, later than the last); the matches."""
        if not epoch:
            return []
        t1 = epoch[0].t1
        if any(e.t1 != t1 for e in epoch) or t1 <= self.last_t1:
            raise ValueError("an epoch holds events of one t1, later than the previous epoch's")
        self.counters.epochs += 1
        self.counters.events += len(epoch)
        self.counters.active_nodes_sum += len(self.live)
        pending: dict[int, list[tuple[Event, float]]] = {}
        for event in epoch:
            pending.setdefault(self._rank.get(event.stream, 0), []).append((event, t1))
        published: list[Event] = []
        while pending:
            rank = min(pending)
            produced = self._round(pending.pop(rank))
            for event, root in produced:
                if event.stream not in self._internal:
                    published.append(event)
                pending.setdefault(self._rank[event.stream], []).append((event, root))
        self.last_t1 = t1
        self._collect(t1)
        return published

    def run(self, events: Iterable[Event]) -> list[Event]:
        """Process a finite list of events grouped into epochs by ``t1``."""
        out: list[Event] = []
        for epoch in epochs(events):
            out.extend(self.process(epoch))
        return out

    def _round(self, events: list[tuple[Event, float]]) -> list[tuple[Event, float]]:
        """One rank of an epoch: Section 4.3's steps for each event, then install."""
        spawned: list[Instance] = []
        killed: dict[int, Instance] = {}
        produced: list[tuple[Event, float]] = []
        counters = self.counters
        for event, root in events:
            attrs = event.attrs()
            own = event.t1 - event.t0 + 1
            hits = self.fr.probe(event.stream, attrs)
            counters.fr_hits += len(hits)
            for edge_id, positions in hits.items():
                compiled = self._edges[edge_id]
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
                        compiled = self._edges[edge_id]
                        if self._holds(compiled, edge_positions, instance.binding, attrs, dur, own):
                            self._fire(
                                compiled, instance, event, attrs, own, root, spawned, produced
                            )
        self._install(killed, spawned)
        return produced

    def _holds(
        self,
        compiled: _CompiledEdge,
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
        leaving = self.dag.nodes[node].leaving
        if len(hits) < len(leaving):
            edges = self._edges
            return sorted((e, p) for e, p in hits.items() if edges[e].source == node)
        return [(e, hits[e]) for e in leaving if e in hits]

    def _affected(
        self, event: Event, attrs: Mapping[str, Value], own: int
    ) -> Iterable[tuple[int, list[Instance]]]:
        """The active nodes the event may touch and, for each, the instances it affects."""
        counters = self.counters
        if self.options.indices:
            nodes = self.an.probe(event.stream, attrs)
        else:
            # Every subscription's automaton looks at every event: all nodes are visited.
            nodes = {}
            for dag_node in self.dag.nodes.values():
                if dag_node.filter is None:
                    continue
                compiled = self._edges[dag_node.filter]
                if compiled.edge.stream == event.stream:
                    counters.nodes_visited += 1
                    if dag_node.id in self.live:
                        nodes[dag_node.id] = list(range(len(compiled.edge.conjuncts)))
        counters.nodes_touched += len(nodes)
        for node, positions in nodes.items():
            index = self.live[node]
            filter_id = self.dag.nodes[node].filter
            assert filter_id is not None
            compiled = self._edges[filter_id]
            tests = compiled.dynamic if self.options.indices else compiled.whole
            affected: dict[int, Instance] = {}
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
        compiled: _CompiledEdge,
        instance: Instance | None,
        event: Event,
        attrs: Mapping[str, Value],
        own: int,
        root: float,
        spawned: list[Instance],
        produced: list[tuple[Event, float]],
    ) -> None:
        binding_in = _EMPTY if instance is None else instance.binding
        t0 = event.t0 if instance is None else instance.t0
        dur = event.t1 - t0 + 1
        try:
            assert compiled.build is not None
            binding = compiled.build(binding_in, attrs, dur, own)
        except ArithmeticFault:
            self.faults.arithmetic += 1
            return
        new_root = root if instance is None else min(root, instance.root)
        node = self.dag.nodes[compiled.target]
        for stream in node.outputs:
            if new_root > self._since[stream]:
                self.counters.matches += 1
                produced.append((Event.of(stream, t0, event.t1, binding), new_root))
        if node.filter is not None:
            self.counters.spawned += 1
            self._next_instance += 1
            spawned.append(
                Instance(self._next_instance, compiled.target, binding, t0, event.t1, new_root)
            )

    def _install(self, killed: Mapping[int, Instance], spawned: list[Instance]) -> None:
        for instance in killed.values():
            self._remove(instance)
        for instance in spawned:
            index = self.live.get(instance.node)
            if index is None:
                filter_id = self.dag.nodes[instance.node].filter
                assert filter_id is not None
                compiled = self._edges[filter_id]
                edge = compiled.edge
                index = InstanceIndex(compiled.accesses)
                self.live[instance.node] = index
                self.an.add(instance.node, edge)
            index.add(instance)
            self.instances[instance.id] = instance
            bound = self._bound.get(instance.node)
            if bound is not None:
                heapq.heappush(self._expiry, (instance.t0 + bound - 1, instance.id))
        self._enforce_limits({i.node for i in spawned})

    def _remove(self, instance: Instance) -> None:
        index = self.live[instance.node]
        index.remove(instance)
        del self.instances[instance.id]
        if not len(index):
            del self.live[instance.node]
            self.an.remove(instance.node)

    def _collect(self, t1: int) -> None:
        """Drop instances whose node's ∃-edges all need a DUR their start can no longer give.

        An instance starting at t0 at a node whose edges fire only with DUR <= bound
        can fire up to epoch t0 + bound - 1 (its *deadline*); the next epoch ends
        after t1, so every instance with a deadline <= t1 is dead.  The queue may
        hold stale entries (the node's bound changed, the instance left): each is
        re-checked against the current bound when it comes up.
        """
        heap = self._expiry
        while heap and heap[0][0] <= t1:
            _, instance_id = heapq.heappop(heap)
            instance = self.instances.get(instance_id)
            if instance is None:
                continue
            bound = self._bound.get(instance.node)
            if bound is not None and instance.t0 + bound - 1 <= t1:
                self._remove(instance)
                self.counters.collected += 1

    def _enforce_limits(self, nodes: set[int]) -> None:
        per_node = self.options.max_instances_per_node
        if per_node is not None:
            for node in nodes:
                index = self.live.get(node)
                if index is not None and len(index) > per_node:
                    excess = index.instances()[: len(index) - per_node]
                    self._drop(excess, f"node {node} exceeded {per_node} live instances")
        total = self.options.max_instances
        if total is not None and len(self.instances) > total:
            excess = list(self.instances.values())[: len(self.instances) - total]
            self._drop(excess, f"the engine exceeded {total} live instances")

    def _drop(self, instances: list[Instance], reason: str) -> None:
        nodes = set()
        for instance in instances:
            self._remove(instance)
            nodes.add(instance.node)
        self.counters.dropped += len(instances)
        for record in self._subscriptions.values():
            if any(node in p.nodes for p in record.placements for node in nodes):
                self.notices.append(
                    Notice(record.id, f"{reason}; the oldest partial matches were dropped")
                )

    # -------------------------------------------------------------- inspection

    def check_valid(self) -> None:
        """Assert every invariant of the DAG, the indices and the live instances."""
        self.dag.check_valid()
        self.fr.check_valid()
        self.an.check_valid()
        assert set(self._edges) == set(self.dag.edges)
        exists = {e for e, c in self._edges.items() if c.edge.kind is not EdgeKind.FILTER}
        assert len(self.fr) == len(exists)
        assert len(self.an) == len(self.live)
        count = 0
        for node, index in self.live.items():
            assert node in self.an and len(index) > 0
            index.check_valid()
            for instance in index.instances():
                assert self.instances[instance.id] is instance and instance.node == node
                count += 1
        assert count == len(self.instances)
