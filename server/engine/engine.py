"""The multi-query engine (Section 4.3): one merged DAG, FR / AN / AI indices, one epoch per call.

:class:`Engine` pairs a :class:`~cesar.server.engine.program.QueryProgram`
(every subscription's automata merged into one DAG, their generated code and
the FR index: what subscribe and unsubscribe change) with an
:class:`~cesar.server.engine.state.EngineState` (the live instances, the AN and
AI indices, deadlines and counters: what an epoch changes), as Flink CEP keeps
``NFA`` apart from ``NFAState``.  :meth:`Engine.process` consumes one epoch
exactly as Section 4.3 describes (its rounds: :mod:`~cesar.server.engine.rounds`), per event
of the epoch:

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
from collections.abc import Iterable, Sequence

from cesar.automata.automaton import Automaton
from cesar.automata.evaluate import Faults
from cesar.automata.pattern.plans import Plan, unplanned_pin
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event, epoch_t1, run_epochs
from cesar.server.engine.commons import Commons, private
from cesar.server.engine.installing import Installer
from cesar.server.engine.matches import Output, expand
from cesar.server.engine.options import EngineOptions
from cesar.server.engine.planned import Enter, Retire, Steps, plannable
from cesar.server.engine.plans import Planner
from cesar.server.engine.probing import Probe
from cesar.server.engine.program import Change, QueryProgram
from cesar.server.engine.rounds import Rounds
from cesar.server.engine.skipping import Skipping
from cesar.server.engine.state import (
    EngineCounters,
    EngineState,
    Notice,
)
from cesar.server.engine.stepping import Steppers
from cesar.server.engine.windowing import Windows
from cesar.server.engine.work import Work

__all__ = ["Engine", "EngineCounters", "EngineOptions", "Notice", "Output"]


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
        self.rounds = Rounds(self.program, self.state, self.probe, self.installer, self.work)
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
                self.state.memory.remember_past(step.events)

    def _apply(self, change: Change) -> None:
        """Bring the run state in line with a changed program.

        First the nodes whose DUR bound changed settle their lazy instances and
        file them eagerly (their slots may no longer bound DUR alike).
        """
        program, state = self.program, self.state
        self.work.forget_owners(change.left)
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
        rounds = self.rounds
        published: Output = []
        rounds.overdue(t1, groups, published)
        pending: dict[int, list[tuple[Event, float]]] = {}
        read = self.program.read
        for event in epoch:
            if event.stream in read:  # no automaton on the DAG reads the others
                pending.setdefault(rank.get(event.stream, 0), []).append((event, t1))
        rounds.ranks(pending, published)
        for stream in streams:
            clock[stream] = t1
        for group in groups:
            state.group_clock[group] = max(state.group_clock.get(group, t1), t1)
        fed: dict[int, list[tuple[Event, float]]] = {}
        for event, root in rounds.expire(state.collect(t1, groups, program.bound), published):
            fed.setdefault(rank[event.stream], []).append((event, root))
        rounds.ranks(fed, published)
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
        memory = state.memory
        horizons = program.remembering()
        for event in (*epoch, *expand(published)):
            if event.stream in horizons:
                memory.remember(event)
        limit = self.options.max_instances
        for stream, horizon in horizons.items():
            group = program.groups.find(stream)
            if group in groups:
                memory.forget_before(stream, state.group_clock[group] - horizon)
            if limit is None:
                continue
            over = memory.forget_beyond(stream, limit)
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

    def run(self, events: Iterable[Event]) -> list[Event]:
        """Process a finite list of events grouped into epochs by ``t1`` (the input goes on:
        :meth:`finish` ends it)."""
        return run_epochs(self.process, events)

    def finish(self) -> list[Event]:
        """End the input: the matches AFTER MATCH SKIP holds that its policies keep, published
        now that no run can complete (as Flink's final watermark releases them).  A later
        epoch is judged without the bounds they set."""
        return self.skipping.finish()

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
