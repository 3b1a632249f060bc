"""A planned subscription's data: its plan, rates and lazy runs, and the steps a planner
returns for the engine's DAG to take.

The planner (:mod:`cesar.server.engine.plans`) owns the :class:`Planned` records and changes
them; what it needs of the shared DAG it does not do itself but returns as :data:`Steps`
(enter a subscription's automata, retire them, recall past events), as
:meth:`~cesar.server.engine.program.QueryProgram.subscribe` returns a ``Change``: the
engine applies them in order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from cesar.automata.automaton import Automaton, Edge
from cesar.automata.pattern.buffers import Buffer, Key
from cesar.automata.pattern.judging import Fits
from cesar.automata.pattern.lazy import LazyRun
from cesar.automata.pattern.plans import Plan, PlanKind, refusal
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event
from cesar.automata.template import template
from cesar.automata.terms import Pred


@dataclass(frozen=True)
class PlanCosts:
    """The planner's thresholds and constants (``EngineOptions.plan_costs``); the served
    shards measure ``look``, ``chain`` and ``recompute`` on their host at start."""

    heavy: float = 64.0
    """An eager subscription is watched once the DAG holds this many partial matches for it
    (its share of its nodes' instances); it is left unwatched again below a quarter of it."""
    look: float = 1.0
    """A lazy plan's own look at one event that reaches it (one its components may be, through
    the planner's own-condition index), in partial-match steps: the DAG's look is shared
    through its indices, a lazy run's is its own."""
    chain: float = 1.0
    """A step of a chain or tree plan (a partial match made, a candidate searched), in steps of
    the DAG (an instance meeting an event); the served shards measure it
    (:func:`~cesar.server.host.calibrate.calibrate`)."""
    recompute: float = 1.0
    """A step of a recomputation (a candidate its search looks at), in steps of the DAG."""
    sweep: int = 64
    """Every this many epochs, a slice of the eager subscriptions is looked at (all of them
    while there are at most 256; a sixteenth of them past 4,096)."""
    decay_windows: int = 16
    """Rates decay with a time constant of this many windows."""
    check: int = 16
    """The plans are weighed every window, and at most every this many ticks."""

    def weight(self, kind: PlanKind) -> float:
        """A step of a plan of ``kind`` in steps of the DAG."""
        if kind is PlanKind.EAGER:
            return 1.0
        return self.recompute if kind is PlanKind.RECOMPUTE else self.chain


def plannable(pattern: Resolved) -> bool:
    """True if some plan other than eager can run ``pattern``."""
    names = tuple(s.var for s in pattern.steps)
    return any(
        refusal(pattern, plan) is None
        for plan in (Plan(PlanKind.RECOMPUTE), Plan(PlanKind.CHAIN, names))
    )


@dataclass
class Rates:
    """Per component, the decayed count of the events that fit it; last, of all events of the
    pattern's streams.

    Events are counted as they come (O(1) each) and folded into the decayed
    counts when the rates are read, as if they had come then.
    """

    tau: float
    counts: list[float]
    last: float = -math.inf
    since: float = math.inf
    pending: list[int] = field(default_factory=list)
    keys: dict[Key, float] = field(default_factory=dict)

    def add(self, n: int, t: int) -> None:
        """An event fitting component ``n`` at time ``t`` (``n`` past the components: any
        event of the pattern's streams, :meth:`seen`)."""
        if not self.pending:
            self.pending = [0] * len(self.counts)
            self.since = min(self.since, t)
        self.pending[n] += 1

    def seen(self, count: int, t: int) -> None:
        """``count`` events of the pattern's streams at time ``t``."""
        if count:
            self.add(len(self.counts) - 1, t)
            self.pending[-1] += count - 1

    def key(self, key: Key, t: int) -> None:
        """An event of partition key ``key`` at time ``t``."""
        self.keys[key] = t

    def spread(self, t: float) -> int:
        """The partition keys seen within a decay time before ``t`` (at least 1)."""
        self.keys = {k: last for k, last in self.keys.items() if t - last < self.tau}
        return max(len(self.keys), 1)

    def at(self, t: float) -> list[float]:
        """Events per tick per component at time ``t``, then of all the pattern's streams.

        A decayed count watched for ``w`` ticks holds ``1 - exp(-w / tau)`` of a steady
        rate's ``tau`` events: it is divided by that, so a young count is not read low.
        """
        decay = math.exp(-(t - self.last) / self.tau) if self.last > -math.inf else 0.0
        pending = self.pending or [0] * len(self.counts)
        self.counts = [c * decay + p for c, p in zip(self.counts, pending, strict=True)]
        self.last, self.pending = t, [0] * len(self.counts)
        watched = max(t - self.since + 1, 1.0)
        span = self.tau * -math.expm1(-watched / self.tau)
        return [c / span for c in self.counts]


@dataclass
class Planned:
    """A planned subscription: its pattern, automata, plan, lazy runs and the DAG's share.

    ``runs``: lazy runs, the current one last when the plan is not eager;
    ``dag``: (since, until) of its automata on the DAG, None when not there.
    """

    subscription: str
    pattern: Resolved
    automata: tuple[Automaton, ...]
    since: float
    plan: Plan
    pinned: bool
    rates: Rates
    fits: Fits
    template: int
    """Its automata's edges up to constants, by number (``Planner.templates``): equal for
    subscriptions the DAG merges."""
    runs: list[LazyRun] = field(default_factory=list)
    dag: tuple[float, float] | None = None
    history: Buffer[Event] | None = None
    """For a negation before the first component: the negated events of the last window, which
    a plan starting at a switch needs (it looks back before its start)."""
    why: str = "not weighed yet: no rates"
    next_check: float = -math.inf
    due: float = math.inf
    """The tick the planner's heap of checks and retirements visits it at (inf: not on it)."""
    arrived: int = 0
    """The events of its streams the planner had seen when its rates last counted them."""
    idle: bool = False
    """Pinned, or eager and not watched: not measured, not weighed."""
    watched: bool = False
    """Eager with ``heavy`` partial matches or more on the DAG, fewer than ``CROWD`` of its
    template: its rates are measured and its plans weighed."""
    barred_until: float = -math.inf
    """No lazy plan before this tick: the last one measured worse than eager."""
    promise: tuple[float, float, int] | None = None
    """After a switch to a lazy plan: the eager cost per tick it was chosen against, the tick
    of the switch, and the lazy runs' work counted then."""
    selectivity: dict[Pred, float] = field(default_factory=dict)
    """Per condition between components, the share of assignments it let through in the
    lazy runs (kept across plans; where it judged ``JUDGED`` or more): shown in ``why``,
    not weighed (:func:`~cesar.automata.pattern.plans.cost`)."""

    @property
    def window(self) -> int:
        assert self.pattern.window is not None
        return self.pattern.window

    @property
    def retiring(self) -> bool:
        """True while a plan it left still finishes its matches."""
        if self.plan.kind is PlanKind.EAGER:
            return bool(self.runs)
        return len(self.runs) > 1 or self.dag is not None


@dataclass(frozen=True)
class Enter:
    """Put a subscription's automata on the DAG, taking the matches rooted after ``since``."""

    subscription: str
    automata: tuple[Automaton, ...]
    since: float


@dataclass(frozen=True)
class Retire:
    """Keep only a subscription's DAG matches rooted at or before ``until`` (inf: all again);
    None: take its automata off the DAG."""

    subscription: str
    until: float | None


@dataclass(frozen=True)
class Recall:
    """Remember events of earlier epochs for the UNLESS edges of automata just entered."""

    events: tuple[Event, ...]


Step = Enter | Retire | Recall
Steps = list[Step]
"""What a planner asks of the DAG, in the order it must happen."""


def work_of(planned: Planned) -> int:
    """The partial matches made and candidates searched by a subscription's lazy runs."""
    return sum(run.counters.partials + run.counters.searched for run in planned.runs)


def edges_of(automata: Sequence[Automaton]) -> tuple[Edge, ...]:
    """The automata's edges up to constants: equal for subscriptions the DAG merges."""
    return tuple(template(edge)[0] for automaton in automata for edge in automaton.edges)
