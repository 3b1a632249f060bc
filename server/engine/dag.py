"""The merged query DAG (Section 4.2): automata sharing equivalent prefixes, with reference counts.

A :class:`QueryDag` holds the nodes and edges of every subscription's automata.
Adding an automaton walks its nodes in topological order and maps each onto
an existing DAG node with the same *signature* — the multiset of its entering
edges (label and source; a self-loop's source is the node itself), Definition
2 restricted to prefixes as in the paper, and its TIMEOUT edge's label (a node has
one, so nodes whose timeouts publish differently are not shared) — or onto a new node.  Edge labels
are *templates* (:mod:`cesar.automata.template`): the canonical edge data
(kind, stream, predicate, guards, map) with the predicate's constants lifted
out, so subscriptions equal up to their constants share a node, and each
automaton's constants are kept in its :class:`Footprint` beside the edge (the
engine decides per subscription with them, :mod:`cesar.server.engine.params`).
Multiplicities survive merging because they live in parallel edges: ``S ∪ S``
is one node entered twice from the root, so each event spawns two instances,
as the algebra's multiset union demands.  Two nodes of one automaton are never
mapped onto one DAG node (their constants could differ on a shared edge).

Every node belongs to a *space*: the connected nodes whose automata share
any of them.  An automaton lives in one space (it shares nodes of one space
only; a node that would join two spaces is not shared), so the engine can
number subscriptions within a space: the bitmasks of a space of a hundred
subscriptions are a hundred bits wide, however many the DAG holds.

Every node and edge counts the footprints using it; removing a footprint
deletes what no other footprint uses.  ``merge=False`` gives each automaton
its own nodes (only the root is shared): the engine without state merging.

>>> from cesar.automata.compiler import compile_query
>>> from cesar.automata.schema import parse_stream_spec
>>> S = {"S": parse_stream_spec("S(k:string,v:int)")}
>>> dag = QueryDag()
>>> a = dag.add(compile_query("FILTER{v > 1} S NEXT{} S", S, "a").automata[0])
>>> b = dag.add(compile_query("FILTER{v = 2}(FILTER{v > 1} S NEXT{} S)", S, "b").automata[0])
>>> a.nodes[:2] == b.nodes[:2], len(dag.nodes)
(True, 4)
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from cesar.automata.algebra import Columns
from cesar.automata.automaton import Automaton, Edge, EdgeKind, SplitConjunct
from cesar.automata.normal import Conjunct
from cesar.automata.template import Constants, template
from cesar.automata.terms import And, Cmp, Not, Or, Pred

ROOT: Final = 0
_TIMES_OUT: Final = -2
"""In a signature: the key of the node's own TIMEOUT edge (it leaves the node)."""
_SELF: Final = -1


@dataclass(eq=False)
class DagEdge:
    """An edge of the DAG: its ends, its label (an :class:`Edge` with ends zeroed), its users."""

    id: int
    source: int
    target: int
    label: Edge
    refs: int = 0

    @property
    def kind(self) -> EdgeKind:
        return self.label.kind


@dataclass(eq=False)
class DagNode:
    """A node: binding schema, signature, level, space, edges, and how many automata use it.

    ``registered``: other automata may share it (false for a second node of one
    automaton with the signature of its first).
    """

    id: int
    attributes: Columns
    signature: Hashable
    level: int
    space: int = 0
    refs: int = 0
    registered: bool = True
    entering: list[int] = field(default_factory=list)
    filter: int | None = None
    stay: int | None = None
    timeout: int | None = None
    leaving: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Footprint:
    """Where one automaton lives in the DAG: its nodes' and edges' DAG ids, by position.

    ``space`` is the space of its nodes (the root's aside); ``constants`` are the
    automaton's constants for each of its edges' templates.
    """

    name: str
    space: int
    nodes: tuple[int, ...]
    edges: tuple[int, ...]
    final: int
    created_nodes: tuple[int, ...]
    created_edges: tuple[int, ...]
    constants: tuple[Constants, ...]


