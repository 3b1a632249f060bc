"""The engine's planner: live rates, a plan per pattern subscription, switches that lose nothing.

A pattern subscription that a lazy plan can run (:func:`~cesar.automata.pattern.plans.refusal`)
is *planned*.  The planner thinks in marginal costs beside the other subscriptions: on the
shared DAG a subscription costs little more than what its indices and merged nodes already
pay, while a lazy run is its own (it judges the events that reach it, and buffers them).
So a subscription starts **eager**, on the DAG, and is left there unwatched (no work
per event) while the DAG holds few partial matches for it: every ``sweep`` epochs
(:class:`PlanCosts`) a slice of the eager subscriptions is looked at (``held``: the
live instances of its nodes, divided among the automata sharing each), and one holding
``heavy`` or more is *watched*.

An event reaches a subscription with work (a lazy run, a negation history, rates to
measure) only if it concerns it: one probe of the own-condition index
(:class:`~cesar.server.engine.fitting.FitIndex`) per event gives the component signatures it
fits, whatever the number of subscriptions reading its stream; from each it goes to the
components that need every event they fit (a measured subscription's, a lazy run's first) and
to the lazy runs with partial matches waiting there for its partition key (the buffer pool's
waiting lists), and joins the signature's shared buffer once
(:class:`~cesar.automata.pattern.buffers.BufferPool`).  A subscription is also visited when
a check or a retirement falls due (a heap by tick), with or without events.

A watched subscription keeps, per component, the rate of the events that pass the
component's own conditions and the rate of all events of its streams (exponentially decayed
over ``decay_windows × WITHIN`` ticks; the latter counted per stream), the partition
keys sharing them, and the selectivity of each condition between components as the lazy
runs judge it (shown, not weighed).  Every ``WITHIN`` ticks (``check`` at least) it weighs
the plans by :func:`~cesar.automata.pattern.plans.choose`: a lazy plan pays ``look`` per
event that reaches it besides its partial-match work; eager's cost is divided among the
planned subscriptions of its template, which the DAG merges.  It switches when the best
costs less than ``1 / HYSTERESIS`` of the current plan's cost and the saving is worth
``MATERIAL`` of the events every plan looks at, the rates have been watched for half a decay
time, and the previous switch has finished.

Every switch to a lazy plan is guarded: the lazy run's measured work (partial matches made,
candidates searched, and its look at every event) is compared, two windows on, with the
eager cost it was chosen against; worse by ``HYSTERESIS`` and it goes back to eager, barred
from lazy plans for ``BAR_WINDOWS`` windows.  A subscription may pin its plan (``PLAN
chain(c, b, a)`` in the pattern); a pinned plan never changes.

The eager plan is the subscription's automaton on the shared DAG; the others
are :class:`~cesar.automata.pattern.lazy.LazyRun` s.  A switch at epoch ``E``
(the subscription's clock) starts the new plan taking the matches whose
earliest event is after ``E`` and lets the old one finish the rest: it
keeps only matches rooted at or before ``E`` and goes after the epoch at or past
``E + WITHIN``: no such match can complete later.  So a match that straddles the
switch is neither lost nor doubled.

A planned subscription's output is published, not fed to other subscriptions:
a subscription that reads it pins it eager first.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Sequence

from cesar.automata.automaton import Automaton, Edge
from cesar.automata.evaluate import Faults
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.pattern.buffers import Buffer, key_of
from cesar.automata.pattern.judging import Compiler, FastJudge, Fits
from cesar.automata.pattern.lazy import LazyRun
from cesar.automata.pattern.plans import EAGER, Plan, PlanKind, choose, cost, pinned, refusal
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event
from cesar.automata.terms import Pred, to_cel
from cesar.server.engine.lazybudget import LazyBudget
from cesar.server.engine.planned import (
    Enter,
    PlanCosts,
    Planned,
    Rates,
    Recall,
    Retire,
    Steps,
    edges_of,
    work_of,
)
from cesar.server.engine.plansave import Restored, SavedPlanned, load
from cesar.server.engine.reaching import Reaching

HYSTERESIS = 1.5
"""A plan must cost less than the current one by this factor to replace it ..."""
MATERIAL = 0.1
"""... and save partial-match work worth this share of the events every plan looks at."""
JUDGED = 30
"""A condition's selectivity counts once the lazy runs judged this many assignments with it."""
CROWD = 8
"""An eager subscription among this many of its template stays eager: its share of the
DAG's work is too small to leave, so its rates are not measured (one test per event saved)."""
SLICES = 16
"""A sweep looks at one slice of at most this many of the eager subscriptions ..."""
SWEPT = 256
"""... each holding at least this many (all of them at once while there are fewer)."""
BAR_WINDOWS = 16
"""A lazy plan that measured worse than the eager cost it was chosen against goes back to
eager, which it keeps for this many windows."""
GUARD_WINDOWS = 2
"""A lazy plan's work is measured over this many windows after the switch."""
BUDGET_EVERY = 64
"""The lazy runs' common budget is enforced every this many epochs (a budget period)."""
KEY_SAMPLE = 8
"""The partition keys of one epoch in this many are counted (how many keys share the events)."""


