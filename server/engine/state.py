"""The engine's run state: live instances, the AN and AI indices, deadlines, counters (Section 4.3).

An :class:`EngineState` is plain data that an epoch advances — the part Flink
CEP calls ``NFAState``, as against the compiled ``NFA`` (here
:class:`~cesar.server.engine.program.QueryProgram`):

* each live :class:`EngineInstance` (a partial match: node, binding, interval,
  *root* — the earliest epoch of the events it holds — and *members*, the
  bitmask of the slots, one per automaton, it stands for);
* per *active* node (one with live instances) an
  :class:`~cesar.index.ai.InstanceIndex` (AI), and the node in the AN index
  under the static atoms of its FILTER edge's groups (one position per group) —
  or, for a node whose filter has no static atom and one equality between a bound
  value and an event attribute (``$1.Name = Name``), under its instances' bound
  values (:class:`~cesar.index.keyed.KeyedItems`): an event reaches it only if
  some instance there holds its value;
* for the filter conjuncts the AI index cannot narrow (no atom compares the
  instance with the event), the instances by the filter groups holding their
  slots: an event that hits one group of a node shared by thousands of
  subscriptions with different keys looks only at that group's instances;
* where such a conjunct compares an event attribute with a side that reads
  only the binding and the constants (``Price > ?0 * $1.Price``), each
  instance, once an event of its group has probed it, waits there per tuple
  of constants under the threshold they give (:class:`Waiting`, in a
  :class:`~cesar.index.thresholds.Thresholds`): later events reach only the
  instances they complete, however many wait.  Where the conjunct also
  equates a bound value with an event attribute (``$1.Name = Name AND
  Price < 0.97 * $1.Price``), they wait per value of it: a quote reaches only
  the runs of its own name that it completes;
* per clock group (streams that no subscription reads together keep
  independent event time, see :mod:`cesar.server.engine.clocks`; keyed by the
  group's representative) a deadline queue of the instances whose node reads
  one of its streams and whose ∃-edges bound DUR from above, and the latest
  epoch of the group;
* per stream the last epoch that held its events, the next instance id, the
  work counters and the notices owed to subscriptions.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cesar.automata.schema import Value
from cesar.index.ai import InstanceAccess, InstanceIndex
from cesar.index.keyed import KeyedItems
from cesar.index.ranges import is_nan
from cesar.index.static import Atoms, ConjunctIndex
from cesar.index.thresholds import Thresholds
from cesar.server.engine.clocks import StreamGroups
from cesar.server.engine.params import Group, Tuple
from cesar.server.engine.remembered import Remembered
from cesar.server.engine.stepping import GroupSteps

if TYPE_CHECKING:
    from cesar.server.engine.edges import CompiledEdge


@dataclass
class EngineCounters:
    """Deterministic work counters (per engine, cumulative).

    ``nodes_touched``: nodes whose instances an event may affect (AN hits, or
    active nodes visited by the naive mode); ``nodes_visited``: nodes the
    naive mode looked at; ``instances_touched``: instances whose filter was
    evaluated; ``spawned``: new instances made by firing edges, of which
    ``rebound`` took their predecessor's place (a REBIND that moved every
    member of its instance); ``remembered_checked``: remembered events an
    UNLESS edge was asked about; ``steps_shared``: step events a FOLD node's
    group took once for its lazy instances, ``settled``: steps such an instance
    took when it was read (:mod:`.stepping`); ``cut``: subscriptions cut for the rest of an
    epoch by the work budget, summed over epochs, and ``steps`` the steps it charged, each
    shared one once (:mod:`.work`; both 0 without a budget).
    """

    epochs: int = 0
    events: int = 0
    fr_hits: int = 0
    nodes_touched: int = 0
    nodes_visited: int = 0
    instances_touched: int = 0
    spawned: int = 0
    rebound: int = 0
    matches: int = 0
    collected: int = 0
    dropped: int = 0
    active_nodes_sum: int = 0
    remembered_checked: int = 0
    steps_shared: int = 0
    settled: int = 0
    cut: int = 0
    steps: int = 0


@dataclass(frozen=True)
class Notice:
    """A message for a subscription: ``reason`` says what happened to its instances."""

    subscription: str
    reason: str


class EngineInstance:
    """A live partial match: id, node, binding, interval, root epoch and member slots."""

    __slots__ = ("binding", "id", "members", "node", "root", "t0", "t1")

    def __init__(
        self,
        id: int,
        node: int,
        binding: Mapping[str, Value],
        t0: int,
        t1: int,
        root: float,
        members: int,
    ) -> None:
        self.id = id
        self.node = node
        self.binding = binding
        self.t0 = t0
        self.t1 = t1
        self.root = root
        self.members = members


class Waiting:
    """An instance waiting in one filter group for the slots of one tuple of constants.

    ``threshold`` is the side of the group's threshold atom for the instance's
    binding and the tuple's constants (None: it faulted); ``key`` the bound value
    of the conjunct's wait key (None where it has none).  Identity is the entry's.
    """

    __slots__ = ("entry", "group", "instance", "key", "threshold")

    def __init__(
        self,
        instance: EngineInstance,
        group: Group,
        key: Value | None,
        entry: Tuple,
        threshold: Value | None,
    ) -> None:
        self.instance = instance
        self.group = group
        self.key = key
        self.entry = entry
        self.threshold = threshold


@dataclass
class EngineState:
    """The run state of an engine; see the module docstring.

    Methods: :meth:`activate`, :meth:`add`, :meth:`remove`, :meth:`drop_node`,
    :meth:`forget`, :meth:`queue`, :meth:`collect`, :meth:`check_valid`.
    """

    live: dict[int, InstanceIndex[EngineInstance]] = field(default_factory=dict)
    an: ConjunctIndex[int] = field(default_factory=ConjunctIndex)
    an_groups: dict[int, list[Group]] = field(default_factory=dict)
    """Per active node, its filter's groups (those an AN or keyed hit gives)."""
    keyed: dict[int, tuple[str, InstanceAccess]] = field(default_factory=dict)
    """Per active node reached by its instances' bound values (not in ``an``): the stream its
    filter reads and the equality whose bound value counts."""
    by_value: KeyedItems[int] = field(default_factory=KeyedItems)
    """The ``keyed`` nodes under the bound values of their live instances."""
    instances: dict[int, EngineInstance] = field(default_factory=dict)
    memberships: dict[tuple[int, int], int] | None = None
    """Live instances per (node, members), counted only while the per-subscription instance
    limit may bind (:meth:`counted`; None: not counted): what the limit counts without a scan.
    Under it every instance added, left or gone would pay for a count nobody reads (4 % of the
    heterogeneous workload's instructions).  A dict, not a ``Counter``: compiled, a dict's
    look-ups are direct, a ``Counter``'s generic."""
    by_group: dict[Group, dict[EngineInstance, None]] = field(default_factory=dict)
    """Per filter group (of a conjunct without AI access): the instances it met when added.

    The run state's per-instance tables key on the instance itself (hashed by identity), not
    its id: compiled, an ``int`` attribute used as a key is a new Python integer each time."""
    stepped: dict[Group, GroupSteps] = field(default_factory=dict)
    """Per filter group of a node that steps (:mod:`.stepping`): the instances it files to step
    lazily (not in ``by_group``) and the steps they owe."""
    homes: dict[EngineInstance, list[Group]] = field(default_factory=dict)
    """Per instance: the groups ``by_group`` (or ``stepped``) files it under, unless it waits
    there."""
    waiting: dict[Group, dict[Value | None, Thresholds[Waiting]]] = field(default_factory=dict)
    """Per filter group with a threshold atom, per value of its wait key (None: no key): the
    instances that wait in it by threshold."""
    waits: dict[EngineInstance, set[Waiting]] = field(default_factory=dict)
    """Per instance: where it waits (taken out of ``by_group`` for those groups)."""
    expiry: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    clock: dict[str, int] = field(default_factory=dict)
    group_clock: dict[str, int] = field(default_factory=dict)
    next_instance: int = 0
    counters: EngineCounters = field(default_factory=EngineCounters)
    notices: list[Notice] = field(default_factory=list)
    capped: bool = False
    """Whether the engine went over its instance limit since its last notice."""
    held_over: set[str] = field(default_factory=set)
    """Subscriptions that went over their instance limit since their last notice."""
    forgetting: set[str] = field(default_factory=set)
    """Streams whose remembered events went over the instance limit since their notice."""
    memory: Remembered = field(default_factory=Remembered)
    """The events of earlier epochs the UNLESS edges may still ask about."""

    def new_id(self) -> int:
        """A fresh instance id."""
        self.next_instance += 1
        return self.next_instance

    def activate(
        self,
        node: int,
        accesses: tuple[InstanceAccess | None, ...],
        stream: str,
        groups: list[Group],
        statics: Mapping[Group, Atoms],
        key: InstanceAccess | None = None,
    ) -> None:
        """Make ``node`` active: an AI index by ``accesses``, AN entries for its filter's groups,
        or, with a ``key``, its instances counted under their bound value of it.

        Also for an active node whose filter's groups changed (its AI index
        stays).  O(groups × log n), and O(instances) where the key changes.
        """
        index = self.live.get(node)
        if index is None:
            index = self.live[node] = InstanceIndex(accesses)
        elif node in self.an:
            self.an.remove(node)
        else:
            for instance in index.instances():
                self._uncount(instance)
            del self.keyed[node]
        if key is None:
            self.an.add(node, stream, tuple(statics[g] for g in groups))
        else:
            self.keyed[node] = (stream, key)
            for instance in index.instances():
                self._count(instance)
        self.an_groups[node] = groups

    def _count(self, instance: EngineInstance) -> None:
        keyed = self.keyed.get(instance.node)
        if keyed is not None:
            stream, key = keyed
            self.by_value.add(stream, key.attr, instance.binding[key.bound], instance.node)

    def _uncount(self, instance: EngineInstance) -> None:
        keyed = self.keyed.get(instance.node)
        if keyed is not None:
            stream, key = keyed
            self.by_value.remove(stream, key.attr, instance.binding[key.bound], instance.node)

    def add(
        self,
        instance: EngineInstance,
        bound: float | None,
        group: str,
        homes: list[Group],
        rebind: CompiledEdge | None = None,
    ) -> None:
        """Make ``instance`` live at its active node; a DUR ``bound`` queues its deadline.

        ``group`` is the clock group of the stream the node's filter reads;
        ``homes`` the filter groups to file it under (see ``by_group``; with the
        node's ``rebind``, its one home steps it lazily, see ``stepped``).
        O(conjuncts × log n + homes).
        """
        self.live[instance.node].add(instance)
        self.instances[instance.id] = instance
        self._member(instance)
        self._count(instance)
        if homes:
            self.homes[instance] = homes
            if rebind is not None:
                (home,) = homes
                steps = self.stepped.get(home)
                if steps is None:
                    steps = self.stepped[home] = GroupSteps(rebind)
                steps.files[instance] = None
            else:
                for home in homes:
                    self.by_group.setdefault(home, {})[instance] = None
        if bound is not None:
            queue = self.expiry.setdefault(group, [])
            heapq.heappush(queue, (instance.t0 + bound - 1, instance.id))

    def rebind(self, instance: EngineInstance, successor: EngineInstance) -> None:
        """Let a live instance take its REBIND successor's binding, end and root in place.

        For a successor at the same node with the same members and start: its
        AN entries, filter-group files and deadline are the instance's, so
        only the AI clusters whose key the binding changes re-file it.
        """
        self._uncount(instance)
        self.live[instance.node].rebind(instance, successor.binding)
        self._count(instance)
        for group in {entry.group for entry in self._unwait(instance)}:
            self.by_group.setdefault(group, {})[instance] = None
        instance.t1 = successor.t1
        instance.root = successor.root
        self.counters.rebound += 1

    def remove(self, instance: EngineInstance) -> None:
        """Forget a live instance; its node is no longer active when it was the last."""
        index = self.live[instance.node]
        index.remove(instance)
        self._uncount(instance)
        del self.instances[instance.id]
        self._unmember(instance)
        self._unfile(instance)
        if not len(index):
            self._deactivate(instance.node)

    def wait(
        self,
        instance: EngineInstance,
        group: Group,
        key: Value | None,
        op: str,
        thresholds: Iterable[tuple[Tuple, Value | None]],
    ) -> None:
        """Let ``instance`` wait in ``group`` under ``key`` by the threshold of each tuple
        (``value op t``).

        It leaves the group's ``by_group`` file.  O(tuples × log n).
        """
        self._leave(group, instance)
        files = self.waiting.setdefault(group, {})
        file = files.get(key)
        if file is None:
            file = files[key] = Thresholds(op)
        mine = self.waits.setdefault(instance, set())
        for entry, threshold in thresholds:
            waiting = Waiting(instance, group, key, entry, threshold)
            file.add(waiting, threshold)
            mine.add(waiting)

    def stop_waiting(self, waiting: Waiting) -> None:
        """Forget one entry (its instance has no slot of its tuple left).  O(log n)."""
        self.waits[waiting.instance].remove(waiting)
        self._unlist(waiting)

    def _unwait(self, instance: EngineInstance) -> Iterable[Waiting]:
        entries = self.waits.pop(instance, None)
        if entries is None:  # most instances: no empty set made to say so
            return ()
        for waiting in entries:
            self._unlist(waiting)
        return entries

    def _unlist(self, waiting: Waiting) -> None:
        files = self.waiting[waiting.group]
        file = files[waiting.key]
        file.remove(waiting, waiting.threshold)
        if not len(file):
            del files[waiting.key]
            if not files:
                del self.waiting[waiting.group]

    def _leave(self, group: Group, instance: EngineInstance) -> None:
        filed = self.by_group.get(group)  # a file is never empty: one left empty goes
        if filed is not None:
            filed.pop(instance, None)
            if not filed:
                del self.by_group[group]
        steps = self.stepped.get(group)
        if steps is not None:
            steps.files.pop(instance, None)
            if not steps.files:
                del self.stepped[group]

    def _unfile(self, instance: EngineInstance) -> None:
        self._unwait(instance)
        for home in self.homes.pop(instance, ()):
            self._leave(home, instance)

    def _deactivate(self, node: int) -> None:
        del self.live[node]
        if self.keyed.pop(node, None) is None:
            self.an.remove(node)
        del self.an_groups[node]

    def drop_node(self, node: int) -> None:
        """Forget a deleted node's instances."""
        index = self.live.get(node)
        if index is not None:
            for instance in index.instances():
                self._uncount(instance)
                del self.instances[instance.id]
                self._unmember(instance)
                self._unfile(instance)
            self._deactivate(node)

    def leave(self, instance: EngineInstance, slots: int) -> None:
        """Take ``slots`` out of a live instance's members; an instance left with none goes.
        O(1), or :meth:`remove`'s cost."""
        leaving = instance.members & slots
        if not leaving:
            return
        if leaving == instance.members:
            self.remove(instance)
            return
        self._unmember(instance)
        instance.members ^= leaving
        self._member(instance)

    def counted(self) -> dict[tuple[int, int], int]:
        """:attr:`memberships`, counted from the live instances the first time it is asked for
        and kept up to date from then on, until :meth:`uncounted`.  O(1), O(instances) the
        first time."""
        counts = self.memberships
        if counts is None:
            counts = self.memberships = {}
            for instance in self.instances.values():
                self._member(instance)
        return counts

    def uncounted(self) -> None:
        """Stop counting :attr:`memberships` (the instance limit is far from binding)."""
        self.memberships = None

    def _member(self, instance: EngineInstance) -> None:
        counts = self.memberships
        if counts is not None:
            key = instance.node, instance.members
            counts[key] = counts.get(key, 0) + 1

    def _unmember(self, instance: EngineInstance) -> None:
        counts = self.memberships
        if counts is not None:
            key = instance.node, instance.members
            left = counts[key] - 1
            if left:
                counts[key] = left
            else:
                del counts[key]

    def forget(self, freed: Mapping[int, int]) -> None:
        """Take slots out of the instances of nodes (node → slots); an empty instance goes.

        O(instances of those nodes).
        """
        for node, slots in freed.items():
            index = self.live.get(node)
            for instance in index.instances() if index else ():
                self.leave(instance, slots)

    def queue(self, node: int, group: str, bound: float) -> None:
        """Queue the deadlines of ``node``'s instances (of clock ``group``) under ``bound``."""
        index = self.live.get(node)
        queue = self.expiry.setdefault(group, [])
        for instance in index.instances() if index else ():
            heapq.heappush(queue, (instance.t0 + bound - 1, instance.id))

    def regroup(self, absorbed: Iterable[str], groups: StreamGroups) -> None:
        """Move what is kept per clock group from ``absorbed`` representatives to their new one."""
        for old in absorbed:
            root = groups.find(old)
            queue = self.expiry.pop(old, None)
            if queue:
                into = self.expiry.setdefault(root, [])
                into.extend(queue)
                heapq.heapify(into)
            if old in self.group_clock:
                latest = self.group_clock.pop(old)
                self.group_clock[root] = max(self.group_clock.get(root, latest), latest)

    def collect(
        self, t1: int, groups: Iterable[str], bounds: Mapping[int, float]
    ) -> list[EngineInstance]:
        """Drop instances whose node's ∃-edges all need a DUR their start can no longer give;
        returns them (a node's TIMEOUT edge publishes its own).

        An instance starting at t0 at a node whose edges fire only with DUR <=
        bound can fire up to epoch t0 + bound - 1 (its *deadline*); the next
        epoch of its clock group ends after t1, so every instance queued under
        one of ``groups`` (the epoch's) with a deadline <= t1 is dead.
        The queues may hold stale entries (the node's bound changed, the
        instance left): each is re-checked against ``bounds`` when it comes up.
        """
        dead = []
        for group in groups:
            heap = self.expiry.get(group)
            while heap and heap[0][0] <= t1:
                _, instance_id = heapq.heappop(heap)
                instance = self.instances.get(instance_id)
                if instance is None:
                    continue
                bound = bounds.get(instance.node)
                if bound is not None and instance.t0 + bound - 1 <= t1:
                    self.remove(instance)
                    self.counters.collected += 1
                    dead.append(instance)
        return dead

    def check_valid(self) -> None:
        """Assert that the AN index, the AI indices and the instances agree, and the
        remembered events and their indices."""
        self.memory.check_valid()
        self.an.check_valid()
        self.by_value.check_valid()
        assert len(self.an) + len(self.keyed) == len(self.live) == len(self.an_groups)
        assert not self.keyed.keys() & {node for node in self.live if node in self.an}
        counts: dict[tuple[str, str, Value | None, int], int] = {}
        for node, (stream, key) in self.keyed.items():
            for instance in self.live[node].instances():
                place = (stream, key.attr, instance.binding[key.bound], node)
                counts[place] = counts.get(place, 0) + 1
        assert counts == self.by_value.counts(), "keyed counts differ from the live instances"
        count = 0
        for node, index in self.live.items():
            assert (node in self.an or node in self.keyed) and len(index) > 0
            index.check_valid()
            for instance in index.instances():
                assert self.instances[instance.id] is instance and instance.node == node
                assert instance.id <= self.next_instance and instance.members > 0
                count += 1
        assert count == len(self.instances)
        live = Counter((i.node, i.members) for i in self.instances.values())
        assert self.memberships in (None, live), "memberships differ from the live instances"
        filed: set[tuple[Group, EngineInstance]] = set()
        for instance, homes in self.homes.items():
            assert self.instances.get(instance.id) is instance and homes
            waits = self.waits.get(instance, set())
            for home in homes:
                covered = sum(w.entry.mask for w in waits if w.group is home)
                stepped = self.stepped.get(home)
                if stepped is not None and instance in stepped.files:
                    assert homes == [home], f"instance {instance.id} steps in two groups"
                    assert instance not in self.by_group.get(home, {}), instance.id
                    assert not instance.members & ~home.mask, instance.id
                    filed.add((home, instance))
                elif instance in self.by_group.get(home, {}):
                    assert not covered, f"instance {instance.id} both filed and waiting"
                    filed.add((home, instance))
                else:
                    members = instance.members & home.mask
                    assert not members & ~covered, f"instance {instance.id} lost in a group"
        assert len(filed) == sum(len(f) for f in self.by_group.values()) + sum(
            len(s.files) for s in self.stepped.values()
        )
        assert all(s.files for s in self.stepped.values()), "an empty stepping file"
        files = [(k, f) for by_key in self.waiting.values() for k, f in by_key.items()]
        for _, file in files:
            file.check_valid()
        entries = [w for waits in self.waits.values() for w in waits]
        stored = [w for w in entries if w.threshold is None or not is_nan(w.threshold)]
        assert all(w.key in self.waiting[w.group] for w in stored)
        assert len(entries) == sum(len(f) for _, f in files) + sum(
            is_nan(w.threshold) for w in entries if w.threshold is not None
        )
        assert all(w.instance is i for i, waits in self.waits.items() for w in waits)
        for waiting in entries:
            assert self.instances[waiting.instance.id] is waiting.instance
            assert waiting.group in self.homes[waiting.instance]
