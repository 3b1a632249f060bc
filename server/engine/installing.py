"""Making instances live (Section 4.3's install step): activation, filing, waiting, limits.

An :class:`Installer` brings the run state in line with what an epoch's round made: a new
instance goes live at its node (activating the node: its AI index, and its place in AN or
under its instances' bound values), is filed by the filter groups it meets, waits by
threshold under its wait key at once; an instance that moved on loses the slots that left;
and the instance limits, per subscription and engine-wide, drop the oldest, with one notice
per episode.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Protocol

from cesar.index.ai import InstanceAccess
from cesar.index.masks import slots_of, without
from cesar.server.engine.edges import CompiledEdge
from cesar.server.engine.options import EngineOptions
from cesar.server.engine.params import Group
from cesar.server.engine.program import QueryProgram
from cesar.server.engine.state import EngineInstance, EngineState, Notice
from cesar.server.engine.stepping import Steppers


class Installer:
    """The writing half of an epoch's round: instances made live, moved on, limited."""

    def __init__(
        self, program: QueryProgram, state: EngineState, options: EngineOptions, steppers: Steppers
    ) -> None:
        self.program = program
        self.state = state
        self.options = options
        self.steppers = steppers

    def activate(self, node: int) -> None:
        program = self.program
        compiled = program.filter_of(node)
        groups = program.filter_groups(node)
        self.state.activate(
            node,
            compiled.accesses,
            compiled.edge.stream,
            groups,
            program.statics,
            self.key(compiled, groups),
        )

    def key(self, compiled: CompiledEdge, groups: list[Group]) -> InstanceAccess | None:
        """The equality by which a node is reached through its instances' bound values: one
        shared by every conjunct of its filter, none of whose groups has a static atom (AN
        would return the node for every event).  None: the node goes in the AN index."""
        if not self.options.indices:
            return None
        keys = {
            access if access is not None and access.op == "=" else wait
            for access, wait in zip(compiled.accesses, compiled.wait_keys, strict=True)
        }
        if len(keys) != 1 or any(self.program.statics[g] for g in groups):
            return None
        (key,) = keys
        return key

    def install(
        self,
        leaving: Mapping[EngineInstance, int],
        spawned: list[tuple[EngineInstance, EngineInstance | None]],
    ) -> None:
        """Add the new instances; take the affected slots out of theirs (an empty one goes).

        A REBIND successor that carries every member of its instance, all of
        which leave, takes the instance's place instead (same node, members
        and start: only the binding, end and root change), once per instance
        — a μ run that extends keeps its index entries and deadline.  Other
        new instances come first: a node whose last instance moves on and
        gets a successor in the same epoch stays active, instead of leaving
        the AN index and entering it again.
        """
        state = self.state
        kept: set[EngineInstance] = set()
        homes_of: dict[tuple[int, int], list[Group]] = {}  # instances spawned together share
        for instance, parent in spawned:
            if (
                parent is not None
                and parent.node == instance.node
                and parent not in kept
                and leaving[parent] == parent.members == instance.members
            ):
                kept.add(parent)
                state.rebind(parent, instance)
                self.wait_by_key(parent)
                continue
            self.admit(instance, homes_of)
        for left, slots in leaving.items():
            if left not in kept:
                state.leave(left, slots)
        self.enforce_limits(bool(spawned))

    def admit(self, instance: EngineInstance, homes_of: dict[tuple[int, int], list[Group]]) -> None:
        """Make a new instance live at its node (activating it); ``homes_of`` caches, per
        (node, members), the filter groups it is filed under.  O(conjuncts × log n + homes)."""
        program, node = self.program, instance.node
        if node not in self.state.live:
            self.activate(node)
        homes = homes_of.get((node, instance.members))
        if homes is None:
            compiled = program.filter_of(node)
            homes = homes_of[node, instance.members] = [
                group
                for conjunct, access in enumerate(compiled.accesses)
                if access is None
                for group in compiled.params.groups_meeting(instance.members, conjunct)
            ]
        rebind = self.steppers.lazy(node, instance.members, homes)
        self.state.add(instance, program.bound.get(node), program.clock_group(node), homes, rebind)
        self.wait_by_key(instance)

    def wait_by_key(self, instance: EngineInstance) -> None:
        """Let an instance wait by threshold under its bound value of each conjunct's wait key
        at once: an event of another key never meets it (without a key, an instance waits
        once an event of its group first probes it).  O(groups × tuples × log n)."""
        compiled = self.program.filter_of(instance.node)
        for conjunct, key in enumerate(compiled.wait_keys):
            if key is None:
                continue
            params = compiled.params
            threshold = params.plans[conjunct].threshold
            assert threshold is not None
            bound = instance.binding[key.bound]
            for group in params.groups_meeting(instance.members, conjunct):
                entries = params.thresholds(group, instance.members, instance.binding)
                self.state.wait(instance, group, bound, threshold[1], entries)

    def enforce_limits(self, gained: bool) -> None:
        """Drop the oldest instances over the engine's limit (``max_instances``); notify the
        users of their nodes once per episode, which ends once the engine has ``gained``
        instances in a round and holds at most half its limit."""
        state = self.state
        instances = state.instances
        total = self.options.max_instances
        if total is not None and len(instances) > total:
            excess = list(islice(instances.values(), len(instances) - total))
            for instance in excess:
                state.remove(instance)
            state.counters.dropped += len(excess)
            if not state.capped:
                state.capped = True
                reason = f"the engine exceeded {total} live instances"
                for subscription in self.program.users({i.node for i in excess}):
                    state.notices.append(Notice(subscription, _dropped(reason)))
        elif gained and (total is None or len(instances) <= total // 2):
            state.capped = False

    def hold(self, owners: Places) -> None:
        """Hold each subscription to ``max_instances_per_subscription`` live instances, an
        instance shared by several counted whole for each: a subscription over it leaves its
        oldest instances (the others sharing one keep it), one notice per episode, which
        ends once it holds at most half its limit.  ``owners`` gives the subscription of
        each (space, slot) and each subscription's slots.

        O(1) while the engine holds no more than the limit in all; else O(distinct (node,
        members) pairs × their slots), and for a subscription over it, O(its nodes + the
        instances it leaves).  The pairs are counted from the first time the engine holds more
        than the limit (O(instances) then) until it holds at most half of it."""
        limit = self.options.max_instances_per_subscription
        state = self.state
        if limit is None or len(state.instances) <= limit:
            if limit is not None and len(state.instances) <= limit // 2:
                state.held_over.clear()
                state.uncounted()
            return
        nodes = self.program.dag.nodes
        held: Counter[str] = Counter()
        where: dict[str, set[int]] = {}
        for (node, members), count in state.counted().items():
            space = nodes[node].space
            for slot in slots_of(members):
                subscription = owners.owner(space, slot)
                held[subscription] += count
                where.setdefault(subscription, set()).add(node)
        state.held_over &= {s for s, n in held.items() if n > limit // 2}
        over = sorted(s for s, n in held.items() if n > limit)
        dropped = 0
        for subscription in over:
            places = owners.places(subscription)
            dropped += self._drop_oldest(places, held[subscription] - limit, where[subscription])
        state.counters.dropped += dropped
        for subscription in over:
            if subscription not in state.held_over:
                state.held_over.add(subscription)
                reason = f"it exceeded {limit} live instances (max_instances_per_subscription)"
                state.notices.append(Notice(subscription, _dropped(reason)))

    def _drop_oldest(self, places: Iterable[tuple[int, int]], excess: int, where: set[int]) -> int:
        """Take a subscription's ``places`` (space, slot) out of its ``excess`` oldest
        instance-slots, oldest first (by id) across the nodes ``where`` it holds instances;
        returns how many instances went (no member left).  O(what it looks at)."""
        state, nodes = self.state, self.program.dag.nodes
        mine: dict[int, int] = {}  # per space, the subscription's slots
        for space, slot in places:
            mine[space] = mine.get(space, 0) | 1 << slot
        oldest = heapq.merge(
            *(state.live[node].oldest() for node in sorted(where)), key=_instance_id
        )
        leaving: list[tuple[EngineInstance, int]] = []
        for instance in oldest:
            slots = instance.members & mine.get(nodes[instance.node].space, 0)
            if slots:
                leaving.append((instance, slots))
                excess -= slots.bit_count()
                if excess <= 0:
                    break
        gone = 0
        for instance, slots in leaving:
            gone += not without(instance.members, slots)
            state.leave(instance, slots)
        return gone

    # -------------------------------------------------------------- inspection


class Places(Protocol):
    """Who owns which slot: :class:`~cesar.server.engine.work.Work` answers both ways."""

    def owner(self, space: int, slot: int) -> str:
        """The subscription holding ``slot`` of ``space``."""
        ...

    def places(self, subscription: str) -> list[tuple[int, int]]:
        """The (space, slot) pairs ``subscription`` holds."""
        ...


def _instance_id(instance: EngineInstance) -> int:
    return instance.id


def _dropped(reason: str) -> str:
    """A notice's text for instances dropped for ``reason``."""
    return f"{reason}; the oldest partial matches are dropped (one notice until it recovers)"
