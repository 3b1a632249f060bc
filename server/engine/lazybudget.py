"""The lazy runs' budgets: what they may hold and search, and what a client hears when they lose.

A lazy run (:class:`~cesar.automata.pattern.lazy.LazyRun`) holds partial matches and
buffered events, as the DAG holds instances; the planner keeps them within the engine's
``max_instances`` (``limit``): each subscription's runs within it after every epoch that
reaches them (:meth:`LazyBudget.hold`); every budget period each again (a shared buffer
grows with events that reach none of its readers) and all of them together
(:meth:`LazyBudget.period`), the largest holders shedding their oldest first.  A recomputing
search may look at ``max_steps`` candidates and matches per epoch (its enumeration may be
exponential).  A subscription that lost matches to either hears it once per *episode*,
which ends after a whole period without losses.
"""

from __future__ import annotations

from collections.abc import Iterable

from cesar.server.engine.planned import Planned


class LazyBudget:
    """The budgets of one planner's lazy runs; ``dropped`` and ``notices`` wait for the engine
    to take them (its counters and its notices)."""

    def __init__(self, limit: int | None, max_steps: int | None) -> None:
        self.limit = limit
        """Partial matches and buffered events the lazy runs may hold (None: no bound)."""
        self.max_steps = max_steps
        """Candidates and matches the recomputing searches of one subscription may look at per
        epoch (None: no bound): past it the search stops (:meth:`abandoned`)."""
        self.dropped = 0
        self.notices: list[tuple[str, str]] = []
        self.over: set[str] = set()
        """Subscriptions whose lazy runs lost something since their notice (an episode)."""
        self.shedding: set[str] = set()
        """Subscriptions whose lazy runs lost something in this period."""

    def abandoned(self, planned: Planned) -> None:
        """A recomputing search of ``planned`` went past ``max_steps`` and was stopped: the
        epoch's work stays bounded (an enumeration may be exponential in the buffered events)."""
        self._episode(
            planned,
            f"its {planned.plan.spell()} plan looked at more than {self.max_steps} candidates "
            "and matches in one epoch (max_steps_per_epoch); the search was stopped there, so "
            "matches may be missed (one notice until it recovers)",
        )

    def hold(self, planned: Planned) -> None:
        """Hold a subscription's lazy runs to ``limit`` partial matches and buffered events
        each, the oldest dropped; one notice per episode over it."""
        if self.limit is None:
            return
        dropped = sum(run.shed(self.limit) for run in planned.runs)
        self._dropped(planned, dropped, f"exceeded {self.limit}")

    def period(self, planned: Iterable[Planned]) -> None:
        """End a budget period: hold each subscription's lazy runs to ``limit`` (:meth:`hold`),
        then all of them together to ``limit`` partial matches and
        buffered events (as the DAG's instances are; a buffer shared by several runs counted
        once), the largest holders shedding their oldest first, so one client's window of
        years does not starve the others; end the episodes without losses.  O(planned
        subscriptions)."""
        if self.limit is not None:
            lazy = [p for p in planned if p.runs]
            for one in lazy:
                self.hold(one)
            held = [(sum(run.live + run.buffered for run in p.runs), p) for p in lazy]
            runs = [run for _, p in held for run in p.runs]
            buffers = {id(b): b for run in runs for b in (*run.buffers, run.negated)}
            total = sum(len(b) for b in buffers.values()) + sum(run.live for run in runs)
            for size, one in sorted(held, key=lambda pair: -pair[0]):
                if total <= self.limit:
                    break
                keep = max(size - (total - self.limit), 0) // len(one.runs)
                dropped = sum(run.shed(keep) for run in one.runs)
                total -= dropped
                self._dropped(one, dropped, f"with the other lazy plans exceeded {self.limit}")
        self.over &= self.shedding  # an episode ends after a whole period without losses
        self.shedding = set()

    def _dropped(self, planned: Planned, count: int, reason: str) -> None:
        """Count what a subscription's lazy runs shed; notify it once per episode."""
        if not count:
            return
        self.dropped += count
        self._episode(
            planned,
            f"its {planned.plan.spell()} plan {reason} partial matches and buffered events; "
            "the oldest are dropped, so a match may be missed (one notice until it recovers)",
        )

    def _episode(self, planned: Planned, notice: str) -> None:
        """``planned`` lost something to a budget: ``notice`` once per episode."""
        self.shedding.add(planned.subscription)
        if planned.subscription not in self.over:
            self.over.add(planned.subscription)
            self.notices.append((planned.subscription, notice))
