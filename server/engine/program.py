"""The engine's compiled side: the merged DAG, each edge's generated code, the FR index (Section 4).

A :class:`QueryProgram` is what subscribe and unsubscribe change and what an
epoch only reads — the part Flink CEP calls the ``NFA``, as against the
``NFAState`` (here :class:`~cesar.server.engine.state.EngineState`).  It holds

* the :class:`~cesar.server.engine.dag.QueryDag` of every subscription's
  automata, its edges templates shared by subscriptions equal up to constants;
* a *slot* per automaton (a bit of the instances' member sets), numbered
  within its DAG space (:class:`Space`: a space's masks are as wide as its
  own automata, not as all of them), its published stream, and per node the
  slots whose automaton ends there;
* per edge a :class:`CompiledEdge`: its slots' constants, grouped and indexed
  (:class:`~cesar.server.engine.params.EdgeParams`), the attribute map as
  generated code (:mod:`cesar.server.engine.codegen`) and the AI access of
  each FILTER conjunct;
* the FR index (Section 4.3) over the groups of the ∃-edges leaving the
  start node: the static atoms an event must satisfy for some slot of the
  group (its key constants and the loosest bound of each range); the same for
  the other ∃-edges, one index per source node (``fr_inner``), and the same
  atoms of every FILTER edge's groups, for the run state's AN index — all
  made of one :class:`~cesar.index.static.AtomPool`'s atoms (a group's
  conjunct repeats its template's attributes and operators and mostly
  recurring constants: pooled, 1 KB less per subscription of Table 2's Filter);
* per published stream its *rank* (one more than the highest rank it reads:
  producers run before readers within an epoch), the epoch it was subscribed
  after (and the latest such epoch ever: a match rooted after it needs no
  check), and whether it is internal (resubscription, Section 3.5); per stream
  how many automata read it, and per space the mask of the slots whose stream
  is read or internal (only their matches are fed back to the next rank);
* per node the DUR bound of its ∃-edges, after which its instances are dead;
* the clock groups (:mod:`cesar.server.engine.clocks`): the streams each
  subscription reads and publishes share event time (the engine joins them).
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from cesar.automata.automaton import (
    LOOPS,
    Automaton,
    EdgeKind,
    dur_bound,
    own_bound,
    reads_dur_only,
)
from cesar.automata.evaluate import Faults
from cesar.index.masks import without
from cesar.index.static import AtomPool, Atoms, ConjunctIndex
from cesar.server.engine.clocks import StreamGroups
from cesar.server.engine.codegen import Codegen, Values
from cesar.server.engine.dag import ROOT, Footprint, QueryDag
from cesar.server.engine.edges import CompiledEdge, access_atom, recall_key
from cesar.server.engine.options import EngineOptions
from cesar.server.engine.params import EdgeParams, Group


@dataclass
class Change:
    """What a subscribe or unsubscribe asks of the run state.

    ``deleted``: nodes gone (their instances go); ``freed``: per surviving
    node the slots that left (bitmask; they leave its instances); ``left``: the
    (space, slot) pairs that left;
    ``rebound``: nodes whose DUR bound became finite or changed (their
    deadlines are queued again); ``refiltered``: nodes whose FILTER edge's
    groups or their static atoms changed (an active one is indexed again).
    """

    deleted: list[int] = field(default_factory=list)
    freed: dict[int, int] = field(default_factory=dict)
    left: list[tuple[int, int]] = field(default_factory=list)
    rebound: set[int] = field(default_factory=set)
    refiltered: set[int] = field(default_factory=set)


@dataclass
class Space:
    """The slots of one DAG space: each slot's published stream, the free slots, the fed mask.

    ``fed``: the slots whose stream some automaton reads or that are internal
    (their matches go to the next rank, not out).
    """

    streams: dict[int, str] = field(default_factory=dict)
    free: list[int] = field(default_factory=list)
    fed: int = 0
    lent: bool = False
    """A :class:`~cesar.server.engine.matches.Match` holds ``streams`` as it is: the next
    change of a slot copies it first (a match keeps the names of its own epoch)."""

    def names(self) -> dict[int, str]:
        """``streams`` lent to a match: it stays as it is now.  O(1); the next change of a
        slot pays one copy."""
        self.lent = True
        return self.streams

    def take(self, stream: str) -> int:
        """A free slot (the lowest) for ``stream``'s automaton."""
        slot = heapq.heappop(self.free) if self.free else len(self.streams)
        self._own()
        self.streams[slot] = stream
        return slot

    def give_back(self, slot: int) -> None:
        """Free ``slot``."""
        self._own()
        del self.streams[slot]
        heapq.heappush(self.free, slot)
        self.fed = without(self.fed, 1 << slot)

    def _own(self) -> None:
        if self.lent:
            self.streams = dict(self.streams)
            self.lent = False


