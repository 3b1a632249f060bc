"""The engine's compiled side: the merged DAG, each edge's generated code, the FR index (Section 4).

A :class:`QueryProgram` is what subscribe and unsubscribe change and what an
epoch only reads — the part Flink CEP calls the ``NFA``, as against the
``NFAState`` (here :class:`~cesar.server.engine.state.EngineState`).  It holds

* the :class:`~cesar.server.engine.dag.QueryDag` of every subscription's automata;
* per edge a :class:`CompiledEdge`: the dynamic part of each DNF conjunct,
  guards and attribute map as generated code (:mod:`cesar.server.engine.codegen`),
  the AI access of each FILTER conjunct, and the largest DUR an ∃-edge can
  still fire with;
* the FR index: the static parts of every ∃-edge's conjuncts (Section 4.3);
* per published stream its *rank* (one more than the highest rank it reads:
  producers run before readers within an epoch), the epoch it was subscribed
  after, and whether it is internal (resubscription, Section 3.5);
* per node the DUR bound of its ∃-edges, after which its instances are dead;
* the clock groups (:mod:`cesar.server.engine.clocks`): the streams each
  subscription reads and publishes share event time (the engine joins them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from cesar.automata.automaton import Automaton, Edge, EdgeKind
from cesar.automata.evaluate import DEFAULT_FUNCTIONS, Faults, FunctionRegistry
from cesar.automata.normal import Conjunct, static_atoms
from cesar.automata.schema import Value
from cesar.automata.terms import FLIPPED, Attr, Const, Dur, Scope
from cesar.index.ai import InstanceAccess
from cesar.index.static import Atoms, ConjunctIndex
from cesar.server.engine.clocks import StreamGroups
from cesar.server.engine.codegen import Build, Codegen, Test
from cesar.server.engine.dag import ROOT, Footprint, QueryDag


@dataclass(frozen=True)
class EngineOptions:
    """How the engine runs: optimisations on or off, and instance limits (None: unlimited)."""

    merge: bool = True
    indices: bool = True
    max_instances_per_node: int | None = None
    max_instances: int | None = None
    functions: FunctionRegistry = DEFAULT_FUNCTIONS


@dataclass
class CompiledEdge:
    """An edge's generated code: per conjunct the dynamic test (and, naive mode, the whole one)."""

    edge: Edge
    source: int
    target: int
    dynamic: tuple[Test, ...]
    guards: Test
    whole: tuple[Test, ...] = ()
    build: Build | None = None
    accesses: tuple[InstanceAccess | None, ...] = ()
    statics: tuple[Atoms, ...] = ()
    dur_bound: float = math.inf


@dataclass
class _Subscription:
    id: str
    streams: tuple[str, ...]
    footprints: list[Footprint] = field(default_factory=list)


def access_atom(dynamic: Conjunct) -> InstanceAccess | None:
    """The conjunct's best atom comparing an instance attribute with an event attribute.

    An equality if there is one, else an ordering (``!=`` selects too little to help).
    """
    found = []
    for atom in dynamic.atoms:
        left, right = atom.left, atom.right
        if not (isinstance(left, Attr) and isinstance(right, Attr)) or atom.op == "!=":
            continue
        if left.scope is Scope.LEFT and right.scope is Scope.EVENT:
            found.append(InstanceAccess(atom.op, left.name, right.name))
        elif left.scope is Scope.EVENT and right.scope is Scope.LEFT:
            found.append(InstanceAccess(FLIPPED[atom.op], right.name, left.name))
    equal = [a for a in found if a.op == "="]
    best = equal or found
    return best[0] if best else None


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


