"""Run state as data: an engine's instances, clocks and counters, apart from its program.

A restart must not replay the whole event log (Section 4.3's run state is
all a restart needs beyond the subscriptions), but the program cannot be
saved as it is: its edges are generated code, and its node ids, spaces and
slots depend on the order of every subscribe and unsubscribe since the
engine began.  A :class:`RunSnapshot` therefore names each member of an
instance by what outlives a rebuild — ``(subscription, automaton index,
node position in that automaton)`` — and keeps only plain values (strings,
numbers, tuples, dicts), so it can be written with any serializer of plain
data and read back without trusting the file's code.

Restoring is the reverse: a fresh engine joins the saved clock groups
(:func:`prepare`), subscribes the subscriptions again with the epoch each was
subscribed after (``since``), then :func:`restore` maps each member back to
its node and slot.  Members of subscriptions that are gone are dropped; the
members of one saved instance that now land on different nodes (the DAG
shared differently) become one instance per node — a partial match is per
automaton, sharing is only how it is stored, so the outputs are the same.

>>> from cesar.automata.compiler import compile_query
>>> from cesar.automata.schema import Event, parse_stream_spec
>>> S = {"S": parse_stream_spec("S(v:int)")}
>>> q = compile_query("FILTER{v > 1} S NEXT{$1.v = $2.v} S", S, "q")
>>> a = Engine()
>>> a.subscribe("s1", q.automata)
>>> a.process([Event.of("S", 1, 1, {"v": 5})])
[]
>>> saved = capture(a)
>>> b = Engine()
>>> prepare(b, saved)
>>> b.subscribe("s1", q.automata, since=saved.since["s1"])
>>> restore(b, saved)
>>> [e.values for e in b.process([Event.of("S", 2, 2, {"v": 5})])]
[(('v', 5), ('v_1', 5))]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from cesar.automata.schema import Event, Value
from cesar.index.masks import slots_of, without
from cesar.server.engine.engine import Engine
from cesar.server.engine.params import Group
from cesar.server.engine.plansave import SavedPlanned, save
from cesar.server.engine.state import EngineCounters, EngineInstance

Member = tuple[str, int, int]
"""(subscription, index of its automaton, position of the node in that automaton)."""

SavedInstance = tuple[tuple[tuple[str, Value], ...], int, int, float, int, int]
"""(binding items, t0, t1, root, node, member mask), in instance order: the members are the
saved node's slots in the mask (:attr:`RunSnapshot.nodes`)."""

SavedEvent = tuple[int, int, tuple[tuple[str, Value], ...]]
"""A remembered event: (t0, t1, attribute items); its stream is the key it is saved under."""

OldInstance = tuple[tuple[tuple[str, Value], ...], int, int, float, tuple[Member, ...]]
"""An instance as snapshots before ``nodes`` saved it: its members spelled out one by one."""