class _Pool:
    """Interns equal atoms, conjuncts and assignments so the DAG stores each once.

    Under Zipf-skewed subscriptions most atoms and attribute maps repeat;
    sharing them cuts the DAG's memory several-fold.  Weak references let an
    entry go when no edge uses it any more.
    """

    def __init__(self) -> None:
        self._objects: weakref.WeakValueDictionary[Any, Any] = weakref.WeakValueDictionary()

    def get(self, item: Any) -> Any:
        found = self._objects.get(item)
        if found is None:
            self._objects[item] = item
            return item
        return found

    def pred(self, pred: Pred) -> Pred:
        if isinstance(pred, Cmp):
            interned: Cmp = self.get(pred)
            return interned
        if isinstance(pred, And):
            return And(tuple(self.pred(item) for item in pred.items))
        if isinstance(pred, Or):
            return Or(tuple(self.pred(item) for item in pred.items))
        if isinstance(pred, Not):
            return Not(self.pred(pred.item))
        return pred

    def label(self, edge: Edge) -> Edge:
        conjuncts = tuple(
            self.get(
                SplitConjunct(
                    Conjunct(tuple(self.get(a) for a in c.static.atoms)),
                    Conjunct(tuple(self.get(a) for a in c.dynamic.atoms)),
                )
            )
            for c in edge.conjuncts
        )
        return replace(
            edge,
            source=0,
            target=0,
            pred=self.pred(edge.pred),
            conjuncts=conjuncts,
            map=tuple(self.get(a) for a in edge.map),
        )


