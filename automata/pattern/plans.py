"""Evaluation plans for a pattern and their cost (lazy chain automata §4, §7; recomputation §2).

A pattern can be evaluated in more than one order, all giving the same matches:

* ``EAGER``: the compiled automaton on the shared DAG; every event is taken in
  pattern order, every partial match stored (the only plan before this module);
* ``CHAIN``: a lazy chain: partial matches grow in a fixed component order,
  rarest first; events of the other components wait in buffers and are searched
  when a partial match needs them;
* ``TREE``: a lazy tree: the first component is fixed, then each partial match
  takes next the unbound component with the fewest buffered events *now* (the
  paper's ad hoc order, for unknown or changing frequencies);
* ``RECOMPUTE``: no partial matches at all; events wait in buffers and every
  match is recomputed, depth first in pattern order, when its last event (the
  *trigger*) arrives: memory linear in the window, for skip-till-any-match
  Kleene closures whose partial matches explode.

Only patterns whose matches depend on no event outside them can change order:
skip till any match, a window (buffers end with it), no negation after the
last component (it waits past the match).  :func:`refusal`
says why a plan cannot run a pattern.  The cost model (:func:`cost`) counts
expected partial-match work per tick from per-component event rates; the
planner (:func:`choose`) takes the cheapest, with hysteresis left to the
caller (:mod:`cesar.server.engine.plans`).

>>> Plan.parse("chain(c, a, b)").spell(), Plan.parse("auto") is None
('chain(c, a, b)', True)
"""

from __future__ import annotations

import enum
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cesar.automata.pattern.ast import Strategy
from cesar.automata.pattern.placing import keys_of
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.terms import Pred, Truth, conjuncts_of

MAX_ORDERS = 5
"""Above this many components the chain order is by ascending rate, not by trying all."""


class PlanKind(enum.Enum):
    """How a pattern's matches are found (module docstring)."""

    EAGER = "eager"
    CHAIN = "chain"
    TREE = "tree"
    RECOMPUTE = "recompute"

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class Plan:
    """A plan: its kind and, for CHAIN, the component order (TREE: its first component)."""

    kind: PlanKind
    order: tuple[str, ...] = ()

    def spell(self) -> str:
        """The plan as ``PLAN`` writes it."""
        if not self.order:
            return self.kind.value
        return f"{self.kind.value}({', '.join(self.order)})"

    @staticmethod
    def parse(text: str) -> Plan | None:
        """A plan from its spelling; None for ``auto`` (the planner chooses).

        Raises ValueError with what was expected.
        """
        name, _, rest = text.strip().partition("(")
        name = name.strip().lower()
        if name == "auto" and not rest:
            return None
        kinds = {kind.value: kind for kind in PlanKind}
        if name not in kinds:
            raise ValueError(f"expected a plan: auto, {', '.join(kinds)}; got {name!r}")
        if not rest:
            return Plan(kinds[name])
        if not rest.rstrip().endswith(")"):
            raise ValueError("expected ')' after the plan's order")
        order = tuple(v.strip() for v in rest.rstrip()[:-1].split(",") if v.strip())
        return Plan(kinds[name], order)


EAGER = Plan(PlanKind.EAGER)


def pinned(pattern: Resolved) -> Plan | None:
    """The plan ``pattern`` pins with ``PLAN`` (None: none, or ``auto``); ValueError says
    what is wrong with it."""
    if pattern.pattern.plan is None:
        return None
    plan = Plan.parse(pattern.pattern.plan)
    if plan is not None and (reason := refusal(pattern, plan)) is not None:
        raise ValueError(f"PLAN {plan.spell()} cannot run this pattern: {reason}")
    return plan


def unplanned_pin(pattern: Resolved) -> str | None:
    """Why an engine without plans refuses ``pattern``: it pins a lazy plan with ``PLAN``,
    which such an engine cannot honour (every pattern runs on its DAG); None if it pins none,
    or eager."""
    pin = pinned(pattern)
    if pin is None or pin.kind is PlanKind.EAGER:
        return None
    return (
        f"PLAN {pin.spell()} cannot be honoured by an engine without plans, which runs every "
        "pattern on the shared DAG: run it where patterns are planned (cesar serve, cesar run "
        "--engine planned), or write PLAN eager"
    )