class QueryProgram:
    """The compiled, shareable side of the engine; see the module docstring.

    Methods: :meth:`subscribe` and :meth:`unsubscribe` (between epochs; each
    says which nodes the run state must revisit), :meth:`users` and
    :meth:`check_valid`.  ``faults`` counts the arithmetic faults of the
    generated code.
    """

    def __init__(self, options: EngineOptions) -> None:
        self.options = options
        self.faults = Faults()
        self.dag = QueryDag(merge=options.merge)
        self.fr: ConjunctIndex[int] = ConjunctIndex()
        self.edges: dict[int, CompiledEdge] = {}
        self.since: dict[str, float] = {}
        self.internal: set[str] = set()
        self.rank: dict[str, int] = {}
        self.bound: dict[int, float] = {}
        self.groups = StreamGroups()
        self._subscriptions: dict[str, _Subscription] = {}
        self._codegen = Codegen(self.faults, options.functions)

    @property
    def subscriptions(self) -> list[str]:
        """Ids of the live subscriptions, oldest first."""
        return list(self._subscriptions)

    def subscribe(self, subscription: str, automata: Sequence[Automaton], since: float) -> set[int]:
        """Add a subscription's automata (producers first), matching events after epoch ``since``.

        Returns the nodes whose DUR bound became finite or changed: their
        instances' deadlines must be queued again.  Cost: O(edges added).
        Raises ValueError for a subscription id or a published stream that exists.
        """
        if subscription in self._subscriptions:
            raise ValueError(f"subscription {subscription} exists")
        for automaton in automata:
            if automaton.name in self.since:
                raise ValueError(f"stream {automaton.name} is already published")
        record = _Subscription(subscription, tuple(a.name for a in automata))
        touched: set[int] = set()
        for automaton in automata:
            footprint = self.dag.add(automaton)
            record.footprints.append(footprint)
            for edge_id in footprint.created_edges:
                self._compile(edge_id)
                touched.add(self.dag.edges[edge_id].source)
            self.since[automaton.name] = since
            if automaton.internal:
                self.internal.add(automaton.name)
            self.rank[automaton.name] = 1 + max(
                (self.rank.get(stream, 0) for stream in automaton.reads), default=0
            )
        self._subscriptions[subscription] = record
        touched.discard(ROOT)  # the start node holds no instances
        return {node for node in touched if self._update_bound(node)}

    def unsubscribe(self, subscription: str) -> tuple[list[int], set[int]]:
        """Remove a subscription: (nodes deleted, nodes whose DUR bound changed).

        What only it used goes; other subscriptions are untouched.  Raises
        KeyError for an unknown subscription.
        """
        record = self._subscriptions.pop(subscription)
        touched: set[int] = set()
        deleted: list[int] = []
        for footprint, stream in zip(
            reversed(record.footprints), reversed(record.streams), strict=True
        ):
            dead_nodes, dead_edges = self.dag.remove(footprint)
            for edge_id in dead_edges:
                compiled = self.edges.pop(edge_id)
                if compiled.edge.kind is not EdgeKind.FILTER:
                    self.fr.remove(edge_id)
                touched.add(compiled.source)
            for node in dead_nodes:
                self.bound.pop(node, None)
                touched.discard(node)
            deleted.extend(dead_nodes)
            del self.since[stream]
            del self.rank[stream]
            self.internal.discard(stream)
        touched.discard(ROOT)
        return deleted, {n for n in touched if n in self.dag.nodes and self._update_bound(n)}

    def users(self, nodes: set[int]) -> list[str]:
        """The subscriptions whose automata use any of ``nodes``, oldest first."""
        return [
            record.id
            for record in self._subscriptions.values()
            if any(node in f.nodes for f in record.footprints for node in nodes)
        ]

    def clock_group(self, node: int) -> str:
        """The clock group of the stream ``node``'s FILTER edge reads (a node with instances)."""
        return self.groups.find(self.filter_of(node).edge.stream)

    def filter_of(self, node: int) -> CompiledEdge:
        """The FILTER edge of ``node`` (a node that can hold instances)."""
        filter_id = self.dag.nodes[node].filter
        assert filter_id is not None, f"node {node} has no filter"
        return self.edges[filter_id]

    def _compile(self, edge_id: int) -> None:
        dag_edge = self.dag.edges[edge_id]
        edge = dag_edge.label
        codegen = self._codegen
        compiled = CompiledEdge(
            edge,
            dag_edge.source,
            dag_edge.target,
            tuple(codegen.conjunct(c.dynamic.atoms) for c in edge.conjuncts),
            codegen.guards(edge.guards),
            statics=tuple(static_atoms(c.static) for c in edge.conjuncts),
        )
        if edge.kind is EdgeKind.FILTER:
            compiled.accesses = tuple(access_atom(c.dynamic) for c in edge.conjuncts)
            if not self.options.indices:
                # Without the AN index nothing has checked the static part: test it all.
                compiled.whole = tuple(
                    codegen.conjunct(c.static.atoms + c.dynamic.atoms) for c in edge.conjuncts
                )
        else:
            compiled.build = codegen.build(edge.map)
            compiled.dur_bound = _dur_bound(edge)
            self.fr.add(edge_id, edge.stream, compiled.statics)
        self.edges[edge_id] = compiled

    def _update_bound(self, node: int) -> bool:
        """Recompute the node's DUR bound; True if it is finite and changed."""
        leaving = self.dag.nodes[node].leaving
        bound = max((self.edges[e].dur_bound for e in leaving), default=math.inf)
        if bound == self.bound.get(node, math.inf):
            return False  # the queued deadlines are still right
        if bound == math.inf:
            del self.bound[node]
            return False
        self.bound[node] = bound
        return True

    def check_valid(self) -> None:
        """Assert every invariant of the DAG, the compiled edges and the FR index."""
        self.dag.check_valid()
        self.fr.check_valid()
        assert set(self.edges) == set(self.dag.edges)
        exists = {e for e, c in self.edges.items() if c.edge.kind is not EdgeKind.FILTER}
        assert len(self.fr) == len(exists) and all(e in self.fr for e in exists)
        assert set(self.since) == set(self.rank) >= self.internal
        assert set(self.bound) <= set(self.dag.nodes)
