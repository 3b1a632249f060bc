"""How an engine runs: its optimisations on or off, its limits and budgets (docs/engine.md).

One frozen :class:`EngineOptions` per engine: a shard builds it from the
server's budgets, and the benchmarks turn optimisations off one by one to
measure them.
"""

from __future__ import annotations

from dataclasses import dataclass

from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.server.engine.params import SMALL
from cesar.server.engine.planned import PlanCosts


@dataclass(frozen=True)
class EngineOptions:
    """How the engine runs: optimisations on or off, and instance limits (None: unlimited)."""

    merge: bool = True
    indices: bool = True
    max_instances_per_subscription: int | None = None
    """Live instances one subscription may hold, a shared one counted whole for each
    (:meth:`~cesar.server.engine.installing.Installer.hold`)."""
    max_instances: int | None = None
    functions: FunctionRegistry = DEFAULT_FUNCTIONS
    small_group: int = SMALL
    """Groups of at most this many slots compare their constants one by one."""
    few_leaving: int = 8
    """A node with at most this many leaving ∃-edges finds their groups by key, without FR."""
    plans: bool = False
    """Pattern subscriptions a lazy plan can run are planned (:mod:`cesar.server.engine.plans`)."""
    steps: bool = True
    """A FOLD's runs take the step events their group shares lazily, once per group
    (:mod:`cesar.server.engine.stepping`); off, each run moves at every step (with indices only)."""
    waiting: bool = True
    """Instances wait by threshold where a filter conjunct allows (:mod:`cesar.index.thresholds`);
    off, they stay filed by group (the benchmark's baseline)."""
    plan_costs: PlanCosts = PlanCosts()
    """The planner's thresholds: when an eager subscription is watched, what a lazy plan's
    look at an event costs (:class:`~cesar.server.engine.plans.PlanCosts`)."""
    max_steps: int | None = None
    """The work budget: steps one subscription may cause in one epoch (None: no bound).  On
    the DAG, instances tested and made and matches (:mod:`cesar.server.engine.work`): past
    it the subscription is cut for the rest of the epoch; for a planned subscription, the
    candidates and matches its recomputing searches look at: past it the search stops.  One
    notice per episode."""
    max_engine_steps: int | None = None
    """The work budget of the whole engine (a lane) in one epoch, each shared step counted
    once: past it each subscription that took its share (the budget over the subscriptions
    charged in the epoch, at most a hundredth of it) is cut for the rest of the epoch
    (:mod:`cesar.server.engine.work`)."""
    max_window_events: int | None = 1_000_000
    """Events one time-window aggregate holds (:mod:`cesar.server.engine.windowing`); past it
    the oldest are dropped, with one notice to its readers."""
    share_windows: bool = True
    """Subscriptions reading one time-window aggregate share its running window; off, each
    keeps its own (the benchmark's baseline)."""