def refusal(pattern: Resolved, plan: Plan) -> str | None:
    """Why ``plan`` cannot run ``pattern`` (None: it can)."""
    if plan.kind is PlanKind.EAGER:
        return None
    if pattern.strategy is not Strategy.ANY:
        return (
            f"{pattern.strategy.value} depends on the events a match skips; only "
            "skip_till_any_match may take its events in another order"
        )
    if pattern.window is None:
        return "without WITHIN the buffers would never end"
    if pattern.skip is not None:
        return f"{pattern.skip} reads the times of a match's events that only the automaton keeps"
    if any(n.after == len(pattern.steps) - 1 for n in pattern.negations):
        return "a negation after the last component waits past the match"
    kleene = [s.var for s in pattern.steps if s.kleene]
    if plan.kind is PlanKind.RECOMPUTE:
        if pattern.operator == "AND":
            return "recompute runs SEQ patterns (an AND has no last event to trigger on)"
        return None
    if kleene:
        return f"a lazy {plan.kind.value} takes single events; {kleene[0]}[] is a Kleene closure"
    names = [s.var for s in pattern.steps]
    if plan.kind is PlanKind.CHAIN and sorted(plan.order) != sorted(names):
        return f"a chain orders every component once: {', '.join(names)}"
    if plan.kind is PlanKind.TREE and (len(plan.order) > 1 or not set(plan.order) <= set(names)):
        return f"a tree names its first component only, one of {', '.join(names)}"
    return None


def conjuncts(pattern: Resolved) -> list[tuple[frozenset[str], Pred]]:
    """Every WHERE conjunct of a pattern's positive components, with the variables it names."""
    out: list[tuple[frozenset[str], Pred]] = []
    for step in pattern.steps:
        for pred in (step.begin, step.take, step.close):
            for item in conjuncts_of(pred):
                if isinstance(item, Truth) and item.value:
                    continue
                names = frozenset(pattern.refs[key].var for key in keys_of(item))
                out.append((names, item))
    return out


def plan_line(pattern: Resolved) -> str:
    """How ``pattern`` will be evaluated, for ``cesar explain``: its pin, the plans the
    planner weighs, or why only eager runs it."""
    try:
        pin = pinned(pattern)
    except ValueError as exc:
        return str(exc)
    if pin is not None:
        return f"{pin.spell()}, pinned by PLAN"
    names = tuple(s.var for s in pattern.steps)
    lazy = [
        plan.spell()
        for plan in (Plan(PlanKind.RECOMPUTE), Plan(PlanKind.CHAIN, names), Plan(PlanKind.TREE))
        if refusal(pattern, plan) is None
    ]
    if not lazy:
        why = refusal(pattern, Plan(PlanKind.RECOMPUTE)) or refusal(
            pattern, Plan(PlanKind.CHAIN, names)
        )
        return f"eager: {why}"
    weighed = ", ".join(
        [
            "eager",
            *(["recompute"] if "recompute" in lazy else []),
            *(["chain in any order"] if len(lazy) > 1 else []),
        ]
    )
    return (
        "eager on the shared DAG until it holds many partial matches for this subscription, "
        f"then the cheapest of {weighed} by live rates (a lazy plan also pays for its look at "
        "every event), re-weighed every window; a lazy plan measured worse than eager goes "
        "back; PLAN pins one"
    )


# ----------------------------------------------------------------- the cost model


def _size(rate: float, window: int, kleene: bool) -> float:
    """Expected choices for one component within a window: events, or their subsets."""
    events = rate * (window + 1)
    return 2.0 ** min(events, 60.0) - 1.0 if kleene else events


def _held(pattern: Resolved, names: Sequence[str], rates: Mapping[str, float]) -> float:
    """Expected partial matches binding ``names``: choices per component, in pattern order
    for a SEQ (a share ``1/m!`` of the assignments)."""
    assert pattern.window is not None
    kleene = {s.var: s.kleene for s in pattern.steps}
    held = math.prod(_size(rates[v], pattern.window, kleene[v]) for v in names)
    return held / math.factorial(len(names)) if pattern.operator == "SEQ" else held


