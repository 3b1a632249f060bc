"""The multi-query engine (Section 4.3): one merged DAG, FR / AN / AI indices, one epoch per call.

:class:`Engine` pairs a :class:`~cesar.server.engine.program.QueryProgram`
(every subscription's automata merged into one DAG, their generated code and
the FR index: what subscribe and unsubscribe change) with an
:class:`~cesar.server.engine.state.EngineState` (the live instances, the AN and
AI indices, deadlines and counters: what an epoch changes), as Flink CEP keeps
``NFA`` apart from ``NFAState``.  :meth:`Engine.process` consumes one epoch
exactly as Section 4.3 describes, per event of the epoch:

1. FR probe: the ∃-edges whose static part the event satisfies;
2. the start node fires those of its edges whose dynamic part holds;
3. AN probe: the active nodes whose filter's static part the event satisfies;
4. AI probe per such node: the instances its filter's dynamic part may hold
   for, verified; those are the *affected* instances (they leave their node);
5. each affected instance fires every FR-hit ∃-edge of its node whose dynamic
   part and guards hold.

New instances are installed, and affected ones removed, together at the end
(per stream rank, see below); outputs are emitted per subscription.  An
instance made at a node that joins (a pattern's AND) is installed as soon as
the event that made it is done, so the later events of its epoch see it; at
such a node an instance spans its events' smallest ``t0`` and largest ``t1``.  Streams
published by one subscription and read by another, internal resubscription
streams included, are processed in the same epoch after their producers: a
stream's *rank* is one more than the highest rank it reads, and ranks run in
order (installing between ranks is safe: a node's edges all read one stream).

A subscription added after epoch ``E`` receives exactly the matches made only
of events of later epochs: every instance carries its *root*, the earliest
epoch of the events it holds, and a match is emitted to a subscription only
if its root is later than the subscription's start — even when it was found
through nodes and instances shared with older subscriptions.

Options turn the optimisations off for comparison (Section 5.2.1): without
``merge`` each automaton has its own nodes; without ``indices`` the AN and AI
indices are not used: every node of every automaton looks at every event of
its stream (``nodes_visited``) and checks each of its instances — the paper's
naive system, in which each user runs her own automaton behind a shared
FR index.

Memory safety: an instance that can never fire again because every ∃-edge of
its node bounds DUR from above is collected once that bound has passed; with
``max_instances_per_subscription`` or ``max_instances`` set, the oldest instances are
dropped when a limit is exceeded (a subscription's only from itself) and the
subscriptions concerned get a :class:`Notice`.  Work is bounded too: with
``max_steps``, a subscription whose steps in one epoch pass it is cut for the rest
of the epoch (:mod:`~cesar.server.engine.work`), with a :class:`Notice`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.automaton import Automaton, EdgeKind
from cesar.automata.evaluate import Faults
from cesar.automata.pattern.plans import Plan, unplanned_pin
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event, Value, epoch_t1, made_events, run_epochs
from cesar.index.masks import slots_of
from cesar.server.engine.commons import Commons, private
from cesar.server.engine.installing import Installer
from cesar.server.engine.matches import Match, Output, expand
from cesar.server.engine.params import Group
from cesar.server.engine.planned import Enter, Retire, Steps, plannable
from cesar.server.engine.plans import Planner
from cesar.server.engine.probing import Probe, joined_dur
from cesar.server.engine.program import Change, CompiledEdge, EngineOptions, QueryProgram
from cesar.server.engine.skipping import Skipping
from cesar.server.engine.state import (
    EngineCounters,
    EngineInstance,
    EngineState,
    Notice,
)
from cesar.server.engine.stepping import Steppers
from cesar.server.engine.windowing import Windows
from cesar.server.engine.work import Work

__all__ = ["Engine", "EngineCounters", "EngineOptions", "Notice", "Output"]

_EMPTY: Mapping[str, Value] = {}


class Engine:
    """The multi-query engine: a compiled program and its run state.

    Methods by role: :meth:`subscribe` and :meth:`unsubscribe` between epochs
    (O(edges of the subscription)); :meth:`process` one epoch, :meth:`run` a
    finite event list; :meth:`check_valid` asserts every invariant.
    """

    def __init__(self, options: EngineOptions | None = None) -> None:
        self.options = options or EngineOptions()
        self.program = QueryProgram(self.options)
        self.state = EngineState()
        options = self.options
        self.steppers = Steppers(self.program, options.steps and options.indices)
        self.skipping = Skipping()
        self.commons = Commons()
        self.windows = Windows(options.max_window_events, options.share_windows)
        self.work = Work(options.max_steps, self._owners, options.max_engine_steps)
        self.probe = Probe(self.program, self.state, options, self.work)
        self.installer = Installer(self.program, self.state, options, self.steppers)
        self.planner = Planner(
            self.held,
            self.program.faults,
            self.program.codegen,
            self.options.functions,
            self.options.max_instances,
            self.options.max_steps,
            self.options.plan_costs,
        )

    @property
    def faults(self) -> Faults:
        """Arithmetic faults met by the generated code (atoms made false, maps skipped)."""
        return self.program.faults

    @property
    def counters(self) -> EngineCounters:
        """The deterministic work counters."""
        return self.state.counters

    @property
    def notices(self) -> list[Notice]:
        """Notices owed to subscriptions; the caller takes and clears them."""
        return self.state.notices

    @property
    def subscriptions(self) -> list[str]:
        """Ids of the live subscriptions: on the DAG oldest first, then the planned others."""
        program, commons = self.program, self.commons
        on_dag = [s for s in program.subscriptions if s not in commons]
        return on_dag + [s for s in self.planner.planned if s not in program]

    # ------------------------------------------------------------ subscriptions

    def subscribe(
        self,
        subscription: str,
        automata: Sequence[Automaton],
        since: float | None = None,
        pattern: Resolved | None = None,
        client: tuple[str, int] | None = None,
    ) -> None:
        """Add a subscription's automata (producers first) between epochs.

        It receives the matches made only of events of epochs after ``since``
        (None: the latest epoch of its clock group, i.e. only later events; a
        restored subscription passes the one it had).  With the ``plans``
        option a ``pattern`` (the automata's resolved form) that a lazy plan
        can run, reading only input streams, is planned (:mod:`.plans`).
        A ``client`` (name, steps) bounds its work in each epoch together with that client's
        other subscriptions (:meth:`.work.Work.join`).  Raises ValueError for a subscription
        id or a published stream that exists, and, without the ``plans`` option, for a
        pattern that pins a lazy plan (:func:`~cesar.automata.pattern.plans.unplanned_pin`).
        """
        program = self.program
        if subscription in program or subscription in self.planner.planned:
            raise ValueError(f"subscription {subscription} exists")
        if not self.options.merge:
            automata = private(subscription, automata)
        self.windows.check(automata, self._published)
        self.skipping.check(automata, self._read)
        if pattern is not None and not self.options.plans:
            refused = unplanned_pin(pattern)
            if refused is not None:
                raise ValueError(refused)
        if since is None:
            since = self._clock({s for a in automata for s in (a.name, *a.reads)})
        planner = self.planner
        for stream in {s for a in automata for s in a.reads} & planner.publishers.keys():
            producer = planner.planned[planner.publishers[stream]]
            self._take(
                planner.pin_eager(producer.subscription, self._clock(producer.pattern.reads))
            )
        if (
            self.options.plans
            and pattern is not None
            and pattern.reads.isdisjoint(program.rank)
            and plannable(pattern)
        ):
            streams = pattern.reads | {pattern.output.name}
            self.state.regroup(program.groups.join(streams), program.groups)
            self._take(self.planner.add(subscription, pattern, automata, since))
        else:
            self._enter(subscription, automata, since)
        self.skipping.add(subscription, automata)
        self.windows.add(subscription, automata)
        if client is not None:
            self.work.join(subscription, *client)

    def _owners(self) -> dict[tuple[int, int], str]:
        """The subscription of each (space, slot) on the DAG, shared streams' producers left
        out (no budget charges them, :mod:`.commons`).  O(automata)."""
        commons = self.commons
        return {
            (footprint.space, slot): subscription
            for subscription, _, footprint, slot in self.program.placements()
            if subscription not in commons
        }

    def _published(self, stream: str) -> bool:
        """Whether a subscription publishes ``stream``.  O(1)."""
        return stream in self.program.since or stream in self.planner.publishers

    def _read(self, stream: str) -> bool:
        """Whether a subscription reads ``stream``.  O(1) on the DAG, O(planned) beyond."""
        planned = self.planner.planned.values()
        return stream in self.program.read or any(stream in p.pattern.reads for p in planned)

    def _clock(self, streams: set[str] | frozenset[str]) -> float:
        """The latest epoch of the clock groups of ``streams``."""
        clocks, find = self.state.group_clock, self.program.groups.find
        return max((clocks.get(find(s), -math.inf) for s in streams), default=-math.inf)

    def _enter(self, subscription: str, automata: Sequence[Automaton], since: float) -> None:
        """Put a subscription's automata on the DAG, matching events after epoch ``since``;
        a shared stream it reads is put there once, for every reader (:mod:`.commons`)."""
        own, new = self.commons.split(subscription, automata)
        for shared in new:
            self._place(shared.name, (shared,), -math.inf)
        self._place(subscription, own, since)

    def _leave(self, subscription: str) -> None:
        """Take a subscription's automata off the DAG, and the shared streams only it read."""
        self._apply(self.program.unsubscribe(subscription))
        for stream in self.commons.release(subscription):
            self._apply(self.program.unsubscribe(stream))

    def _place(self, subscription: str, automata: Sequence[Automaton], since: float) -> None:
        """Put ``automata`` on the DAG as ``subscription``'s, matching events after ``since``."""
        program, groups = self.program, self.program.groups
        change = program.subscribe(subscription, automata, since)
        streams = {s for a in automata for s in (a.name, *a.reads)}
        self.state.regroup(groups.join(streams), groups)
        self._apply(change)

    def _retire(self, subscription: str, until: float | None) -> None:
        """Keep only a subscription's matches rooted at or before ``until`` (a plan that
        replaced it takes the others; inf: all again); None: take its automata off the DAG."""
        if until is None:
            self._leave(subscription)
        else:
            self.program.retire(subscription, until)

    def held(self, subscription: str) -> float:
        """The partial matches the DAG holds for a subscription: at each node of its automata,
        the node's live instances divided among the automata using it.  O(their nodes)."""
        live, nodes, placement = self.state.live, self.program.dag.nodes, self.program.placement
        total, index = 0.0, 0
        while (placed := placement(subscription, index)) is not None:
            for node in placed[0].nodes:
                instances = live.get(node)
                if instances is not None:
                    total += len(instances) / max(nodes[node].refs, 1)
            index += 1
        return total

    def replan(self, subscription: str, plan: Plan) -> bool:
        """Switch a planned subscription to ``plan`` now (even a pinned one, even while a
        previous switch finishes); False if it runs already.  KeyError if not planned,
        ValueError for a plan that cannot run it."""
        planned = self.planner.planned[subscription]
        clock = self._clock(planned.pattern.reads)
        steps: Steps = []
        switched = self.planner.switch(subscription, plan, clock, steps, force=True)
        self._take(steps)
        return switched

    def unsubscribe(self, subscription: str) -> None:
        """Remove a subscription; what only it used goes, other subscriptions are untouched.

        Its slots leave every instance (an instance left with none goes).
        """
        steps = self.planner.remove(subscription)
        if steps is None:
            self._leave(subscription)
        else:
            self._take(steps)
        self.skipping.remove(subscription)
        self.windows.remove(subscription)
        self.work.remove(subscription)

    def _take(self, steps: Steps) -> None:
        """Do on the DAG what the planner returned, in order."""
        for step in steps:
            if isinstance(step, Enter):
                self._enter(step.subscription, step.automata, step.since)
            elif isinstance(step, Retire):
                self._retire(step.subscription, step.until)
            else:
                self.state.remember_past(step.events)

    def _apply(self, change: Change) -> None:
        """Bring the run state in line with a changed program.

        First the nodes whose DUR bound changed settle their lazy instances and
        file them eagerly (their slots may no longer bound DUR alike).
        """
        program, state = self.program, self.state
        self.work.forget_owners()
        self.steppers.forget(change.deleted)
        if state.stepped:
            self.settle({n for n in change.rebound if n in state.live})
        for node in change.deleted:
            state.drop_node(node)
        state.forget(change.freed)
        for node in change.refiltered:
            if node in state.live:
                self.installer.activate(node)
        for node in change.rebound:
            state.queue(node, program.clock_group(node), program.bound[node])

    def settle(self, unstep: set[int] | None = None) -> None:
        """Give every lazily stepped instance the step it owes (a snapshot reads them all); or,
        given ``unstep``, those of its nodes only, which file them eagerly from now on.
        O(lazy instances settled, and their nodes' filter groups)."""
        state = self.state
        if unstep is None:
            groups = list(state.stepped)
        else:
            groups = [g for n in unstep for g in state.an_groups[n] if g in state.stepped]
        for group in groups:
            steps = state.stepped[group]
            took, ended = steps.settle_all(math.inf, state.live[steps.rebind.source])
            state.counters.settled += took
            steps.history.clear()
            if unstep is not None:
                del state.stepped[group]
                state.by_group.setdefault(group, {}).update(steps.files)
            for instance in ended:
                state.remove(instance)

    # ------------------------------------------------------------------ epochs

    def process(self, epoch: Sequence[Event]) -> list[Event]:
        """Process one epoch (events with one ``t1``, later than each stream's last); the matches,
        one event per subscription (:meth:`process_matches` without the copies)."""
        return expand(self.process_matches(epoch))

    def process_matches(self, epoch: Sequence[Event]) -> Output:
        """Process one epoch (events with one ``t1``, later than each stream's last); the matches:
        a :class:`~cesar.server.engine.matches.Match` names the subscriptions of a shared
        automaton that one match goes to (resolve it before subscriptions change), an event
        stands for one subscription's.

        Raises ValueError for events of several ``t1`` or one not after the
        last epoch of its stream: streams keep their own clocks, and the caller
        orders the epochs of each clock group (:mod:`cesar.server.engine.clocks`).
        """
        state = self.state
        if not epoch:
            return []
        t1 = epoch_t1(epoch, None)
        clock = state.clock
        streams = {event.stream for event in epoch}
        for stream in streams:
            if stream in clock and t1 <= clock[stream]:
                raise ValueError(
                    f"an epoch of {stream} at t1 = {t1} is not after its last, t1 = {clock[stream]}"
                )
        if self.windows:
            epoch, owed = self.windows.enrich(epoch)
            state.notices.extend(Notice(s, reason) for s, reason in owed)
        state.counters.epochs += 1
        state.counters.events += len(epoch)
        work = self.work
        work.begin()
        state.counters.active_nodes_sum += len(state.live)
        program = self.program
        rank = program.rank
        groups = {program.groups.find(stream) for stream in streams}
        published: Output = []
        self._overdue(t1, groups, published)
        pending: dict[int, list[tuple[Event, float]]] = {}
        read = self.program.read
        for event in epoch:
            if event.stream in read:  # no automaton on the DAG reads the others
                pending.setdefault(rank.get(event.stream, 0), []).append((event, t1))
        self._ranks(pending, published)
        for stream in streams:
            clock[stream] = t1
        for group in groups:
            state.group_clock[group] = max(state.group_clock.get(group, t1), t1)
        fed: dict[int, list[tuple[Event, float]]] = {}
        for event, root in self._expire(state.collect(t1, groups, self.program.bound), published):
            fed.setdefault(rank[event.stream], []).append((event, root))
        self._ranks(fed, published)
        if self.program.dag.guarded:
            self._remember(epoch, published, groups)
        planner = self.planner
        if planner.planned:
            lazy: list[Event] = []
            self._take(planner.process(epoch, lazy))
            state.counters.matches += len(lazy)
            published.extend(lazy)
            budget = planner.budget
            if budget.dropped or budget.notices:
                state.counters.dropped += budget.dropped
                budget.dropped = 0
                state.notices.extend(Notice(s, reason) for s, reason in budget.notices)
                budget.notices.clear()
        self.installer.hold(work)
        if work.charging:
            state.counters.steps += work.done
            owed = work.finish()
            state.counters.cut += len(work.cut_now)
            state.notices.extend(Notice(s, reason) for s, reason in owed)
        if self.skipping:
            published = self.skipping.judge(published, groups, state.group_clock, program.groups)
        return published

    def _remember(self, epoch: Sequence[Event], published: Output, groups: set[str]) -> None:
        """Keep this epoch's events of the streams UNLESS edges read, and forget those that
        no longer matter in the clock groups the epoch moved; over ``max_instances`` a stream
        forgets its oldest, and the subscriptions asking about it get a notice once until it
        recovers.  O(events kept and dropped)."""
        state, program = self.state, self.program
        horizons = program.remembering()
        for event in (*epoch, *expand(published)):
            if event.stream in horizons:
                state.remember(event)
        limit = self.options.max_instances
        for stream, horizon in horizons.items():
            group = program.groups.find(stream)
            if group in groups:
                state.forget_before(stream, state.group_clock[group] - horizon)
            if limit is None:
                continue
            over = state.forget_beyond(stream, limit)
            state.counters.dropped += over
            if not over:
                state.forgetting.discard(stream)
            elif stream not in state.forgetting:
                state.forgetting.add(stream)
                asking = {
                    target
                    for (_, target), guards in program.dag.guarded.items()
                    if any(program.edges[g].edge.stream == stream for g in guards)
                }
                for subscription in program.users(asking):
                    state.notices.append(
                        Notice(
                            subscription,
                            f"the engine exceeded {limit} remembered events of {stream}; the "
                            "oldest are forgotten, so a negation may miss one (one notice until "
                            "it recovers)",
                        )
                    )

    def _ranks(self, pending: dict[int, list[tuple[Event, float]]], published: Output) -> None:
        """Run the rounds of ``pending`` (events by rank) in rank order, feeding each round's
        matches of read streams to the rank that reads them."""
        rank = self.program.rank
        while pending:
            produced = self._round(pending.pop(min(pending)), published)
            for event, root in produced:
                if event.stream not in self.program.internal:
                    published.append(event)
                pending.setdefault(rank[event.stream], []).append((event, root))

    def _overdue(self, t1: int, groups: set[str], published: Output) -> None:
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
            for event, root in self._expire(dead, published):
                fed.setdefault(rank[event.stream], []).append((event, root))
            self._ranks(fed, published)

    def _expire(self, dead: list[EngineInstance], published: Output) -> list[tuple[Event, float]]:
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
            self._fire(compiled, instance, instance.members, deadline, _EMPTY, bound, root, [], out)
        internal = program.internal
        published.extend(event for event, _ in fed if event.stream not in internal)
        return fed

    def run(self, events: Iterable[Event]) -> list[Event]:
        """Process a finite list of events grouped into epochs by ``t1`` (the input goes on:
        :meth:`finish` ends it)."""
        return run_epochs(self.process, events)

    def finish(self) -> list[Event]:
        """End the input: the matches AFTER MATCH SKIP holds that its policies keep, published
        now that no run can complete (as Flink's final watermark releases them).  A later
        epoch is judged without the bounds they set."""
        return self.skipping.finish()

    def _round(
        self, events: list[tuple[Event, float]], published: Output
    ) -> list[tuple[Event, float]]:
        """One rank of an epoch: Section 4.3's steps for each event, then install.

        Matches of streams nobody reads go to ``published``; the others are
        returned with their roots, for the next rank.
        """
        spawned: list[tuple[EngineInstance, EngineInstance | None]] = []
        leaving: dict[int, int] = {}
        produced: list[tuple[Event, float]] = []
        out = (produced, published)
        counters = self.state.counters
        edges = self.program.edges
        fire = self._fire
        program = self.program
        # A REBIND that keeps the instance's end records, it takes no event: once per
        # instance and edge in a round, for every slot any event moved.
        records: dict[tuple[int, int], tuple[CompiledEdge, EngineInstance, int, tuple[Any, ...]]]
        records = {}
        taken: dict[int, int] = {}  # per instance, the slots a REBIND took an event for
        joining = program.dag.joining
        spaces = program.dag.nodes
        joined = 0  # spawned[:joined] holds no instance of a joining node
        joined_at: set[int] = set()  # the joining nodes that got instances
        for event, root in events:
            if joining and len(spawned) > joined:
                joined = self._join(spawned, joined, joined_at)
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
                    fire(edges[edge_id], None, slots, event, attrs, own, root, spawned, out)
            for node, affected, firing, forks in self.probe.affected(event, attrs, own):
                for instance, step, rebind in forks:  # its group's lazy step of this epoch
                    leaving[instance.id] = leaving.get(instance.id, 0) | instance.members
                    stepping = (step.event, step.attrs, 1, step.root, spawned, out)
                    fire(rebind, instance, instance.members, *stepping)
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
                        left &= ~stay.params.holds(staying, slots, binding, attrs, dur, own)
                    leaving[instance.id] = leaving.get(instance.id, 0) | left
                    for compiled, groups in firing:
                        moving = compiled.params.holds(groups, slots, binding, attrs, dur, own)
                        if not moving:
                            continue
                        args = (event, attrs, own, root, spawned, out)
                        if not compiled.edge.keeps_end:
                            if compiled.edge.kind is EdgeKind.REBIND:
                                taken[instance.id] = taken.get(instance.id, 0) | moving
                        else:
                            key = (instance.id, id(compiled))
                            known = records.get(key)
                            if known is not None:
                                moving |= known[2]
                                args = known[3]
                            records[key] = (compiled, instance, moving, args)
                            continue
                        fire(compiled, instance, moving, *args)
        for compiled, instance, moving, args in records.values():
            if compiled.edge.unless_taken:  # not for the slots that took an event
                moving &= ~taken.get(instance.id, 0)
            if moving:
                fire(compiled, instance, moving, *args)
        self.installer.install(leaving, spawned)
        if joined_at:
            self.installer.enforce_limits(joined_at)
        return produced

    def _join(
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

    def _fire(
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
        node = program.dag.nodes[target]
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
                slots &= ~self._vetoed(guards, slots, binding_in, attrs, t0, dur)
                if not slots:
                    return
        try:
            assert compiled.build is not None
            binding = compiled.build(binding_in, attrs, dur, own)
        except ArithmeticFault:
            self.program.faults.arithmetic += 1
            return
        new_root = root if instance is None else min(root, instance.root)
        ending = slots & program.final.get(target, 0)
        if ending:
            space = program.spaces[node.space]
            slot_stream = space.streams
            values = tuple(sorted(binding.items()))
            produced, published = out
            plain, fed_slots = ending & ~space.fed, ending & space.fed
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
        if node.filter is not None:
            members = slots & program.edges[node.filter].params.all
            if members:
                self.state.counters.spawned += 1
                end = instance.t1 if instance is not None and compiled.edge.keeps_end else t1
                successor = EngineInstance(
                    self.state.new_id(), target, binding, t0, end, new_root, members
                )
                spawned.append((successor, instance))

    def _vetoed(
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
            past: Iterable[Event] = state.remembered.get(stream, ())
            if key is not None and (value := seen.get(key.bound)) == value:  # not NaN
                past = state.recalled(stream, key.attr, value)
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

    def check_valid(self) -> None:
        """Assert every invariant of the program, the run state and how they meet."""
        program, state = self.program, self.state
        program.check_valid()
        state.check_valid()
        self.planner.check_valid(program.__contains__)
        self.commons.check_valid(program.subscriptions)
        self.skipping.check_valid(self.subscriptions)
        self.windows.check_valid(self.subscriptions)
        self.work.check_valid(set(self.subscriptions))
        assert state.held_over <= set(self.subscriptions)
        find = program.groups.find
        assert all(find(group) == group for group in (*state.group_clock, *state.expiry))
        for node, index in state.live.items():
            assert program.dag.nodes[node].filter is not None
            groups = program.filter_groups(node)
            assert {id(g) for g in state.an_groups[node]} == {id(g) for g in groups}
            users = program.filter_of(node).params.all
            for instance in index.instances():
                assert not instance.members & ~users, f"instance {instance.id}: a slot left"