@dataclass
class RunSnapshot:
    """An engine's run state in terms that survive rebuilding its program.

    ``since``: per subscription, the epoch it was subscribed after; ``groups``:
    the clock groups of more than one stream; ``clock``: each stream's last
    epoch; ``group_clock``: per stream, its group's latest epoch; ``capped``:
    ``[None]`` when the engine is over its instance limit since its notice (a snapshot from
    before per-subscription limits may name nodes' members too: they are ignored);
    ``budgets``: the subscriptions over their instance limit since their notice
    (``held_over``) and those cut by the work budget with their calm epochs since
    (``cut``); ``nodes``: per node holding instances, the member of each slot its
    instances hold — an instance shared by many subscriptions
    is saved as its mask, not as one member per subscription; ``remembered``:
    per stream, the events its UNLESS edges still ask about, as (t0, t1,
    attribute items); ``plans``: per planned subscription, its planner state
    (:meth:`~cesar.server.engine.plans.Planner.save`), since too; ``skipped``: per stream
    published under an after-match policy, its held matches and partitions' bounds;
    ``windows``: the events each time-window aggregate holds.
    """

    since: dict[str, float]
    groups: list[list[str]]
    clock: dict[str, int]
    group_clock: dict[str, int]
    instances: list[SavedInstance] | list[OldInstance]
    next_instance: int
    counters: dict[str, int]
    faults: int
    capped: list[Member | None]
    nodes: dict[int, dict[int, Member]]
    remembered: dict[str, list[SavedEvent]]
    plans: dict[str, SavedPlanned]
    skipped: dict[str, Any]
    windows: list[Any]
    budgets: dict[str, Any]

    def to_data(self) -> dict[str, Any]:
        """Plain data (dicts, lists, tuples, strings, numbers) for a serializer."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunSnapshot:
        """The inverse of :meth:`to_data`; KeyError or TypeError for data of another shape.

        Data saved before ``nodes`` (each instance's members spelled out) or before
        ``remembered``, ``plans``, ``skipped``, ``windows`` or ``budgets`` is read too.
        """
        later = ("nodes", "remembered", "plans", "skipped", "windows", "budgets")
        values = {f.name: data[f.name] for f in fields(cls) if f.name not in later}
        return cls(
            **values,
            nodes=data.get("nodes", {}),
            remembered=data.get("remembered", {}),
            plans=data.get("plans", {}),
            skipped=data.get("skipped", {}),
            windows=data.get("windows", []),
            budgets=data.get("budgets", {}),
        )

    def spelled_out(self) -> RunSnapshot:
        """This run state in the earlier shape: no ``nodes``, each instance's members listed
        (what snapshots held before shared instances were saved as masks)."""
        data = self.to_data()
        data["instances"] = [(*i[:4], self.members(i)) for i in self.instances]
        del data["nodes"]
        del data["remembered"]
        del data["plans"]
        return RunSnapshot.from_data(data)

    def members(self, instance: SavedInstance | OldInstance) -> tuple[Member, ...]:
        """The members of a saved instance."""
        if len(instance) == 5:
            return instance[4]
        table = self.nodes[instance[4]]
        return tuple(table[slot] for slot in slots_of(instance[5]))


def capture(engine: Engine) -> RunSnapshot:
    """The run state of ``engine`` between epochs.

    O(instances + automata nodes + the distinct slots of each node holding instances):
    an instance shared by many subscriptions costs its mask, not a member each.  Each run
    that owes shared steps takes them first (:meth:`Engine.settle`): a restored engine has
    no history of steps to owe from.
    """
    engine.settle()
    program, state = engine.program, engine.state
    owner: dict[tuple[int, int], tuple[str, int, dict[int, int]]] = {}
    since: dict[str, float] = {}
    for subscription, index, footprint, slot in program.placements():
        positions = {node: position for position, node in enumerate(footprint.nodes)}
        owner[footprint.space, slot] = (subscription, index, positions)
        if index == 0:
            since[subscription] = program.since[footprint.name]
    for subscription, planned in engine.planner.planned.items():
        since[subscription] = planned.since  # its DAG share may have a later one

    def members(node: int, mask: int) -> dict[int, Member]:
        space = program.dag.nodes[node].space
        out = {}
        for slot in slots_of(mask):
            subscription, index, positions = owner[space, slot]
            out[slot] = (subscription, index, positions[node])
        return out

    held: dict[int, int] = {}
    live = sorted(state.instances.values(), key=lambda i: i.id)
    for i in live:
        held[i.node] = held.get(i.node, 0) | i.members
    instances = [(tuple(i.binding.items()), i.t0, i.t1, i.root, i.node, i.members) for i in live]
    find = program.groups.find
    streams = set(state.clock) | {s for group in program.groups.partition() for s in group}
    return RunSnapshot(
        since=since,
        groups=program.groups.partition(),
        clock=dict(state.clock),
        group_clock={
            s: state.group_clock[find(s)] for s in sorted(streams) if find(s) in state.group_clock
        },
        instances=instances,
        next_instance=state.next_instance,
        counters=asdict(state.counters),
        faults=program.faults.arithmetic,
        capped=[None] if state.capped else [],
        nodes={node: members(node, mask) for node, mask in held.items()},
        remembered={
            stream: [(e.t0, e.t1, e.values) for e in events]
            for stream, events in state.memory.items()
        },
        plans=save(engine.planner.planned),
        skipped=engine.skipping.to_data(),
        windows=engine.windows.to_data(),
        budgets={"held_over": sorted(state.held_over), "cut": dict(engine.work.episodes)},
    )


def prepare(engine: Engine, snapshot: RunSnapshot) -> None:
    """Join a fresh engine's clock groups as they were, and hold its planned subscriptions'
    states for their subscribing again; call before subscribing again."""
    for group in snapshot.groups:
        engine.program.groups.join(group)
    engine.planner.saved = dict(snapshot.plans)


def restore(engine: Engine, snapshot: RunSnapshot) -> None:
    """Give ``engine`` (prepared, its subscriptions subscribed again) the saved run state.

    Members of subscriptions it does not have are dropped.  O(each saved node's members, then
    the instances' masks) where members keep their slots in the rebuilt program, as they do
    when it is built from the same subscriptions; O(instances × members) otherwise.
    """
    program, state = engine.program, engine.state
    find = program.groups.find
    state.clock.update(snapshot.clock)
    for stream, latest in snapshot.group_clock.items():
        group = find(stream)
        state.group_clock[group] = max(state.group_clock.get(group, latest), latest)
    state.next_instance = max(state.next_instance, snapshot.next_instance)
    state.counters = EngineCounters(**snapshot.counters)
    program.faults.arithmetic = snapshot.faults
    homes_of: dict[tuple[int, int], list[Group]] = {}
    moves = {node: _moves(engine, table) for node, table in snapshot.nodes.items()}
    for saved in snapshot.instances:
        items, t0, t1, root = saved[:4]
        nodes: dict[int, int] = {}
        if len(saved) == 6:
            for node, keep, moved in moves[saved[4]]:
                mask = saved[5] & keep
                for slot in slots_of(without(saved[5], keep)) if moved else ():
                    if (new := moved.get(slot)) is not None:
                        mask |= 1 << new
                if mask:
                    nodes[node] = mask
        else:
            for member in snapshot.members(saved):
                place = _place(engine, member)
                if place is not None:
                    node, slot = place
                    nodes[node] = nodes.get(node, 0) | 1 << slot
        binding = dict(items)
        for node, mask in nodes.items():
            instance = EngineInstance(state.new_id(), node, binding, t0, t1, root, mask)
            engine.installer.admit(instance, homes_of)
    for stream, events in snapshot.remembered.items():
        for t0, t1, items in events:
            state.memory.remember(
                Event(stream, t0, t1, tuple((name, value) for name, value in items))
            )
    engine.skipping.restore(snapshot.skipped)
    engine.windows.restore(snapshot.windows)
    state.capped = None in snapshot.capped  # a node's place there is from before per-node limits
    subscriptions = set(engine.subscriptions)
    state.held_over = {s for s in snapshot.budgets.get("held_over", ()) if s in subscriptions}
    engine.work.episodes = {
        s: calm for s, calm in snapshot.budgets.get("cut", {}).items() if s in subscriptions
    }


def _moves(engine: Engine, table: Mapping[int, Member]) -> list[tuple[int, int, dict[int, int]]]:
    """Where the members of one saved node's slots are now: per node of ``engine``, the mask
    of slots that kept their number, and the other slots' new numbers."""
    kept: dict[int, list[int]] = {}
    moved: dict[int, dict[int, int]] = {}
    for slot, member in table.items():
        place = _place(engine, member)
        if place is None:
            continue
        node, new = place
        kept.setdefault(node, [])
        if new == slot:
            kept[node].append(slot)
        else:
            moved.setdefault(node, {})[slot] = new
    return [(node, _mask_of(slots), moved.get(node, {})) for node, slots in kept.items()]


def _mask_of(slots: list[int]) -> int:
    """The bitmask of ``slots``, in O(highest slot) (not one shift-and-or per slot).

    >>> bin(_mask_of([0, 3, 5]))
    '0b101001'
    """
    if not slots:
        return 0
    bits = bytearray(max(slots) // 8 + 1)
    for slot in slots:
        bits[slot >> 3] |= 1 << (slot & 7)
    return int.from_bytes(bits, "little")


def _place(engine: Engine, member: Member) -> tuple[int, int] | None:
    """The (node, slot) of a saved member in ``engine`` (None: its subscription is gone)."""
    subscription, index, position = member
    found = engine.program.placement(subscription, index)
    if found is None:
        return None
    footprint, slot = found
    return footprint.nodes[position], slot
