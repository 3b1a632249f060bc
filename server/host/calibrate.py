"""The planner's constants measured on this host: a lazy plan's step and look in steps of the DAG.

The planner's cost model (:func:`~cesar.automata.pattern.plans.cost`) counts partial-match
steps: on the DAG, an instance meeting an event; in a chain or tree plan, a partial match
made or a candidate searched; in a recomputation, a candidate a search looks at.  A step of
each does not take the same time (a DAG step fires an edge, spawns and files instances; a
lazy step binds one event), nor does a lazy run's look at an event that reaches it.
:func:`calibrate` measures them where the server runs, as a database measures its cost
constants, instead of assuming them:

* one pattern, ``SEQ(A a, B b, C c)`` under skip till any match with two conditions across
  components, on one synthetic stream, on the DAG and on each lazy plan;
* each at two windows (4 and 30 ticks): the time against the steps counted is a line through
  two points, whose slope is the time of a step and whose intercept, less an engine's time
  with no subscription, the time of the look at an event;
* the best of ``repeat`` runs each (the machine is shared).

The weights are ratios to the DAG's step, kept within ``[1/8, 8]``: a measurement gone wrong
cannot make one kind of plan free or forbidden, and the guard after every switch still
compares what a lazy plan does with what it promised.  About 0.2 s.

An operator who wants the same plans on every start and host gives them instead
(``--plan-costs look=X,chain=Y,recompute=Z``, or ``$CESAR_PLAN_COSTS``; :func:`given`).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import replace

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, epochs, parse_stream_spec
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.planned import PlanCosts

SCHEMAS = {name: parse_stream_spec(f"{name}(x:int)") for name in "ABC"}
PATTERN = (
    "PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) "
    "{{ b.x > a.x AND c.x > b.x }} WITHIN {window}{plan}"
)
WINDOWS = (4, 30)
BOUNDS = (1 / 8, 8.0)


def _events(count: int) -> list[Event]:
    rng = random.Random(1)
    return [Event.of("ABC"[i % 3], i, i, {"x": rng.randrange(100)}) for i in range(count)]


def _run(plan: str | None, window: int, events: Sequence[Event]) -> tuple[float, int]:
    """Seconds to run ``events`` through one subscription on ``plan`` (None: the DAG), and
    the steps it counted."""
    engine = Engine(EngineOptions(plans=plan is not None))
    if window:
        text = PATTERN.format(window=window, plan=f" PLAN {plan}" if plan else "")
        compiled = compile_query(text, SCHEMAS, "P")
        engine.subscribe("P", compiled.automata, None, compiled.pattern)
    tick = time.perf_counter()
    for epoch in epochs(events):
        engine.process(epoch)
    seconds = time.perf_counter() - tick
    if not window:
        return seconds, 0
    if plan is None:
        return seconds, engine.counters.instances_touched
    runs = engine.planner.planned["P"].runs
    return seconds, sum(run.counters.partials + run.counters.searched for run in runs)


def _line(plan: str | None, events: Sequence[Event], repeat: int) -> tuple[float, float]:
    """(seconds per step, seconds per event) of ``plan``, through its two windows."""
    (low, few), (high, many) = (
        min(_run(plan, window, events) for _ in range(repeat)) for window in WINDOWS
    )
    step = (high - low) / max(many - few, 1)
    return step, (low - step * few) / len(events)


def _bounded(value: float) -> float:
    return round(min(max(value, BOUNDS[0]), BOUNDS[1]), 3)


def calibrate(base: PlanCosts | None = None, events: int = 300, repeat: int = 2) -> PlanCosts:
    """``base`` (the defaults) with ``look``, ``chain`` and ``recompute`` measured on this
    host (module docstring); O(``events`` × ``repeat``)."""
    stream = _events(events)
    empty = min(_run(None, 0, stream)[0] for _ in range(repeat)) / len(stream)
    eager, _ = _line(None, stream, repeat)
    chain, chain_event = _line("chain(a, b, c)", stream, repeat)
    recompute, _ = _line("recompute", stream, repeat)
    if eager <= 0:  # no signal (a clock too coarse, a machine too loaded): keep the defaults
        return base or PlanCosts()
    return replace(
        base or PlanCosts(),
        look=_bounded((chain_event - empty) / eager),
        chain=_bounded(chain / eager),
        recompute=_bounded(recompute / eager),
    )


MEASURE = "measure"
"""``--plan-costs``'s default: measure them at start (:func:`calibrate`)."""
NAMES = ("look", "chain", "recompute")


def given(text: str, base: PlanCosts | None = None) -> PlanCosts | None:
    """``base`` with the constants ``text`` gives (``look=X,chain=Y,recompute=Z``, each
    within ``[1/8, 8]``), or None for :data:`MEASURE`; raises ValueError saying what is wrong.

    >>> given("look=3,chain=0.5,recompute=0.45")
    PlanCosts(heavy=64.0, look=3.0, chain=0.5, recompute=0.45, sweep=64, decay_windows=16, check=16)
    >>> given("look=3,chain=0")
    Traceback (most recent call last):
    ValueError: chain=0: each constant is a number within [0.125, 8.0]
    """
    if text.strip() == MEASURE:
        return None
    values: dict[str, float] = {}
    for part in text.split(","):
        name, equals, number = (word.strip() for word in part.partition("="))
        if name not in NAMES or not equals:
            raise ValueError(f"{part.strip()!r}: expected look=X, chain=Y and recompute=Z")
        if name in values:
            raise ValueError(f"{name} is given twice")
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if not BOUNDS[0] <= value <= BOUNDS[1]:
            raise ValueError(f"{part.strip()}: each constant is a number within {list(BOUNDS)}")
        values[name] = value
    missing = [name for name in NAMES if name not in values]
    if missing:
        raise ValueError(f"{', '.join(missing)} missing: give look=X, chain=Y and recompute=Z")
    return replace(
        base or PlanCosts(),
        look=values["look"],
        chain=values["chain"],
        recompute=values["recompute"],
    )