class Planner:
    """The planned subscriptions of one engine; the engine calls it around each epoch.

    What it needs of the DAG it returns as :data:`~cesar.server.engine.planned.Steps` for the
    engine to apply, in order; ``held`` tells it the partial matches the DAG holds for a
    subscription (its share of its nodes' instances).
    """

    def __init__(
        self,
        held: Callable[[str], float],
        faults: Faults,
        compiler: Compiler,
        functions: FunctionRegistry = DEFAULT_FUNCTIONS,
        limit: int | None = None,
        max_steps: int | None = None,
        costs: PlanCosts | None = None,
    ) -> None:
        self.held_on_dag = held
        self.costs = costs or PlanCosts()
        self.budget = LazyBudget(limit, max_steps)
        self.faults = faults
        self.compiler = compiler
        self.functions = functions
        self.planned: dict[str, Planned] = {}
        self.reaching = Reaching()
        """The planned subscriptions an epoch may have work for (a lazy run, a negation
        history, rates to measure; an idle eager one is left out), and the events' ways to
        them; the lazy runs' shared buffers (``reaching.pool``)."""
        self.due: list[tuple[float, int, str]] = []
        """A heap of (tick, number, subscription): a check or a retirement falls due then, with
        or without events reaching it."""
        self.dues = itertools.count()
        self.publishers: dict[str, str] = {}
        """Per stream a planned subscription publishes, that subscription."""
        self.templates: dict[tuple[Edge, ...], int] = {}
        """Each template of a planned subscription, numbered (a subscription's edges up to
        constants; hashing one is deep, so it is done when it subscribes and leaves)."""
        self.numbers = itertools.count()
        self.members: dict[int, dict[str, Planned]] = {}
        """Per template (:attr:`Planned.template`), its planned subscriptions: eager's cost
        is shared among them, and one joining others starts eager beside them."""
        self.switches = 0
        self.epochs = 0
        self.saved: dict[str, SavedPlanned] = {}
        """Saved states (:func:`~cesar.server.engine.plansave.save`) waiting for their
        subscriptions to come back."""
        self.restored = Restored()
        """The events their lazy runs held, one object per event whichever run saved it."""

    def add(
        self, subscription: str, pattern: Resolved, automata: Sequence[Automaton], since: float
    ) -> Steps:
        """Plan a new subscription: its pin, else eager (unwatched until the DAG holds
        ``heavy`` partial matches for it), or the state saved for it."""
        pin = pinned(pattern)
        tau = self.costs.decay_windows * max(pattern.window or 1, 1)
        rates = Rates(tau, [0.0] * (len(pattern.steps) + 1))
        fits = Fits(pattern, FastJudge(pattern, self.faults, self.functions, self.compiler))
        edges = edges_of(automata)
        shape = self.templates.get(edges)
        if shape is None:
            shape = self.templates[edges] = next(self.numbers)
        siblings = self._siblings(shape)
        plan = pin or EAGER
        planned = Planned(
            subscription,
            pattern,
            tuple(automata),
            since,
            plan,
            pin is not None,
            rates,
            fits,
            shape,
        )
        if pin is not None:
            planned.why = "pinned by the pattern's PLAN"
        elif siblings:
            planned.why = f"eager: it shares the DAG with {siblings} like it"
        else:
            planned.why = (
                f"eager: weighed once the DAG holds {self.costs.heavy:.0f} partial matches for it"
            )
        if any(n.after == -1 for n in pattern.negations):
            planned.history = Buffer(False)
        self.planned[subscription] = planned
        self.publishers[pattern.output.name] = subscription
        saved = self.saved.pop(subscription, None)
        steps: Steps = []
        if saved is None:
            self._start(planned, planned.plan, since, steps)
        else:
            steps = load(planned, saved, self.run_for, self.restored)
            for run in planned.runs:
                run.move(self.reaching.pool)
            if not self.saved:
                self.restored = Restored()
        self._join(planned, +1)
        return steps

    def remove(self, subscription: str) -> Steps | None:
        """Forget a planned subscription (its automata leave the DAG); None if not one."""
        planned = self.planned.pop(subscription, None)
        if planned is None:
            return None
        self._drop(planned, [])
        self._join(planned, -1)
        del self.publishers[planned.pattern.output.name]
        return [Retire(subscription, None)] if planned.dag is not None else []

    def _join(self, planned: Planned, step: int) -> None:
        """Count a subscription in (+1) or out (-1) of its template; refresh the template's
        subscriptions when it crosses ``CROWD`` (they start or stop being measured)."""
        shape = planned.template
        members = self.members.setdefault(shape, {})
        before = len(members)
        if step > 0:
            members[planned.subscription] = planned
        else:
            del members[planned.subscription]
            self._refresh(planned, False)
            if not members:
                del self.members[shape]
                del self.templates[edges_of(planned.automata)]
        crossed = (before >= CROWD) != (len(members) >= CROWD)
        for member in members.values() if crossed else (planned,) if step > 0 else ():
            self._refresh(member)

    def _siblings(self, shape: int) -> int:
        """How many planned subscriptions have template ``shape``."""
        return len(self.members.get(shape, ()))

    def _watching(self, planned: Planned) -> bool:
        """Whether an eager subscription's plans are weighed: watched, not crowded."""
        return planned.watched and self._siblings(planned.template) < CROWD

    def _refresh(self, planned: Planned, present: bool = True) -> None:
        """Put a subscription among the readers of its streams if an epoch has work for it
        (a lazy run, a negation history, or rates to measure), or take it out."""
        idle = planned.pinned or (planned.plan == EAGER and not self._watching(planned))
        if idle != planned.idle:  # measuring again: the old rates are stale
            planned.idle = idle
            planned.rates = Rates(planned.rates.tau, [0.0] * len(planned.rates.counts))
        active = present and (not idle or bool(planned.runs) or planned.history is not None)
        known = planned.subscription in self.reaching
        self.reaching.register(planned, active)
        if active:
            if not known:
                planned.arrived = self.reaching.arrivals(planned)
            self._schedule(planned)
        elif known:
            planned.due = math.inf

    def _schedule(self, planned: Planned) -> None:
        """Put ``planned`` on the heap at its next check or retirement, if earlier than the
        tick it is due at already."""
        window = planned.window
        due = planned.next_check if not planned.idle else math.inf
        for run in planned.runs:
            due = min(due, run.until + window)
        if planned.dag is not None:
            due = min(due, planned.dag[1] + window)
        if due < planned.due:
            planned.due = due
            if due < math.inf:
                heapq.heappush(self.due, (due, next(self.dues), planned.subscription))

    def pin_eager(self, subscription: str, clock: float) -> Steps:
        """Another subscription reads this one: make it eager for good."""
        planned = self.planned[subscription]
        planned.pinned = True
        planned.why = "eager: another subscription reads its output"
        steps: Steps = []
        if planned.plan.kind is not PlanKind.EAGER:
            self.switch(subscription, EAGER, clock, steps, force=True)
        self._refresh(planned)
        return steps

    def switch(
        self, subscription: str, plan: Plan, clock: float, steps: Steps, force: bool = False
    ) -> bool:
        """Switch to ``plan`` after epoch ``clock``, adding the DAG's part to ``steps``; False
        (nothing done) if it runs already, or unless ``force``d if pinned or while a previous
        switch finishes.  ValueError for a plan that cannot run the pattern.

        Back to eager while its DAG automata still finish: they take every match again,
        and the lazy runs started since they retired go (what they made completed once).
        """
        planned = self.planned[subscription]
        reason = refusal(planned.pattern, plan)
        if reason is not None:
            raise ValueError(f"plan {plan.spell()}: {reason}")
        if plan == planned.plan or (not force and (planned.pinned or planned.retiring)):
            return False
        planned.promise = None
        if planned.plan.kind is PlanKind.EAGER:
            assert planned.dag is not None
            planned.dag = (planned.dag[0], clock)
            steps.append(Retire(subscription, clock))
        else:
            planned.runs[-1].until = clock
        planned.plan = plan
        if plan.kind is PlanKind.EAGER and planned.dag is not None:
            since = planned.dag[0]
            self._drop(planned, [run for run in planned.runs if run.until <= since])
            planned.dag = (since, math.inf)
            steps.append(Retire(subscription, math.inf))
        else:
            self._start(planned, plan, clock, steps)
        self.switches += 1
        self._refresh(planned)
        return True

    def _start(self, planned: Planned, plan: Plan, since: float, steps: Steps) -> None:
        past = list(planned.history) if planned.history is not None else []
        if plan.kind is PlanKind.EAGER:
            planned.dag = (since, math.inf)
            steps.append(Enter(planned.subscription, planned.automata, since))
            if past:
                steps.append(Recall(tuple(past)))
        else:
            run = self.run_for(planned, plan, since, math.inf)
            run.seed(past)
            planned.runs.append(run)

    def _drop(self, planned: Planned, kept: list[LazyRun]) -> None:
        """Keep only ``kept`` of ``planned``'s lazy runs; the others give their buffers back."""
        for run in planned.runs:
            if run not in kept:
                run.close()
        planned.runs = kept

    def run_for(
        self, planned: Planned, plan: Plan, since: float, until: float, shared: bool = True
    ) -> LazyRun:
        """A lazy run of ``planned`` on ``plan`` taking the matches rooted in (since, until],
        its buffers in the planner's pool (``shared``) or its own."""
        return LazyRun(
            planned.pattern,
            plan,
            since,
            until,
            self.faults,
            self.functions,
            self.compiler,
            self.budget.max_steps,
            self.reaching.pool if shared else None,
            planned.subscription,
        )

    def process(self, epoch: Sequence[Event], published: list[Event]) -> Steps:
        """One epoch for every planned subscription it has work for: those whose components
        its events may be (one probe of :attr:`fitting` per event), whose negations they
        may be, and those due a check or a retirement.  Rates, lazy runs (their matches go
        to ``published``), retirements, re-plans; returns what the DAG must do."""
        now = epoch[0].t1
        steps: Steps = []
        self.epochs += 1
        reached, mine = self.reaching.route(epoch, self.planned, published)
        while self.due and self.due[0][0] <= now:
            tick, _, name = heapq.heappop(self.due)
            planned = self.planned.get(name)
            if planned is not None and planned.due == tick:  # else a later entry stands
                planned.due = math.inf
                reached.setdefault(name, {})
        for name, fitting in reached.items():
            self._visit(self.planned[name], mine.get(name, []), fitting, now, steps)
        self.reaching.pool.prune(now)
        if not self.epochs % self.costs.sweep:
            self._sweep()
        if not self.epochs % BUDGET_EVERY:
            self.budget.period(self.planned.values())
        return steps

    def _visit(
        self,
        planned: Planned,
        mine: list[Event],
        places: dict[int, list[int]],
        now: int,
        steps: Steps,
    ) -> None:
        """One epoch of ``planned``: ``mine``, the events that reach it (``places``: the
        components each may be, by ``id``)."""
        arrived = self.reaching.arrivals(planned)
        planned.rates.seen(arrived - planned.arrived, now)
        planned.arrived = arrived
        if planned.idle and not planned.runs:  # a negation history only: eager stays
            if planned.history is not None:
                self._recall(planned, mine, now)
            return
        add = planned.rates.add
        for found in places.values():
            for n in found:
                add(n, now)
        if planned.pattern.keyed and not self.epochs % KEY_SAMPLE:
            for event in mine:
                if places[id(event)]:
                    planned.rates.key(key_of(planned.pattern, event), now)
        abandoned = 0
        for run in planned.runs:
            abandoned += run.end(now)
        if abandoned:
            self.budget.abandoned(planned)
        if planned.history is not None:
            self._recall(planned, mine, now)
        self.budget.hold(planned)
        self._retire(planned, now, steps)
        if not planned.idle and now >= planned.next_check:
            planned.next_check = now + max(planned.window, self.costs.check)
            self._replan(planned, now, steps)
        if planned.subscription in self.reaching:
            self._schedule(planned)

    def _sweep(self) -> None:
        """Watch the eager subscriptions of this sweep's slice that the DAG holds ``heavy``
        partial matches or more for.  O(planned subscriptions), the DAG asked about a slice."""
        slices = max(1, min(SLICES, -(-len(self.planned) // SWEPT)))
        part = self.epochs // self.costs.sweep % slices
        for number, planned in enumerate(self.planned.values()):
            if number % slices != part or not planned.idle or planned.plan != EAGER:
                continue
            if planned.pinned or self._siblings(planned.template) >= CROWD:
                continue
            held = self.held_on_dag(planned.subscription)
            if held >= self.costs.heavy:
                planned.watched = True
                planned.why = f"eager: the DAG holds {held:.0f} partial matches for it; weighing"
                self._refresh(planned)

    def _recall(self, planned: Planned, events: Sequence[Event], now: int) -> None:
        """Keep the negated events of the last window (a negation before the first component)."""
        assert planned.history is not None
        negated = planned.fits.negated
        for event in events:
            if event.stream in negated:
                planned.history.add(None, event)
        horizon = now - planned.window
        planned.history.prune(lambda e: e.t0 <= horizon)

    def _retire(self, planned: Planned, now: int, steps: Steps) -> None:
        window = planned.window
        kept = [r for r in planned.runs if now < r.until + window]
        if len(kept) < len(planned.runs):
            self._drop(planned, kept)
            self._refresh(planned)
        if planned.dag is not None and now >= planned.dag[1] + window:
            planned.dag = None
            steps.append(Retire(planned.subscription, None))

    def _replan(self, planned: Planned, now: int, steps: Steps) -> None:
        """Weigh the plans; switch past the hysteresis, and back from a lazy plan that
        measured worse than its promise (module docstring)."""
        if planned.plan == EAGER and not planned.retiring:
            held = self.held_on_dag(planned.subscription)
            if held < self.costs.heavy / 4:  # the DAG serves it cheaply again: stop watching
                planned.watched = False
                planned.why = f"eager: the DAG holds {held:.0f} partial matches for it"
                self._refresh(planned)
                return
        if now - planned.rates.since < planned.rates.tau / 2:
            return
        names = [s.var for s in planned.pattern.steps]
        measured_rates = planned.rates.at(now)
        rates = dict(zip(names, measured_rates, strict=False))
        # The own-condition index brings a lazy run only the events its components may be.
        look = self.costs.look * min(sum(measured_rates[:-1]), measured_rates[-1])
        keys = planned.rates.spread(now)
        judged: dict[Pred, list[int]] = {}
        for run in planned.runs:
            for pred, (tried, kept) in run.judged().items():
                both = judged.setdefault(pred, [0, 0])
                both[0] += tried
                both[1] += kept
        for pred, (tried, kept) in judged.items():
            if tried >= JUDGED:
                planned.selectivity[pred] = kept / tried
        measured = planned.selectivity
        sharing = self._siblings(planned.template)
        eager = cost(planned.pattern, EAGER, rates, keys) / max(sharing, 1)
        weight = self.costs.weight
        current = (
            eager
            if planned.plan == EAGER
            else look + cost(planned.pattern, planned.plan, rates, keys) * weight(planned.plan.kind)
        )
        weights = {kind: weight(kind) for kind in PlanKind}
        best, best_cost = choose(planned.pattern, rates, keys, sharing, look, weights)
        shares = "".join(f"; {to_cel(pred)} passes {p:.2g}" for pred, p in measured.items())
        planned.why = (
            f"{best.spell()} costs {best_cost:.3g} per tick, {planned.plan.spell()} {current:.3g}"
            f" (rates per tick: {', '.join(f'{v} {r:.3g}' for v, r in rates.items())}; "
            f"{measured_rates[-1]:.3g} events of its streams; "
            f"{keys} key{'s' if keys > 1 else ''}{shares}"
            f"{f'; eager shared by {sharing} on the DAG' if sharing > 1 else ''})"
        )
        if self._broken(planned, now, look, steps):
            return
        if best != EAGER and now < planned.barred_until:
            planned.why += f"; lazy plans barred until {planned.barred_until:g}"
            return
        touched = sum(rates.values())  # the look at each event every plan takes
        if best_cost * HYSTERESIS < current and current - best_cost > MATERIAL * touched:
            leaving = planned.plan == EAGER
            if self.switch(planned.subscription, best, now, steps) and leaving:
                planned.promise = (eager, now, work_of(planned))

    def _broken(self, planned: Planned, now: int, look: float, steps: Steps) -> bool:
        """A lazy plan ``GUARD_WINDOWS`` windows after its switch from eager: if its measured
        work per tick is worse than the eager cost it promised to beat by ``HYSTERESIS``,
        back to eager, barred from lazy plans for ``BAR_WINDOWS`` windows.  True if it went."""
        if planned.promise is None:
            return False
        eager, since, work = planned.promise
        span = now - since
        if span < GUARD_WINDOWS * planned.window:
            return False
        planned.promise = None
        per_tick = (work_of(planned) - work) / max(span, 1)
        lazy = per_tick * self.costs.weight(planned.plan.kind) + look
        if lazy <= eager * HYSTERESIS:
            return False
        left = planned.plan.spell()
        self.switch(planned.subscription, EAGER, now, steps, force=True)
        planned.barred_until = now + BAR_WINDOWS * planned.window
        planned.why = (
            f"eager: {left} measured {lazy:.3g} steps per tick against "
            f"eager's {eager:.3g}; lazy plans barred until {planned.barred_until:g}"
        )
        return True

    def check_valid(self, on_dag: Callable[[str], bool]) -> None:
        """Assert the planner's invariants; ``on_dag`` says if a subscription is on the DAG."""
        busy = {
            n: p for n, p in self.planned.items() if not p.idle or p.runs or p.history is not None
        }
        self.reaching.check_valid(self.planned, busy)
        due = {(tick, name) for tick, _, name in self.due}
        for name, planned in busy.items():
            assert planned.due == math.inf or (planned.due, name) in due, name
        for name, planned in self.planned.items():
            assert name in busy or planned.due == math.inf, name
        for name, planned in self.planned.items():
            watching = self._watching(planned)
            assert planned.idle == (planned.pinned or (planned.plan == EAGER and not watching))
            assert len(planned.rates.counts) == len(planned.pattern.steps) + 1, name
            assert self.members[planned.template][name] is planned
        assert self.publishers == {p.pattern.output.name: n for n, p in self.planned.items()}
        assert sum(len(m) for m in self.members.values()) == len(self.planned)
        assert set(self.templates.values()) == set(self.members)
        for name, planned in self.planned.items():
            assert (planned.dag is not None) == on_dag(name), name
            lazy = planned.plan.kind is not PlanKind.EAGER
            assert not lazy or (planned.runs and planned.runs[-1].until == math.inf), name
            assert not lazy or planned.runs[-1].plan == planned.plan, name
            assert lazy or (planned.dag is not None and planned.dag[1] == math.inf), name
            assert all(run.until < math.inf for run in planned.runs[: -1 if lazy else None])
            for run in planned.runs:
                run.check_valid()

    def describe(self, subscription: str) -> str | None:
        """The plan a subscription runs and why (None: not planned)."""
        planned = self.planned.get(subscription)
        if planned is None:
            return None
        return f"plan {planned.plan.spell()}: {planned.why}"

    def figures(self) -> dict[str, int]:
        """Counts for the shard's stats: subscriptions planned, of them on a lazy plan,
        switches so far, partial matches waiting and events buffered by lazy runs."""
        runs = [run for planned in self.planned.values() for run in planned.runs]
        return {
            "planned": len(self.planned),
            "planned_lazy": sum(p.plan.kind is not PlanKind.EAGER for p in self.planned.values()),
            "plan_switches": self.switches,
            "lazy_partials": sum(run.live for run in runs),
            "lazy_buffered": self.reaching.pool.size + sum(len(run.negated) for run in runs),
            "lazy_buffers": len(self.reaching.pool.shared),
        }

    def lazy_holdings(self) -> Iterable[tuple[str, int, int]]:
        """Per planned subscription with lazy runs: partial matches waiting, events buffered."""
        for planned in self.planned.values():
            if planned.runs:
                yield (
                    planned.subscription,
                    sum(r.live for r in planned.runs),
                    sum(r.buffered for r in planned.runs),
                )
