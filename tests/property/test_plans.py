"""The engine's planner (server/engine/plans.py) against the pattern oracle.

Random patterns a lazy plan can run, several subscriptions at once on an engine
with ``plans`` on: forced switches between every plan — eager on the shared DAG
included — at random epochs give the oracle's output multiset (a match that
straddles a switch is neither lost nor doubled), so does the planner left to
itself on streams whose rates it weighs, and so does an engine restored from a
snapshot mid-stream.
"""

import pickle
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.plans import EAGER, Plan, PlanKind, refusal
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.schema import epochs
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.plans import PlanCosts
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from tests.pattern_strategies import (
    SCHEMAS,
    automata_of,
    compiled_patterns,
    conjunctions,
    pattern_streams,
)

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


def lazy_patterns(name):
    return compiled_patterns(name, ("skip_till_any_match",), windowed=True) | conjunctions(
        name, windowed=True
    )


def choices(pattern):
    names = tuple(step.var for step in pattern.steps)
    drawn = [
        EAGER,
        Plan(PlanKind.RECOMPUTE),
        Plan(PlanKind.CHAIN, names),
        Plan(PlanKind.CHAIN, names[::-1]),
        Plan(PlanKind.TREE),
    ]
    return [plan for plan in drawn if refusal(pattern, plan) is None]


@settings(max_examples=80, **SETTINGS)
@given(
    texts=st.lists(st.sampled_from("PQR"), min_size=1, max_size=3, unique=True).flatmap(
        lambda names: st.tuples(*(lazy_patterns(n) for n in names))
    ),
    streams=pattern_streams(),
    data=st.data(),
)
def test_forced_switches_at_random_epochs_give_the_oracles_matches(texts, streams, data):
    engine = Engine(EngineOptions(plans=True))
    want: Counter = Counter()
    planned = []
    for text in texts:
        pattern = resolve(parse_pattern(text), SCHEMAS)
        engine.subscribe(pattern.output.name, automata_of(pattern), None, pattern)
        want.update(evaluate(pattern, streams))
        if pattern.output.name in engine.planner.planned:
            planned.append((pattern.output.name, choices(pattern)))
    events = [e for stream in streams.values() for e in stream]
    got: Counter = Counter()
    for epoch in epochs(events):
        for name, plans in planned:
            if data.draw(st.integers(0, 2)) == 0:
                engine.replan(name, data.draw(st.sampled_from(plans)))
        got.update(engine.process(epoch))
        engine.check_valid()
    assert got == want


RESTLESS = PlanCosts(heavy=0.0, look=0.0, sweep=1, decay_windows=1, check=1)
"""Every subscription watched from its first epoch, its plans weighed every tick after half a
window, a lazy plan's look free: the planner switches (and its guard switches back) within
the property tests' short streams."""


@pytest.mark.parametrize("costs", [PlanCosts(), RESTLESS], ids=["served", "restless"])
@settings(max_examples=100, **SETTINGS)
@given(
    texts=st.lists(st.sampled_from("PQ"), min_size=1, max_size=2, unique=True).flatmap(
        lambda names: st.tuples(*(lazy_patterns(n) for n in names))
    ),
    streams=pattern_streams(),
)
def test_the_planner_left_to_itself_gives_the_oracles_matches(costs, texts, streams):
    """The planner weighs and switches under its cost model (the look at each event, the
    DAG's share, the guard after a switch); every subscription gets the oracle's matches."""
    engine = Engine(EngineOptions(plans=True, plan_costs=costs))
    want: Counter = Counter()
    for text in texts:
        pattern = resolve(parse_pattern(text), SCHEMAS)
        engine.subscribe(pattern.output.name, automata_of(pattern), None, pattern)
        want.update(evaluate(pattern, streams))
    events = [e for stream in streams.values() for e in stream]
    got: Counter = Counter()
    for epoch in epochs(events):
        got.update(engine.process(epoch))
        engine.check_valid()
    assert got == want


@settings(max_examples=100, **SETTINGS)
@given(
    texts=st.tuples(lazy_patterns("P"), lazy_patterns("Q")),
    streams=pattern_streams(),
    data=st.data(),
)
def test_a_restored_planner_runs_on_as_if_never_stopped(texts, streams, data):
    """Capture between two epochs (lazy runs mid-window, a plan retiring after a forced
    switch, rates), rebuild from the texts, restore: the oracle's matches in all."""
    patterns = [resolve(parse_pattern(text), SCHEMAS) for text in texts]
    got = restarted_run(patterns, streams, data, odds=4)
    want = Counter(e for pattern in patterns for e in evaluate(pattern, streams))
    assert got == want


def restarted_run(patterns, streams, data, odds, check=False):
    """``patterns`` on a planned engine over ``streams``: captured and restored at an epoch
    ``data`` draws, each planned subscription forced onto a drawn plan with odds 1 in
    ``odds`` an epoch (``check``: the engine checked after each); the alerts."""

    def subscribed(saved=None):
        engine = Engine(EngineOptions(plans=True))
        if saved is not None:
            prepare(engine, saved)
        for pattern in patterns:
            name = pattern.output.name
            since = None if saved is None else saved.since[name]
            engine.subscribe(name, automata_of(pattern), since, pattern)
        if saved is not None:
            restore(engine, saved)
        return engine

    engine = subscribed()
    parts = epochs([e for stream in streams.values() for e in stream])
    cut = data.draw(st.integers(0, len(parts)))
    got: Counter = Counter()
    for number, epoch in enumerate(parts):
        if number == cut:
            saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(capture(engine).to_data())))
            engine = subscribed(saved)
            engine.check_valid()
        for pattern in patterns:
            name = pattern.output.name
            if name in engine.planner.planned and data.draw(st.integers(0, odds - 1)) == 0:
                engine.replan(name, data.draw(st.sampled_from(choices(pattern))))
        got.update(engine.process(epoch))
        if check:
            engine.check_valid()
    return got