@dataclass
class _Subscription:
    id: str
    streams: tuple[str, ...]
    footprints: list[Footprint] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    reads: list[frozenset[str]] = field(default_factory=list)


UNINDEXED: Final = frozenset({EdgeKind.FILTER, EdgeKind.STAY, EdgeKind.TIMEOUT, EdgeKind.UNLESS})
"""Edges no event-driven FR index holds: the loops, asked about instances their node's filter
affects, TIMEOUT, which fires when time passes, and UNLESS, asked about remembered events when
an edge it guards fires."""


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
        self.fr: ConjunctIndex[Group] = ConjunctIndex()
        self.fr_inner: dict[int, ConjunctIndex[Group]] = {}
        self.statics: dict[Group, Atoms] = {}
        self.atoms = AtomPool()
        self.edges: dict[int, CompiledEdge] = {}
        self._filters: dict[int, CompiledEdge] = {}
        """Each node's FILTER edge, by node (:meth:`filter_of`: one look-up, not two)."""
        self.since: dict[str, float] = {}
        self.latest_since = -math.inf
        self.until: dict[str, float] = {}
        self.internal: set[str] = set()
        self.rank: dict[str, int] = {}
        self.read: Counter[str] = Counter()
        self.slot_of: dict[str, list[tuple[int, int]]] = {}
        """Per published stream, the (space, slot) of each automaton publishing it: one, or
        each alternative of a pattern with OR (they publish its stream without a hop)."""
        self.spaces: dict[int, Space] = {}
        self.bound: dict[int, float] = {}
        self.groups = StreamGroups()
        self.final: dict[int, int] = {}
        self._subscriptions: dict[str, _Subscription] = {}
        self._remembering: dict[str, float] | None = None
        self._codegen = Codegen(self.faults, options.functions)

    @property
    def codegen(self) -> Codegen:
        """The generated-code cache of the program's edges (the planner's lazy runs use it)."""
        return self._codegen

    @property
    def subscriptions(self) -> list[str]:
        """Ids of the live subscriptions, oldest first."""
        return list(self._subscriptions)

    def __contains__(self, subscription: str) -> bool:
        """True if ``subscription`` is live.  O(1)."""
        return subscription in self._subscriptions

    def subscribe(self, subscription: str, automata: Sequence[Automaton], since: float) -> Change:
        """Add a subscription's automata (producers first), matching events after epoch ``since``.

        Each automaton gets a slot, and its constants join each template edge
        it uses.  Returns what the run state must revisit.  Cost: O(edges added
        × log slots).  Raises ValueError for a subscription id or a published
        stream that exists.
        """
        if subscription in self._subscriptions:
            raise ValueError(f"subscription {subscription} exists")
        for published in {a.name for a in automata}:
            if published in self.since:
                raise ValueError(f"stream {published} is already published")
        record = _Subscription(subscription, tuple(a.name for a in automata))
        self._remembering = None
        change = Change()
        touched: set[int] = set()
        for automaton in automata:
            footprint = self.dag.add(automaton)
            slot = self.spaces.setdefault(footprint.space, Space()).take(automaton.name)
            record.footprints.append(footprint)
            record.slots.append(slot)
            record.reads.append(automaton.reads)
            self.final[footprint.final] = self.final.get(footprint.final, 0) | 1 << slot
            for edge_id in footprint.created_edges:
                self._compile(edge_id)
            for position, edge_id in enumerate(footprint.edges):
                compiled = self.edges[edge_id]
                edge = automaton.edges[position]
                if edge.kind in LOOPS:
                    bound = math.inf
                elif edge.kind is EdgeKind.UNLESS:
                    bound = own_bound(edge)  # how long its remembered events matter
                else:
                    bound = dur_bound(edge)
                mine = compiled.params.add(slot, footprint.constants[position], bound)
                self._index(compiled, mine, change)
                touched.add(compiled.source)
            self.since[automaton.name] = since
            self.latest_since = max(self.latest_since, since)
            if automaton.internal:
                self.internal.add(automaton.name)
            self.rank[automaton.name] = max(
                self.rank.get(automaton.name, 0),
                1 + max((self.rank.get(stream, 0) for stream in automaton.reads), default=0),
            )
            self.read.update(automaton.reads)
            self.slot_of.setdefault(automaton.name, []).append((footprint.space, slot))
            for stream in automaton.reads | {automaton.name}:
                if stream in self.slot_of and (stream in self.internal or stream in self.read):
                    for other, fed in self.slot_of[stream]:
                        self.spaces[other].fed |= 1 << fed
        self._subscriptions[subscription] = record
        touched.discard(ROOT)  # the start node holds no instances
        change.rebound = {node for node in touched if self._update_bound(node)}
        return change

    def retire(self, subscription: str, until: float) -> None:
        """Keep only the matches of a subscription rooted at or before epoch ``until`` (a plan
        that replaced it takes the others; inf: all again); its internal streams run on,
        feeding it.  KeyError for an unknown subscription."""
        stream = self._subscriptions[subscription].streams[-1]
        if until == math.inf:
            self.until.pop(stream, None)
        else:
            self.until[stream] = until

    def unsubscribe(self, subscription: str) -> Change:
        """Remove a subscription; returns what the run state must revisit.

        What only it used goes; other subscriptions are untouched.  Raises
        KeyError for an unknown subscription.
        """
        record = self._subscriptions.pop(subscription)
        self._remembering = None
        change = Change()
        touched: set[int] = set()
        deleted, freed = change.deleted, change.freed
        automata = zip(record.footprints, record.streams, record.slots, record.reads, strict=True)
        for footprint, stream, slot, reads in reversed(list(automata)):
            bit = 1 << slot
            change.left.append((footprint.space, slot))
            for edge_id in footprint.edges:
                compiled = self.edges[edge_id]
                self._index(compiled, compiled.params.remove(slot), change)
                touched.add(compiled.source)
            final = without(self.final[footprint.final], bit)
            if final:
                self.final[footprint.final] = final
            else:
                del self.final[footprint.final]
            dead_nodes, dead_edges = self.dag.remove(footprint)
            for edge_id in dead_edges:
                dead = self.edges.pop(edge_id)
                if dead.edge.kind is EdgeKind.FILTER:
                    del self._filters[dead.source]
            for node in dead_nodes:
                self.bound.pop(node, None)
                touched.discard(node)
            for node in footprint.nodes:
                if node != ROOT and node in self.dag.nodes:
                    freed[node] = freed.get(node, 0) | bit
            deleted.extend(dead_nodes)
            publishers = self.slot_of[stream]
            publishers.remove((footprint.space, slot))
            if not publishers:
                del self.since[stream], self.rank[stream], self.slot_of[stream]
                self.until.pop(stream, None)
            for read in reads:
                self.read[read] -= 1
                if not self.read[read]:
                    del self.read[read]
                    if read in self.slot_of and read not in self.internal:
                        for other, fed in self.slot_of[read]:
                            self.spaces[other].fed = without(self.spaces[other].fed, 1 << fed)
            mine = self.spaces[footprint.space]
            mine.give_back(slot)
            if not mine.streams:
                del self.spaces[footprint.space]
            if stream not in self.slot_of:
                self.internal.discard(stream)
        touched.discard(ROOT)
        change.rebound = {n for n in touched if n in self.dag.nodes and self._update_bound(n)}
        change.refiltered -= set(deleted)
        return change

    def owners(self) -> dict[tuple[int, int], str]:
        """Each (space, slot)'s subscription id."""
        return {
            (footprint.space, slot): record.id
            for record in self._subscriptions.values()
            for footprint, slot in zip(record.footprints, record.slots, strict=True)
        }

    def placements(self) -> list[tuple[str, int, Footprint, int]]:
        """Every automaton: (subscription, its index in the subscription, footprint, slot)."""
        return [
            (record.id, index, footprint, slot)
            for record in self._subscriptions.values()
            for index, (footprint, slot) in enumerate(
                zip(record.footprints, record.slots, strict=True)
            )
        ]

    def placement(self, subscription: str, index: int) -> tuple[Footprint, int] | None:
        """The footprint and slot of a subscription's ``index``-th automaton (None: not here)."""
        record = self._subscriptions.get(subscription)
        if record is None or index >= len(record.footprints):
            return None
        return record.footprints[index], record.slots[index]

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
        return self._filters[node]

    def values_of(self, compiled: CompiledEdge) -> Values:
        """``compiled``'s map as a function making a match's values (:meth:`Codegen.values`),
        generated and kept on the edge the first time it is asked for."""
        if compiled.values is None:
            compiled.values = self._codegen.values(compiled.edge.map)
        return compiled.values

    def timeout_of(self, node: int) -> CompiledEdge | None:
        """The TIMEOUT edge of ``node``, if it has one."""
        timeout_id = self.dag.nodes[node].timeout
        return None if timeout_id is None else self.edges[timeout_id]

    def remembering(self) -> dict[str, float]:
        """Per stream some UNLESS edge reads, how many ticks back its events matter (the
        largest own-duration bound, less one).  O(1), O(UNLESS edges) after a change."""
        if self._remembering is not None:
            return self._remembering
        out: dict[str, float] = {}
        for guards in self.dag.guarded.values():
            for edge_id in guards:
                compiled = self.edges[edge_id]
                stream = compiled.edge.stream
                out[stream] = max(out.get(stream, -math.inf), compiled.params.dur_bound() - 1)
        self._remembering = out
        return out

    def stay_of(self, node: int) -> CompiledEdge | None:
        """The STAY edge of ``node``, if it has one."""
        stay_id = self.dag.nodes[node].stay
        return None if stay_id is None else self.edges[stay_id]

    def filter_groups(self, node: int) -> list[Group]:
        """The groups of ``node``'s FILTER edge (for the run state's AN index)."""
        return list(self.filter_of(node).params.all_groups())

    def _index(self, compiled: CompiledEdge, groups: list[Group], change: Change) -> None:
        """Bring the static atoms of ``groups`` up to date (an empty group leaves).

        The groups of ∃-edges leaving the start node live in the FR index, those
        of other ∃-edges in their source node's ``fr_inner`` index (probed only
        for a node with many leaving edges, once its filter let some slots
        go); a FILTER edge's change is passed on in ``change.refiltered`` (the
        AN index holds only active nodes).  A STAY edge's groups are in no
        index: it is asked only about the instances its node's filter affects.
        """
        filters = compiled.edge.kind is EdgeKind.FILTER
        loops = compiled.edge.kind in UNINDEXED
        source = compiled.source
        if source == ROOT:
            index = self.fr
        elif not loops:
            index = self.fr_inner.setdefault(source, ConjunctIndex())
        for group in groups:
            known = self.statics.get(group)
            if not group.mask:
                self.atoms.release(self.statics.pop(group))
                if filters:
                    change.refiltered.add(source)
                elif not loops:
                    index.remove(group)
                continue
            atoms = compiled.params.statics(group)
            if atoms == known:
                continue
            if known is not None:
                self.atoms.release(known)
            atoms = self.statics[group] = self.atoms.hold(atoms)
            if loops:
                if filters:
                    change.refiltered.add(source)
                continue
            if known is not None:
                index.remove(group)
            index.add(group, compiled.edge.stream, (atoms,))
        if source != ROOT and not loops and not len(index):
            del self.fr_inner[source]

    def _compile(self, edge_id: int) -> None:
        dag_edge = self.dag.edges[edge_id]
        edge = dag_edge.label
        params = EdgeParams(edge_id, edge, self._codegen, self.faults, self.options.small_group)
        compiled = CompiledEdge(
            edge, dag_edge.source, dag_edge.target, params, self.dag.nodes[dag_edge.target]
        )
        compiled.dur_only = reads_dur_only(edge)
        compiled.keeps_end, compiled.rebinds = edge.keeps_end, edge.kind is EdgeKind.REBIND
        if edge.kind is EdgeKind.FILTER:
            self._filters[dag_edge.source] = compiled
            accesses = tuple(access_atom(c.dynamic) for c in edge.conjuncts)
            waits = tuple(
                self.options.waiting and plan.threshold is not None for plan in params.plans
            )
            compiled.wait_keys = tuple(
                access if wait and access is not None and access.op == "=" else None
                for access, wait in zip(accesses, waits, strict=True)
            )
            compiled.accesses = tuple(
                None if wait else access for access, wait in zip(accesses, waits, strict=True)
            )
        elif edge.kind is EdgeKind.UNLESS:
            compiled.recall = recall_key(edge)
        elif edge.kind not in (EdgeKind.STAY, EdgeKind.UNLESS):
            compiled.build = self._codegen.build(edge.map)
        self.edges[edge_id] = compiled

    def _update_bound(self, node: int) -> bool:
        """Recompute the node's DUR bound; True if it is finite and changed."""
        dag_node = self.dag.nodes[node]
        timed = [dag_node.timeout] if dag_node.timeout is not None else []
        edges = [*dag_node.leaving, *timed]
        bound = max((self.edges[e].params.dur_bound() for e in edges), default=math.inf)
        if bound == self.bound.get(node, math.inf):
            return False  # the queued deadlines are still right
        if bound == math.inf:
            del self.bound[node]
            return False
        self.bound[node] = bound
        return True

    def check_valid(self) -> None:
        """Assert every invariant of the DAG, the compiled edges, the slots and the index."""
        self.dag.check_valid()
        self.fr.check_valid()
        for node, inner_index in self.fr_inner.items():
            inner_index.check_valid()
            assert len(inner_index) and node in self.dag.nodes, f"fr_inner of node {node}"
        assert set(self.edges) == set(self.dag.edges)
        assert all(c.target_node is self.dag.nodes[c.target] for c in self.edges.values())
        assert self._filters == {
            node.id: self.edges[node.filter]
            for node in self.dag.nodes.values()
            if node.filter is not None
        }
        groups = starting = inner = 0
        for edge_id, compiled in self.edges.items():
            compiled.params.check_valid()
            assert compiled.params.all, f"edge {edge_id} has no slots"
            loops = compiled.edge.kind in UNINDEXED
            for group in compiled.params.all_groups():
                assert self.statics[group] == compiled.params.statics(group)
                assert group.edge == edge_id
                groups += 1
                if not loops:
                    starting += compiled.source == ROOT
                    inner += compiled.source != ROOT
                    if compiled.source == ROOT:
                        assert group in self.fr
                    else:
                        assert group in self.fr_inner[compiled.source]
        assert len(self.statics) == groups
        self.atoms.check_valid(self.statics.values())
        assert len(self.fr) == starting
        assert sum(len(i) for i in self.fr_inner.values()) == inner
        assert set(self.since) == set(self.rank) >= self.internal
        reads = Counter(s for r in self._subscriptions.values() for a in r.reads for s in a)
        assert self.read == reads
        slots: dict[str, set[tuple[int, int]]] = {}
        for space_id, space in self.spaces.items():
            for slot, stream in space.streams.items():
                slots.setdefault(stream, set()).add((space_id, slot))
        assert slots == {stream: set(places) for stream, places in self.slot_of.items()}
        fed: dict[int, int] = {}
        for stream, places in self.slot_of.items():
            if stream in self.internal or stream in self.read:
                for space_id, slot in places:
                    fed[space_id] = fed.get(space_id, 0) | 1 << slot
        for space_id, space in self.spaces.items():
            assert space.streams, f"space {space_id} is empty"
            assert space.fed == fed.get(space_id, 0)
            assert not set(space.free) & set(space.streams)
            assert all(0 <= slot < len(space.streams) + len(space.free) for slot in space.free)
        assert set(self.bound) <= set(self.dag.nodes)
        assert set(self.slot_of) == set(self.since)
        union: dict[int, int] = {}
        for node, mask in self.final.items():
            space_id = self.dag.nodes[node].space
            known = union.get(space_id, 0)
            assert mask and not mask & known
            union[space_id] = known | mask
        for space_id, space in self.spaces.items():
            assert union.get(space_id, 0).bit_count() == len(space.streams)
        for compiled in self.edges.values():
            space = self.spaces[self.dag.nodes[compiled.target].space]
            assert all(slot in space.streams for slot in compiled.params.slots)
