"""One epoch's rounds (Section 4.3): the steps per event of a rank, the ranks in order, firing.

:class:`Rounds` is the engine's hot path, apart from subscribing and the
epoch's bookkeeping (:mod:`cesar.server.engine.engine`), and compiled with
the indices (``cesar.build``).  A round takes the events of one stream rank;
per event:

1. FR probe: the ∃-edges whose static part the event satisfies; the start
   node fires those whose dynamic part holds;
2. AN probe, then AI probe per node (:class:`~cesar.server.engine.probing.Probe`):
   the *affected* instances, which leave their node;
3. each affected instance fires every FR-hit ∃-edge of its node whose dynamic
   part and guards hold (:meth:`Rounds.fire`: a match per slot ending there,
   an instance for the others).

New instances are installed, and affected ones removed, together when the
round ends (:class:`~cesar.server.engine.installing.Installer`); an instance
made at a joining node (a pattern's AND) as soon as its event is done.
Matches of streams another subscription reads go to the next rank.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.making import made_events
from cesar.automata.schema import Event, Value
from cesar.index.masks import slots_of, without
from cesar.server.engine.edges import CompiledEdge
from cesar.server.engine.installing import Installer
from cesar.server.engine.matches import Match, Output
from cesar.server.engine.params import Group
from cesar.server.engine.probing import Probe, joined_dur
from cesar.server.engine.program import QueryProgram
from cesar.server.engine.state import EngineInstance, EngineState
from cesar.server.engine.work import Work

_EMPTY: Final[Mapping[str, Value]] = {}
Fired = tuple[Event, Mapping[str, Value], int, float]
"""What an edge fires with: the event, its attributes, its own DUR and the root epoch."""
Record = tuple[CompiledEdge, EngineInstance, int, Fired]
"""A REBIND that keeps its instance's end, held to the round's end: the edge, the instance, the
slots it moves and what it fires with."""


class Rounds:
    """The rounds of an epoch over one program and its run state (the engine's parts).

    Cost per event: the FR, AN and AI probes, then the instances it affects
    and the edges they fire (the counters say how many).
    """

    def __init__(
        self,
        program: QueryProgram,
        state: EngineState,
        probe: Probe,
        installer: Installer,
        work: Work,
    ) -> None:
        self.program = program
        self.state = state
        self.probe = probe
        self.installer = installer
        self.work = work

    def ranks(self, pending: dict[int, list[tuple[Event, float]]], published: Output) -> None:
        """Run the rounds of ``pending`` (events by rank) in rank order, feeding each round's
        matches of read streams to the rank that reads them."""
        rank = self.program.rank
        while pending:
            produced = self.round(pending.pop(min(pending)), published)
            for event, root in produced:
                if event.stream not in self.program.internal:
                    published.append(event)
                pending.setdefault(rank[event.stream], []).append((event, root))

    def overdue(self, t1: int, groups: set[str], published: Output) -> None:
        """Collect, earliest deadline first, the instances of ``groups`` due before ``t1``; what
        their TIMEOUT edges publish goes to its readers at its own time, before the epoch's
        events (as if an epoch had come then).  O(log n) per instance collected."""
        state, program = self.state, self.program
        rank = program.rank
        while True:
            due = min((heap[0][0] for g in groups if (heap := state.expiry.get(g))), default=None)
            if due is None or due >= t1:
                return
            fed: dict[int, list[tuple[Event, float]]] = {}
            dead = state.collect(int(due), groups, program.bound)
            for event, root in self.expire(dead, published):
                fed.setdefault(rank[event.stream], []).append((event, root))
            self.ranks(fed, published)

    def expire(self, dead: list[EngineInstance], published: Output) -> list[tuple[Event, float]]:
        """Publish, through its node's TIMEOUT edge, each collected instance that has one.

        The match spans the instance's start to its deadline.  Matches of
        streams others read are also returned with their roots (for the next
        ranks); internal ones only so.
        """
        program = self.program
        fed: list[tuple[Event, float]] = []
        for instance in dead:
            compiled = program.timeout_of(instance.node)
            if compiled is None:
                continue
            bound = int(program.bound[instance.node])
            # No event fires it: the deadline stands in for one (only its t1 is read).
            deadline = Event("", instance.t0, instance.t0 + bound - 1, ())
            out = (fed, published)
            root = instance.root
            self.fire(compiled, instance, instance.members, deadline, _EMPTY, bound, root, [], out)
        internal = program.internal
        published.extend(event for event, _ in fed if event.stream not in internal)
        return fed

    def round(
        self, events: list[tuple[Event, float]], published: Output
    ) -> list[tuple[Event, float]]:
        """One rank of an epoch: Section 4.3's steps for each event, then install.

        Matches of streams nobody reads go to ``published``; the others are
        returned with their roots, for the next rank.
        """
        spawned: list[tuple[EngineInstance, EngineInstance | None]] = []
        leaving: dict[EngineInstance, int] = {}
        produced: list[tuple[Event, float]] = []
        out = (produced, published)
        counters = self.state.counters
        edges = self.program.edges
        program = self.program
        # A REBIND that keeps the instance's end records, it takes no event: once per
        # instance and edge in a round, for every slot any event moved.
        records: dict[tuple[EngineInstance, int], Record] = {}
        taken: dict[EngineInstance, int] = {}  # per instance, the slots a REBIND took an event for
        joining = program.dag.joining
        spaces = program.dag.nodes
        joined = 0  # spawned[:joined] holds no instance of a joining node
        joined_at: set[int] = set()  # the joining nodes that got instances
        for event, root in events:
            if joining and len(spawned) > joined:
                joined = self.join(spawned, joined, joined_at)
            attrs = event.attrs()
            own = event.t1 - event.t0 + 1
            starting: dict[int, list[Group]] = {}
            for group in program.fr.probe(event.stream, attrs):
                starting.setdefault(group.edge, []).append(group)
            counters.fr_hits += len(starting)
            for edge_id, groups in starting.items():
                params = edges[edge_id].params
                allowed = params.all & self.work.allowed(spaces[edges[edge_id].target].space)
                slots = params.holds(groups, allowed, _EMPTY, attrs, own, own)
                if slots:
                    self.fire(edges[edge_id], None, slots, event, attrs, own, root, spawned, out)
            for node, affected, firing, forks in self.probe.affected(event, attrs, own):
                for instance, step, rebind in forks:  # its group's lazy step of this epoch
                    leaving[instance] = leaving.get(instance, 0) | instance.members
                    members = instance.members
                    self.fire(
                        rebind,
                        instance,
                        members,
                        step.event,
                        step.attrs,
                        1,
                        step.root,
                        spawned,
                        out,
                    )
                if firing is None:
                    firing = self.probe.firing(node, event.stream, attrs)
                stay = program.stay_of(node)
                staying = stay.params.matching_groups(attrs) if stay is not None else None
                joins = node in joining
                for instance, slots in affected:
                    dur = joined_dur(instance, event) if joins else event.t1 - instance.t0 + 1
                    binding = instance.binding
                    left = slots
                    if staying:
                        assert stay is not None
                        held = stay.params.holds(staying, slots, binding, attrs, dur, own)
                        left = without(left, held)
                    leaving[instance] = leaving.get(instance, 0) | left
                    for compiled, groups in firing:
                        moving = compiled.params.holds(groups, slots, binding, attrs, dur, own)
                        if not moving:
                            continue
                        if not compiled.keeps_end:
                            if compiled.rebinds:
                                taken[instance] = taken.get(instance, 0) | moving
                        else:
                            key = (instance, id(compiled))
                            known = records.get(key)
                            fired: Fired = (event, attrs, own, root)
                            if known is not None:
                                moving |= known[2]
                                fired = known[3]
                            records[key] = (compiled, instance, moving, fired)
                            continue
                        self.fire(compiled, instance, moving, event, attrs, own, root, spawned, out)
        for compiled, instance, moving, fired in records.values():
            if compiled.edge.unless_taken:  # not for the slots that took an event
                moving = without(moving, taken.get(instance, 0))
            if moving:
                at, values, own, root = fired
                self.fire(compiled, instance, moving, at, values, own, root, spawned, out)
        self.installer.install(leaving, spawned)
        if joined_at:
            self.installer.enforce_limits(True)
        return produced

    def join(
        self,
        spawned: list[tuple[EngineInstance, EngineInstance | None]],
        start: int,
        nodes: set[int],
    ) -> int:
        """Install now the instances of ``spawned[start:]`` made at joining nodes, taking them
        out (the rest of the epoch sees them) and adding their nodes to ``nodes`` (limits are
        enforced when the round ends); returns the new length of ``spawned``."""
        joining = self.program.dag.joining
        joined = [instance for instance, _ in spawned[start:] if instance.node in joining]
        if joined:
            spawned[start:] = [pair for pair in spawned[start:] if pair[0].node not in joining]
            homes_of: dict[tuple[int, int], list[Group]] = {}
            for instance in joined:
                self.installer.admit(instance, homes_of)
                nodes.add(instance.node)
        return len(spawned)

    def fire(
        self,
        compiled: CompiledEdge,
        instance: EngineInstance | None,
        slots: int,
        event: Event,
        attrs: Mapping[str, Value],
        own: int,
        root: float,
        spawned: list[tuple[EngineInstance, EngineInstance | None]],
        out: tuple[list[tuple[Event, float]], Output],
    ) -> None:
        """Move ``slots`` along an ∃-edge: a match per slot ending there, an instance for others.

        The new instance goes to ``spawned`` with the instance it comes from.
        """
        program = self.program
        target = compiled.target
        node = compiled.target_node
        work = self.work
        if work.charging:
            if work.cut:
                slots &= work.allowed(node.space)
                if not slots:
                    return
            work.charge(node.space, slots)
        t1 = event.t1
        if instance is None:
            binding_in, t0 = _EMPTY, event.t0
        else:
            binding_in, t0 = instance.binding, instance.t0
            if instance.node in program.dag.joining:
                t0, t1 = min(t0, event.t0), max(t1, instance.t1)
        dur = t1 - t0 + 1
        guarded = program.dag.guarded
        if guarded:
            guards = guarded.get((compiled.source, compiled.target))
            if guards:
                slots = without(slots, self.vetoed(guards, slots, binding_in, attrs, t0, dur))
                if not slots:
                    return
        binding: dict[str, Value] | None = None
        try:
            if node.filter is None:  # no instance stays: a match's values, without the dict
                make = compiled.values
                if make is None:
                    make = program.values_of(compiled)
                values = make(binding_in, attrs, dur, own)
            else:
                assert compiled.build is not None
                binding = compiled.build(binding_in, attrs, dur, own)
                values = ()
        except ArithmeticFault:
            self.program.faults.arithmetic += 1
            return
        new_root = root if instance is None else min(root, instance.root)
        ending = slots & program.final.get(target, 0)
        if ending:
            space = program.spaces[node.space]
            slot_stream = space.streams
            if binding is not None:
                values = tuple(binding.items())  # sorted: the build makes its keys in order
            produced, published = out
            fed_slots = ending & space.fed
            plain = ending ^ fed_slots
            fed = [slot_stream[slot] for slot in slots_of(fed_slots)] if fed_slots else []
            if new_root <= program.latest_since or program.until:  # some slot may not want it
                since, until = program.since, program.until
                streams = [slot_stream[slot] for slot in slots_of(plain)]
                streams = [s for s in streams if since[s] < new_root <= until.get(s, math.inf)]
                fed = [s for s in fed if since[s] < new_root <= until.get(s, math.inf)]
                self.state.counters.matches += len(streams)
                if streams:
                    published.append(Match.of(streams, t0, t1, values))
            elif plain:
                self.state.counters.matches += plain.bit_count()
                published.append(Match(space.names(), plain, t0, t1, values))
            self.state.counters.matches += len(fed)
            produced.extend([(event, new_root) for event in made_events(fed, t0, t1, values)])
        if binding is not None:
            members = slots & program.filter_of(target).params.all
            if members:
                self.state.counters.spawned += 1
                end = instance.t1 if instance is not None and compiled.keeps_end else t1
                successor = EngineInstance(
                    self.state.new_id(), target, binding, t0, end, new_root, members
                )
                spawned.append((successor, instance))

    def vetoed(
        self,
        guards: list[int],
        slots: int,
        binding: Mapping[str, Value],
        attrs: Mapping[str, Value],
        t0: int,
        end: int,
    ) -> int:
        """The slots of ``slots`` an UNLESS edge of ``guards`` stops: a remembered event of its
        stream satisfies it, read with the binding, the firing event (``$1.@e.x``) and its end
        relative to ``t0`` (``$1.@end``).  O(guards × remembered events)."""
        seen = dict(binding)
        seen.update({f"@e.{name}": value for name, value in attrs.items()})
        seen["@end"] = end
        vetoed = 0
        state, program = self.state, self.program
        for edge_id in guards:
            compiled = program.edges[edge_id]
            params, stream, key = compiled.params, compiled.edge.stream, compiled.recall
            past = state.memory.events(stream)
            if key is not None and (value := seen.get(key.bound)) == value:  # not NaN
                past = state.memory.recalled(stream, key.attr, value)
            for event in past:
                state.counters.remembered_checked += 1
                found = event.attrs()
                groups = params.matching_groups(found)
                if groups:
                    own = event.t1 - event.t0 + 1
                    vetoed |= params.holds(groups, slots, seen, found, event.t1 - t0 + 1, own)
                    if vetoed == slots:
                        return vetoed
        return vetoed
