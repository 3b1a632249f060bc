"""A planner's state as plain data, for the engine's snapshot (:mod:`.snapshot`), and back.

Each planned subscription keeps its plan and why, its watch, bar and promise, its rates
and partition keys, the selectivities its lazy runs measured, the negated events of its
last window, its DAG share's bounds and, per lazy run, the plan, root bounds, clock and
buffered events.  Its DAG instances are saved and restored with the engine's; a lazy run
is rebuilt by running its buffered events again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from cesar.automata.pattern.lazy import LazyRun
from cesar.automata.pattern.plans import EAGER, Plan, conjuncts
from cesar.automata.schema import Event, epochs
from cesar.server.engine.planned import Enter, Planned, Retire, Steps

SavedPlanned = dict[str, Any]
"""A planned subscription's state as plain data (:func:`save`)."""

RunMaker = Callable[[Planned, Plan, float, float, bool], LazyRun]
"""Makes a lazy run of a subscription: (planned, plan, since, until, shared) → run, its
buffers in the planner's pool if shared, else its own."""


class Restored:
    """The events the saved lazy runs held, one object per event whichever run saved it.

    Runs save their events separately; those sharing a buffer saved the same events, and
    must hold the same objects again (a buffer keeps an event once, an AND pattern tells
    its components' events apart by identity).  Equal fields stand for one event each
    time they occur in one run: the ``k``-th occurrence in any run is the ``k``-th object.
    """

    def __init__(self) -> None:
        self.events: dict[tuple[Any, ...], list[Event]] = {}

    def events_of(self, saved: list[Any]) -> list[Event]:
        """The events of one run's saved list, as the objects other runs were given."""
        seen: dict[tuple[Any, ...], int] = {}
        out = []
        for fields in saved:
            key = (fields[0], fields[1], fields[2], tuple(tuple(pair) for pair in fields[3]))
            k = seen.get(key, 0)
            seen[key] = k + 1
            known = self.events.setdefault(key, [])
            if k == len(known):
                known.append(Event(*fields))
            out.append(known[k])
        return out


def save(planned: Mapping[str, Planned]) -> dict[str, SavedPlanned]:
    """Every planned subscription's state as plain data (module docstring)."""
    out: dict[str, SavedPlanned] = {}
    for name, one in planned.items():
        rates = one.rates
        out[name] = {
            "plan": one.plan.spell(),
            "pinned": one.pinned,
            "watched": one.watched,
            "barred_until": one.barred_until,
            "promise": None if one.promise is None else list(one.promise),
            "why": one.why,
            "next_check": one.next_check,
            "rates": [rates.counts, rates.last, rates.since, rates.pending],
            "keys": [[list(k) if k is not None else None, t] for k, t in rates.keys.items()],
            "dag": None if one.dag is None else list(one.dag),
            "selectivity": [
                [n, one.selectivity[pred]]
                for n, (_, pred) in enumerate(conjuncts(one.pattern))
                if pred in one.selectivity
            ],
            "history": [(e.stream, e.t0, e.t1, e.values) for e in one.history or ()],
            "runs": [
                [
                    run.plan.spell(),
                    run.since,
                    run.until,
                    run.clock,
                    [(e.stream, e.t0, e.t1, e.values) for e in run.events()],
                ]
                for run in one.runs
            ],
        }
    return out


def load(planned: Planned, saved: SavedPlanned, make_run: RunMaker, restored: Restored) -> Steps:
    """Give a subscription planned again its saved state; the DAG's part as steps (its
    automata entered and, if they were retiring, retired again).  Its lazy runs are rebuilt
    with buffers of their own, to be moved to the planner's pool."""
    plan = Plan.parse(saved["plan"])
    planned.plan = EAGER if plan is None else plan
    planned.pinned, planned.why = saved["pinned"], saved["why"]
    planned.watched = saved.get("watched", False)
    planned.barred_until = saved.get("barred_until", -math.inf)
    promise = saved.get("promise")
    planned.promise = None if promise is None else (promise[0], promise[1], promise[2])
    planned.next_check = saved["next_check"]
    counts, last, since, pending = saved["rates"]
    width = len(planned.rates.counts)  # a snapshot before the count of all events: one less
    planned.rates.counts = [*counts, 0.0][:width]
    planned.rates.last, planned.rates.since = last, since
    planned.rates.pending = [*pending, 0][:width] if pending else []
    planned.rates.keys = {
        (tuple(k) if k is not None else None): t for k, t in saved.get("keys", [])
    }
    between = conjuncts(planned.pattern)
    for n, share in saved.get("selectivity", []):
        planned.selectivity[between[n][1]] = share
    if planned.history is not None:
        for fields in saved.get("history", []):
            planned.history.add(None, Event(*fields))
    steps: Steps = []
    if saved["dag"] is not None:
        planned.dag = (saved["dag"][0], saved["dag"][1])
        steps.append(Enter(planned.subscription, planned.automata, planned.dag[0]))
        if planned.dag[1] != math.inf:
            steps.append(Retire(planned.subscription, planned.dag[1]))
    for spelled, since_run, until, clock, events in saved["runs"]:
        run_plan = Plan.parse(spelled)
        assert run_plan is not None
        run = make_run(planned, run_plan, since_run, until, False)
        for epoch in epochs(restored.events_of(events)):
            run.process(epoch)
        run.clock = clock
        run.prune()
        planned.runs.append(run)
    return steps