def _topological(automaton: Automaton) -> list[int]:
    indegree = Counter(e.target for e in automaton.edges if e.source != e.target)
    ready = [n.id for n in automaton.nodes if indegree[n.id] == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for edge in automaton.outgoing[node]:
            if edge.target != node:
                indegree[edge.target] -= 1
                if indegree[edge.target] == 0:
                    ready.append(edge.target)
    assert len(order) == len(automaton.nodes), "automaton has a cycle beyond self-loops"
    return order


class QueryDag:
    """The merged DAG of every placed automaton; add / remove / check_valid."""

    def __init__(self, merge: bool = True) -> None:
        self.merge = merge
        self.nodes: dict[int, DagNode] = {ROOT: DagNode(ROOT, (), ("root",), 0, refs=0)}
        self.edges: dict[int, DagEdge] = {}
        self.joining: set[int] = set()
        """The nodes whose FILTER edge joins (they see events by arrival)."""
        self.guarded: dict[tuple[int, int], list[int]] = {}
        """The UNLESS edges guarding the ∃-edges of each (source, target)."""
        self._by_signature: dict[Hashable, int] = {}
        self._pool = _Pool()
        self._schemas: dict[Columns, Columns] = {}  # one tuple per distinct node schema
        self._next_node = 1
        self._next_edge = 0
        self._next_space = 1

    def add(self, automaton: Automaton) -> Footprint:
        """Place ``automaton``, sharing every equivalent prefix.  O(size of the automaton).

        The first node it shares decides its space (a new space if it shares
        none); a node of another space is not shared.
        """
        mapping: dict[int, int] = {0: ROOT}
        space: int | None = None
        edge_map: dict[int, int] = {}
        created_nodes: list[int] = []
        created_edges: list[int] = []
        positions = {id(edge): index for index, edge in enumerate(automaton.edges)}
        templates = [template(edge) for edge in automaton.edges]
        entering: dict[int, list[Edge]] = {}
        timing: dict[int, list[Edge]] = {}
        for edge in automaton.edges:
            entering.setdefault(edge.target, []).append(edge)
            if edge.kind is EdgeKind.TIMEOUT:
                timing.setdefault(edge.source, []).append(edge)
        for node_id in _topological(automaton):
            if node_id == 0:
                continue
            edges_in = entering.get(node_id, [])
            keys = [
                (
                    self._pool.label(templates[positions[id(e)]][0]),
                    _SELF if e.source == node_id else mapping[e.source],
                )
                for e in edges_in
            ]
            times_out = [
                (self._pool.label(templates[positions[id(e)]][0]), _TIMES_OUT)
                for e in timing.get(node_id, [])
            ]
            signature = frozenset(Counter(keys + times_out).items())
            existing = self._by_signature.get(signature) if self.merge else None
            if existing in mapping.values():
                existing = None
            if existing is not None:
                found = self.nodes[existing].space
                if space is None:
                    space = found
                elif found != space:
                    existing = None  # sharing it would join two spaces
            if existing is None:
                level = 1 + max(
                    (self.nodes[mapping[e.source]].level for e in edges_in if e.source != node_id),
                    default=0,
                )
                existing = self._new_node(
                    automaton.nodes[node_id].attributes,
                    signature,
                    level,
                    self.merge and signature not in self._by_signature,
                )
                created_nodes.append(existing)
                for edge, (label, source) in zip(edges_in, keys, strict=True):
                    dag_edge = self._new_edge(
                        existing if source == _SELF else source, existing, label
                    )
                    created_edges.append(dag_edge)
                    edge_map[positions[id(edge)]] = dag_edge
            else:
                free: dict[tuple[Edge, int], list[int]] = {}
                for entering_id in self.nodes[existing].entering:
                    known = self.edges[entering_id]
                    source = _SELF if known.source == existing else known.source
                    free.setdefault((known.label, source), []).append(entering_id)
                for edge, key in zip(edges_in, keys, strict=True):
                    edge_map[positions[id(edge)]] = free[key].pop()
            mapping[node_id] = existing
        if space is None:
            space = self._next_space
            self._next_space += 1
        for node_id in created_nodes:
            self.nodes[node_id].space = space
        final = mapping[automaton.final]
        nodes = tuple(mapping[n.id] for n in automaton.nodes)
        edges = tuple(edge_map[i] for i in range(len(automaton.edges)))
        for node in nodes:
            self.nodes[node].refs += 1
        for edge_id in edges:
            self.edges[edge_id].refs += 1
        return Footprint(
            automaton.name,
            space,
            nodes,
            edges,
            final,
            tuple(created_nodes),
            tuple(created_edges),
            tuple(constants for _, constants in templates),
        )

    def _new_node(
        self, attributes: Columns, signature: Hashable, level: int, register: bool
    ) -> int:
        node_id = self._next_node
        self._next_node += 1
        attributes = self._schemas.setdefault(attributes, attributes)
        self.nodes[node_id] = DagNode(node_id, attributes, signature, level, registered=register)
        if register:
            self._by_signature[signature] = node_id
        return node_id

    def _new_edge(self, source: int, target: int, label: Edge) -> int:
        edge_id = self._next_edge
        self._next_edge += 1
        self.edges[edge_id] = DagEdge(edge_id, source, target, label)
        self.nodes[target].entering.append(edge_id)
        if label.kind is EdgeKind.FILTER:
            assert self.nodes[source].filter is None, "a node has one filter edge"
            self.nodes[source].filter = edge_id
            if label.joins:
                self.joining.add(source)
        elif label.kind is EdgeKind.STAY:
            assert self.nodes[source].stay is None, "a node has one stay edge"
            self.nodes[source].stay = edge_id
        elif label.kind is EdgeKind.TIMEOUT:
            assert self.nodes[source].timeout is None, "a node has one timeout edge"
            self.nodes[source].timeout = edge_id
        elif label.kind is EdgeKind.UNLESS:
            self.guarded.setdefault((source, target), []).append(edge_id)
        else:
            self.nodes[source].leaving.append(edge_id)
        return edge_id

    def remove(self, footprint: Footprint) -> tuple[list[int], list[int]]:
        """Release a footprint; returns the node and edge ids deleted (no one else used them)."""
        for node in footprint.nodes:
            self.nodes[node].refs -= 1
        for edge_id in footprint.edges:
            self.edges[edge_id].refs -= 1
        dead_edges = sorted({e for e in footprint.edges if self.edges[e].refs == 0})
        dead_nodes = sorted({n for n in footprint.nodes if n != ROOT and self.nodes[n].refs == 0})
        for edge_id in dead_edges:
            edge = self.edges.pop(edge_id)
            if edge.source in self.nodes:
                source = self.nodes[edge.source]
                if source.filter == edge_id:
                    source.filter = None
                    self.joining.discard(edge.source)
                elif source.stay == edge_id:
                    source.stay = None
                elif source.timeout == edge_id:
                    source.timeout = None
                elif edge.kind is EdgeKind.UNLESS:
                    guards = self.guarded[edge.source, edge.target]
                    guards.remove(edge_id)
                    if not guards:
                        del self.guarded[edge.source, edge.target]
                elif edge_id in source.leaving:
                    source.leaving.remove(edge_id)
            self.nodes[edge.target].entering.remove(edge_id)
        for node_id in dead_nodes:
            dead = self.nodes.pop(node_id)
            if dead.registered:
                del self._by_signature[dead.signature]
        return dead_nodes, dead_edges

    def levels(self) -> dict[int, int]:
        """Level (longest path from the root, self-loops ignored) → number of nodes."""
        return dict(sorted(Counter(n.level for n in self.nodes.values() if n.id != ROOT).items()))

    def check_valid(self) -> None:
        """Assert the DAG's invariants: links both ways, signatures, reference counts."""
        for node in self.nodes.values():
            assert node.id == ROOT or node.refs > 0, f"node {node.id} is unused"
            for edge_id in node.entering:
                assert self.edges[edge_id].target == node.id
            for edge_id in node.leaving:
                edge = self.edges[edge_id]
                assert edge.source == node.id
                assert edge.kind in (EdgeKind.FORWARD, EdgeKind.REBIND)
            if node.filter is not None:
                edge = self.edges[node.filter]
                assert edge.source == edge.target == node.id and edge.kind is EdgeKind.FILTER
            joins = node.filter is not None and self.edges[node.filter].label.joins
            assert joins == (node.id in self.joining), f"node {node.id} joins: {joins}"
            if node.stay is not None:
                edge = self.edges[node.stay]
                assert edge.source == edge.target == node.id and edge.kind is EdgeKind.STAY
                assert node.filter is not None, f"node {node.id} stays without a filter"
            if node.timeout is not None:
                edge = self.edges[node.timeout]
                assert edge.source == node.id and edge.kind is EdgeKind.TIMEOUT
            if node.id != ROOT:
                keys = []
                for edge_id in node.entering:
                    edge = self.edges[edge_id]
                    keys.append((edge.label, _SELF if edge.source == node.id else edge.source))
                if node.timeout is not None:
                    keys.append((self.edges[node.timeout].label, _TIMES_OUT))
                assert frozenset(Counter(keys).items()) == node.signature, f"node {node.id}"
                assert not node.registered or self._by_signature[node.signature] == node.id
        for edge in self.edges.values():
            assert edge.refs > 0, f"edge {edge.id} is unused"
            assert edge.source in self.nodes and edge.target in self.nodes
            assert self.nodes[edge.target].refs >= edge.refs
            assert edge.label.source == edge.label.target == 0
            target_space = self.nodes[edge.target].space
            assert edge.source == ROOT or self.nodes[edge.source].space == target_space
            assert target_space > 0, f"edge {edge.id} enters a node without a space"
        guarded: dict[tuple[int, int], list[int]] = {}
        for edge in self.edges.values():
            if edge.kind is EdgeKind.UNLESS:
                guarded.setdefault((edge.source, edge.target), []).append(edge.id)
        assert {ends: sorted(ids) for ends, ids in self.guarded.items()} == guarded
        registered = sorted(n.id for n in self.nodes.values() if n.id != ROOT and n.registered)
        assert sorted(self._by_signature.values()) == registered
        assert self.merge or not registered