def cost(pattern: Resolved, plan: Plan, rates: Mapping[str, float], keys: int = 1) -> float:
    """Expected partial-match work per tick of ``plan`` (events per tick per component in
    ``rates``, spread over ``keys`` partition keys that never mix): each stored partial match
    meets the events of the component it waits for; recompute enumerates every prefix once
    per trigger.  The look at each event every plan takes is left out, and so are the
    conditions between components (all plans judge them; perf/RESULTS.md says why their
    measured selectivities are not weighed).

    >>> from cesar.automata.pattern.parser import parse_pattern
    >>> from cesar.automata.pattern.resolve import resolve
    >>> from cesar.automata.schema import parse_stream_spec
    >>> schemas = {n: parse_stream_spec(f"{n}(x:int)") for n in "ABC"}
    >>> p = resolve(parse_pattern("PATTERN SEQ(A a, B b, C c) WITHIN 9 PUBLISH P"), schemas)
    >>> rates = {"a": 1.0, "b": 1.0, "c": 0.01}
    >>> chain = Plan(PlanKind.CHAIN, ("c", "b", "a"))
    >>> round(cost(p, EAGER, rates), 2), round(cost(p, chain, rates), 2)
    (11.5, 0.61)
    """
    if keys > 1:
        return keys * cost(pattern, plan, {v: r / keys for v, r in rates.items()})
    names = [s.var for s in pattern.steps]
    if plan.kind is PlanKind.RECOMPUTE:
        prefixes = sum(_held(pattern, names[: i + 1], rates) for i in range(len(names) - 1))
        return rates[names[-1]] * (1.0 + prefixes)
    order = list(names if plan.kind is PlanKind.EAGER else order_of(pattern, plan, rates))
    work = rates[order[0]]
    for i in range(len(order) - 1):
        work += _held(pattern, order[: i + 1], rates) * rates[order[i + 1]]
    return work


def order_of(pattern: Resolved, plan: Plan, rates: Mapping[str, float]) -> tuple[str, ...]:
    """The component order a chain follows, or a tree is expected to: its first component
    (the pattern's first unless it names one), then the rarest next."""
    if plan.kind is PlanKind.CHAIN:
        return plan.order
    names = [s.var for s in pattern.steps]
    first = plan.order[0] if plan.order else names[0]
    rest = sorted((v for v in names if v != first), key=lambda v: (rates[v], names.index(v)))
    return (first, *rest)


def candidates(pattern: Resolved, rates: Mapping[str, float]) -> list[Plan]:
    """The plans the planner weighs for ``pattern``: eager, and every lazy plan it can run."""
    names = [s.var for s in pattern.steps]
    plans = [EAGER]
    if refusal(pattern, Plan(PlanKind.RECOMPUTE)) is None:
        plans.append(Plan(PlanKind.RECOMPUTE))
    if len(names) > 1 and refusal(pattern, Plan(PlanKind.CHAIN, tuple(names))) is None:
        if len(names) <= MAX_ORDERS:
            orders = list(itertools.permutations(names))
        else:
            orders = [tuple(sorted(names, key=lambda v: rates[v]))]
        plans.extend(Plan(PlanKind.CHAIN, order) for order in orders)
    return plans


def choose(
    pattern: Resolved,
    rates: Mapping[str, float],
    keys: int = 1,
    sharing: int = 1,
    look: float = 0.0,
    weights: Mapping[PlanKind, float] | None = None,
) -> tuple[Plan, float]:
    """The cheapest plan for ``pattern`` by :func:`cost`, and its cost (ties: the first of
    :func:`candidates`, eager before lazy); eager's cost is divided among the ``sharing``
    subscriptions whose automata the DAG merges into one (a lazy run is one's own), and a lazy
    plan pays ``look`` besides: its own look at the events that reach it, which the DAG's
    indices share.  ``weights`` gives a step of each kind of lazy plan in steps of the DAG
    (1 where not given)."""
    weigh = weights or {}
    best, best_cost = EAGER, cost(pattern, EAGER, rates, keys) / max(sharing, 1)
    for plan in candidates(pattern, rates)[1:]:
        value = look + cost(pattern, plan, rates, keys) * weigh.get(plan.kind, 1.0)
        if value < best_cost:
            best, best_cost = plan, value
    return best, best_cost
