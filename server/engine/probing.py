"""Which instances an event affects (Section 4.3): the ∃-edges that can fire, the nodes it
reaches and, at each, the instances whose filter it satisfies, with their slots.

A :class:`Probe` reads the engine's compiled program and run state; it changes nothing but
the counters and the threshold files it tidies (an entry whose slots have left goes the first
time it is met) and the instances it files by threshold on their first probe.

* FR: the start edges' groups an event satisfies (the engine's round, not here);
* AN: the active nodes whose filter groups' static atoms the event satisfies, and the keyed
  nodes holding its value of their key (:class:`~cesar.index.keyed.KeyedItems`);
* AI: at each node, per group, the instances the event may affect — by the AI cluster of the
  group's conjunct, by threshold (per wait-key value), or every instance filed under the
  group; each verified whole against the group's slots.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from cesar.automata.schema import Event, Value
from cesar.index.thresholds import Thresholds
from cesar.server.engine.codegen import ThresholdOf
from cesar.server.engine.params import Group
from cesar.server.engine.program import CompiledEdge, EngineOptions, QueryProgram
from cesar.server.engine.state import EngineInstance, EngineState, Waiting

_NO_FILES: Mapping[Value | None, Thresholds[Waiting]] = {}


class Probe:
    """The reading half of an epoch's round: what one event fires and affects."""

    def __init__(self, program: QueryProgram, state: EngineState, options: EngineOptions) -> None:
        self.program = program
        self.state = state
        self.options = options

    def firing(
        self, node: int, stream: str, attrs: Mapping[str, Value]
    ) -> list[tuple[CompiledEdge, list[Group]]]:
        """The ∃-edges leaving ``node`` that can fire, each with the groups the event may satisfy.

        A node with few leaving edges finds each one's groups by the event's
        key values; one with many (a shared prefix that thousands of
        different shapes extend) probes the node's own inner FR index.
        O(min(leaving edges, their groups' hits)).
        """
        edges = self.program.edges
        leaving = self.program.dag.nodes[node].leaving
        firing = []
        if len(leaving) <= self.options.few_leaving:
            for edge_id in leaving:
                compiled = edges[edge_id]
                groups = compiled.params.matching_groups(attrs)
                if groups:
                    firing.append((compiled, groups))
            return firing
        index = self.program.fr_inner.get(node)
        if index is None:
            return firing
        mine: dict[int, list[Group]] = {}
        for group in index.probe(stream, attrs):
            mine.setdefault(group.edge, []).append(group)
        return [(edges[e], mine[e]) for e in sorted(mine)]

    def affected(
        self, event: Event, attrs: Mapping[str, Value], own: int
    ) -> Iterable[tuple[int, list[tuple[EngineInstance, int]]]]:
        """The active nodes the event may touch and, for each, its affected instances and slots.

        An instance's affected slots are those of its members for which the
        event satisfies the node's filter; those slots leave the node.
        """
        counters = self.state.counters
        live = self.state.live
        indices = self.options.indices
        nodes: dict[int, list[Group]] = {}
        if indices:
            an_groups = self.state.an_groups
            for node, positions in self.state.an.probe(event.stream, attrs).items():
                groups = an_groups[node]
                nodes[node] = [groups[p] for p in positions] if len(groups) > 1 else groups
            for node in self.state.by_value.probe(event.stream, attrs):
                nodes[node] = an_groups[node]
        else:
            # Every automaton looks at every event: all nodes are visited, each instance checked.
            for dag_node in self.program.dag.nodes.values():
                if dag_node.filter is None:
                    continue
                compiled = self.program.edges[dag_node.filter]
                if compiled.edge.stream == event.stream:
                    counters.nodes_visited += 1
                    if dag_node.id in live:
                        nodes[dag_node.id] = compiled.params.matching_groups(attrs)
        counters.nodes_touched += len(nodes)
        touched = 0
        t0, t1 = event.t0, event.t1
        by_group = self.state.by_group
        nothing: dict[int, EngineInstance] = {}
        waits: list[tuple[Group, tuple[str, str, ThresholdOf], EngineInstance]] = []
        waiting_on = self.options.waiting
        joining = self.program.dag.joining
        filter_of = self.program.filter_of
        for node, groups in nodes.items():
            index = live[node]
            accesses = index.accesses
            wait_keys = filter_of(node).wait_keys
            joins = node in joining
            affected: dict[int, tuple[EngineInstance, int]] = {}
            for group in groups:
                holds, entry = group.params.holds, group.entry
                mask = entry if entry >= 0 else 1 << ~entry  # Group.mask, inline
                if not indices:
                    candidates: Iterable[EngineInstance] = index.instances()
                elif accesses[group.conjunct] is not None:
                    candidates = index.probe(group.conjunct, attrs)
                else:
                    threshold = group.params.plans[group.conjunct].threshold if waiting_on else None
                    filed = by_group.get(group, nothing)
                    if threshold is None:
                        candidates = filed.values()
                    else:
                        key = wait_keys[group.conjunct]
                        touched += self._waiting(
                            group,
                            None if key is None else attrs[key.attr],
                            threshold,
                            event,
                            attrs,
                            own,
                            affected,
                            joins,
                        )
                        candidates = list(filed.values())
                        waits.extend((group, threshold, instance) for instance in candidates)
                for instance in candidates:
                    touched += 1
                    members = instance.members & mask
                    if not members:
                        continue
                    if joins:
                        dur = joined_dur(instance, event)
                    elif t0 <= instance.t1:
                        continue
                    else:
                        dur = t1 - instance.t0 + 1
                    slots = holds((group,), members, instance.binding, attrs, dur, own)
                    if slots:
                        known = affected.get(instance.id)
                        affected[instance.id] = (instance, slots | (known[1] if known else 0))
            # First probed, an instance waits in the group by its thresholds (all its slots:
            # those that leave now also meet the other events of the epoch).  Only groups
            # without a wait key have instances filed: under a key they wait from their start.
            for group, (_, op, _), instance in waits:
                entries = group.params.thresholds(group, instance.members, instance.binding)
                self.state.wait(instance, group, None, op, entries)
            waits.clear()
            if affected:
                yield node, list(affected.values())
        counters.instances_touched += touched

    def _waiting(
        self,
        group: Group,
        key: Value | None,
        threshold: tuple[str, str, ThresholdOf],
        event: Event,
        attrs: Mapping[str, Value],
        own: int,
        affected: dict[int, tuple[EngineInstance, int]],
        joins: bool,
    ) -> int:
        """Add to ``affected`` the waiting instances of ``group`` the event completes
        (``joins``: the group's node joins); ``key``: the event's value of the group's
        wait key (None: it has none).

        The threshold index of the group's instances under ``key`` gives the
        (instance, tuple) entries whose threshold the event's value passes; each
        is verified whole.  An entry whose instance has no slot of its tuple
        left goes.  Returns the entries touched.  O(log n + entries passed).
        """
        file = self.state.waiting.get(group, _NO_FILES).get(key)
        if file is None:
            return 0
        attr = threshold[0]
        holds_tuple = group.params.holds_tuple
        t0, t1 = event.t0, event.t1
        stale = []
        touched = 0
        for waiting in file.probe(attrs[attr]):
            touched += 1
            instance = waiting.instance
            members = instance.members & waiting.entry.mask
            if not members:
                stale.append(waiting)
                continue
            if joins:
                dur = joined_dur(instance, event)
            elif t0 <= instance.t1:
                continue
            else:
                dur = t1 - instance.t0 + 1
            slots = holds_tuple(group, waiting.entry, members, instance.binding, attrs, dur, own)
            if slots:
                known = affected.get(instance.id)
                affected[instance.id] = (instance, slots | (known[1] if known else 0))
        for waiting in stale:
            self.state.stop_waiting(waiting)
        return touched


def joined_dur(instance: EngineInstance, event: Event) -> int:
    """DUR of an instance at a joining node and an event: from the earlier start to the later
    end (the event may start before the instance ends)."""
    return max(event.t1, instance.t1) - min(event.t0, instance.t0) + 1
