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

from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from cesar.automata.schema import Event, Value
from cesar.index.thresholds import Thresholds
from cesar.server.engine.codegen import ThresholdOf
from cesar.server.engine.edges import CompiledEdge
from cesar.server.engine.options import EngineOptions
from cesar.server.engine.params import Group
from cesar.server.engine.program import QueryProgram
from cesar.server.engine.state import EngineInstance, EngineState, Waiting
from cesar.server.engine.stepping import GroupSteps, Step
from cesar.server.engine.work import Work

_NO_FILES: Final[Mapping[Value | None, Thresholds[Waiting]]] = {}
_EMPTY: Final[Mapping[str, Value]] = {}

Firing = list[tuple[CompiledEdge, list[Group]]]
Fork = tuple[EngineInstance, Step, CompiledEdge]
Affected = tuple[int, list[tuple[EngineInstance, int]], Firing | None, list[Fork]]
"""A node an event touches: its affected instances with their slots, the edges that can fire
(None: not worked out yet) and the instances that first take a step of the same epoch their
group recorded lazily (:mod:`.stepping`)."""


class Probe:
    """The reading half of an epoch's round: what one event fires and affects."""

    def __init__(
        self,
        program: QueryProgram,
        state: EngineState,
        options: EngineOptions,
        work: Work,
    ) -> None:
        self.program = program
        self.state = state
        self.options = options
        self.work = work

    def firing(self, node: int, stream: str, attrs: Mapping[str, Value]) -> Firing:
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

    def affected(self, event: Event, attrs: Mapping[str, Value], own: int) -> Iterator[Affected]:
        """The active nodes the event may touch and, for each, its affected instances and slots.

        An instance's affected slots are those of its members for which the
        event satisfies the node's filter; those slots leave the node.  A group
        of a node that steps records the event as a step instead, when it can
        (:meth:`_steps`); else its lazy instances take what they owe and are affected.
        Each instance tested is charged to its members (:mod:`.work`), and the slots cut
        in this epoch are tested no more.
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
        nothing: dict[EngineInstance, None] = {}
        waits: list[tuple[Group, tuple[str, str, ThresholdOf], EngineInstance]] = []
        waiting_on = self.options.waiting
        joining = self.program.dag.joining
        stepped = self.state.stepped
        work = self.work
        charging = work.charging
        spaces = self.program.dag.nodes
        for node, groups in nodes.items():
            space = spaces[node].space
            allowed = work.allowed(space) if charging else -1
            index = live[node]
            accesses = index.accesses
            wait_keys = self.program.filter_of(node).wait_keys
            joins = node in joining
            affected: dict[EngineInstance, int] = {}
            firing: Firing | None = None
            forks: list[Fork] = []
            for group in groups:
                params, entry = group.params, group.entry
                mask = (entry if entry >= 0 else 1 << ~entry) & allowed  # Group.mask, inline
                if not mask:
                    continue
                if not indices:
                    candidates: Iterable[EngineInstance] = index.instances()
                elif accesses[group.conjunct] is not None:
                    candidates = index.probe(group.conjunct, attrs)
                else:
                    threshold = params.plans[group.conjunct].threshold if waiting_on else None
                    filed = by_group.get(group, nothing)
                    if threshold is None:
                        candidates = filed
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
                            (space, allowed) if charging else None,
                        )
                        candidates = list(filed)
                        waits.extend((group, threshold, instance) for instance in candidates)
                steps = stepped.get(group) if stepped else None
                if steps is not None:
                    if firing is None:
                        firing = self.firing(node, event.stream, attrs)
                    if not self._steps(node, group, steps, firing, event, attrs, own):
                        candidates = [*candidates, *self._owed(steps, event, forks)]
                for instance in candidates:
                    touched += 1
                    members = instance.members & mask
                    if charging and work.cut:
                        members &= work.allowed(space)
                    if not members:
                        continue
                    if charging:
                        work.charge(space, members)
                    if joins:
                        dur = joined_dur(instance, event)
                    elif t0 <= instance.t1:
                        continue
                    else:
                        dur = t1 - instance.t0 + 1
                    slots = params.holds_one(group, members, instance.binding, attrs, dur, own)
                    if slots:
                        affected[instance] = affected.get(instance, 0) | slots
            # First probed, an instance waits in the group by its thresholds (all its slots:
            # those that leave now also meet the other events of the epoch).  Only groups
            # without a wait key have instances filed: under a key they wait from their start.
            for group, (_, op, _), instance in waits:
                entries = group.params.thresholds(group, instance.members, instance.binding)
                self.state.wait(instance, group, None, op, entries)
            waits.clear()
            if affected or forks:
                yield node, list(affected.items()), firing, forks
        counters.instances_touched += touched

    def _steps(
        self,
        node: int,
        group: Group,
        steps: GroupSteps,
        firing: Firing,
        event: Event,
        attrs: Mapping[str, Value],
        own: int,
    ) -> bool:
        """Record ``event`` as a step of ``group``'s lazy instances if it moves every one of
        them only through the REBIND: a point event, the group's first step of its epoch,
        whose filter holds for all its slots (DUR holds for a live one), and no other edge
        of the node may fire for them (one that reads of a run only its DUR is asked with
        the event; another may fire if it has a group of their key).  O(edges that may fire)."""
        t1 = event.t1
        if event.t0 != t1 or steps.eager == t1 or steps.this_epoch(t1) is not None:
            return False
        if event.stream in self.program.rank:  # a derived event: its root is not its epoch
            return False
        mask = group.mask
        params = self.program.filter_of(node).params
        if params.holds_one(group, mask, _EMPTY, attrs, 1, own) != mask:
            return False
        for compiled, groups in firing:
            if compiled is steps.rebind or not any(g.mask & mask for g in groups):
                continue
            if not compiled.dur_only:
                return False
            if compiled.params.holds(groups, mask, _EMPTY, attrs, 1, own):
                return False
        steps.record(Step(event, attrs, t1))  # an input event's root is its epoch
        self.state.counters.steps_shared += 1
        return True

    def _owed(self, steps: GroupSteps, event: Event, forks: list[Fork]) -> list[EngineInstance]:
        """The lazy instances of a group an event moves eagerly, each first given the steps it
        owes from earlier epochs (one that faults ends there and goes); one this epoch's step
        has yet to move goes to ``forks``.  The group's instances then owe nothing, and move
        eagerly for the rest of the epoch.  O(instances × steps owed)."""
        t1 = event.t1
        now = steps.this_epoch(t1)
        state = self.state
        index = state.live[steps.rebind.source]
        took, ended = steps.settle_all(t1, index)
        state.counters.settled += took
        moving = [i for i in steps.files if i not in ended]
        if now is not None:
            forks.extend((i, now, steps.rebind) for i in moving if now.event.t0 > i.t1)
        steps.history.clear()
        steps.eager = float(t1)
        for instance in ended:
            state.remove(instance)
        return moving

    def _waiting(
        self,
        group: Group,
        key: Value | None,
        threshold: tuple[str, str, ThresholdOf],
        event: Event,
        attrs: Mapping[str, Value],
        own: int,
        affected: dict[EngineInstance, int],
        joins: bool,
        charged: tuple[int, int] | None,
    ) -> int:
        """Add to ``affected`` the waiting instances of ``group`` the event completes
        (``joins``: the group's node joins); ``key``: the event's value of the group's
        wait key (None: it has none).

        The threshold index of the group's instances under ``key`` gives the
        (instance, tuple) entries whose threshold the event's value passes; each
        is verified whole, and charged to its members (``charged``: the node's space and
        the slots not cut, None when nothing is charged).  An entry whose instance has no
        slot of its tuple left goes.  Returns the entries touched.  O(log n + entries
        passed).
        """
        file = self.state.waiting.get(group, _NO_FILES).get(key)
        if file is None:
            return 0
        attr = threshold[0]
        t0, t1 = event.t0, event.t1
        stale = []
        touched = 0
        work = self.work
        for waiting in file.probe(attrs[attr]):
            touched += 1
            instance = waiting.instance
            members = instance.members & waiting.entry.mask
            if not members:
                stale.append(waiting)
                continue
            if charged is not None:
                space, allowed = charged
                if not (members := members & allowed & work.allowed(space)):
                    continue
                work.charge(space, members)
            if joins:
                dur = joined_dur(instance, event)
            elif t0 <= instance.t1:
                continue
            else:
                dur = t1 - instance.t0 + 1
            slots = group.params.holds_tuple(
                group, waiting.entry, members, instance.binding, attrs, dur, own
            )
            if slots:
                affected[instance] = affected.get(instance, 0) | slots
        for waiting in stale:
            self.state.stop_waiting(waiting)
        return touched


def joined_dur(instance: EngineInstance, event: Event) -> int:
    """DUR of an instance at a joining node and an event: from the earlier start to the later
    end (the event may start before the instance ends)."""
    return max(event.t1, instance.t1) - min(event.t0, instance.t0) + 1
