"""Making instances live (Section 4.3's install step): activation, filing, waiting, limits.

An :class:`Installer` brings the run state in line with what an epoch's round made: a new
instance goes live at its node (activating the node: its AI index, and its place in AN or
under its instances' bound values), is filed by the filter groups it meets, waits by
threshold under its wait key at once; an instance that moved on loses the slots that left;
and the per-node and engine-wide instance limits drop the oldest, with one notice per episode.
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.index.ai import InstanceAccess
from cesar.server.engine.params import Group
from cesar.server.engine.program import CompiledEdge, EngineOptions, QueryProgram
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
        leaving: Mapping[int, int],
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
        kept: set[int] = set()
        homes_of: dict[tuple[int, int], list[Group]] = {}  # instances spawned together share
        for instance, parent in spawned:
            if (
                parent is not None
                and parent.node == instance.node
                and parent.id not in kept
                and leaving[parent.id] == parent.members == instance.members
            ):
                kept.add(parent.id)
                state.rebind(parent, instance)
                self.wait_by_key(parent)
                continue
            self.admit(instance, homes_of)
        for instance_id, slots in leaving.items():
            if instance_id in kept:
                continue
            instance = state.instances[instance_id]
            instance.members &= ~slots
            if not instance.members:
                state.remove(instance)
        self.enforce_limits({i.node for i, _ in spawned})

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

    def enforce_limits(self, nodes: set[int]) -> None:
        """Drop the oldest instances over a limit; notify once per episode over it.

        A node's limit is ``max_instances_per_node`` for each slot its filter
        serves: a node shared by a thousand subscriptions may hold what a
        thousand unshared nodes could (and one shared instance stands for many
        of theirs).  A node (or the engine) that goes over its limit notifies
        the subscriptions using it once; it notifies again only after it has
        recovered: it gained instances in an epoch and held at most half its
        limit, so one hovering at the limit is told once, not at every crossing.
        """
        live, instances, capped = self.state.live, self.state.instances, self.state.capped
        per_node = self.options.max_instances_per_node
        if per_node is not None:
            for node in nodes:
                index = live.get(node)
                limit = per_node * self.program.filter_of(node).params.all.bit_count()
                held = 0 if index is None else len(index)
                if held > limit:
                    assert index is not None
                    excess = index.instances()[: held - limit]
                    reason = f"node {node} exceeded {limit} live instances ({per_node} a query)"
                    self._drop(excess, node, reason)
                elif held <= limit // 2:
                    capped.discard(node)
        total = self.options.max_instances
        if total is not None and len(instances) > total:
            excess = list(instances.values())[: len(instances) - total]
            self._drop(excess, None, f"the engine exceeded {total} live instances")
        elif nodes and (total is None or len(instances) <= total // 2):
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
