"""The lazy and recomputing plans (automata/pattern/lazy.py) against the pattern oracle.

Random patterns the plans run — SEQ of singletons and Kleene closures under
skip till any match, with negations before and between components, ANY,
equivalence tests and a window; AND patterns — over random streams with
durations and simultaneous events: every plan that can run a pattern (a chain
in a random order, a tree, recompute), judging through the oracle's code or the
engine's generated code, gives the oracle's output multiset; and
so does a succession of plans switched at random epochs, each new one taking
the matches made only of later events (given the negated events of the last
window) and the one it replaces the rest until its window has passed.
"""

import math
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.pattern.lazy import LazyRun
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.plans import Plan, PlanKind, refusal
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.schema import epochs
from cesar.server.engine.codegen import Codegen
from tests.pattern_strategies import SCHEMAS, compiled_patterns, conjunctions, pattern_streams

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
LAZY = compiled_patterns(strategies=("skip_till_any_match",), windowed=True) | conjunctions(
    windowed=True
)


@st.composite
def plans(draw, pattern):
    """A plan of each lazy kind for ``pattern``, drawn at random, that can run it."""
    names = [step.var for step in pattern.steps]
    drawn = [
        Plan(PlanKind.RECOMPUTE),
        Plan(PlanKind.CHAIN, tuple(draw(st.permutations(names)))),
        Plan(PlanKind.TREE, (draw(st.sampled_from(names)),)),
        Plan(PlanKind.TREE),
    ]
    return [plan for plan in drawn if refusal(pattern, plan) is None]


@settings(max_examples=250, **SETTINGS)
@given(text=LAZY, streams=pattern_streams(), data=st.data())
def test_every_plan_gives_the_oracles_matches(text, streams, data):
    pattern = resolve(parse_pattern(text), SCHEMAS)
    want = Counter(evaluate(pattern, streams))
    events = [e for stream in streams.values() for e in stream]
    for plan in data.draw(plans(pattern)):
        for compiler in (None, Codegen()):  # the oracle's judge, then generated code
            run = LazyRun(pattern, plan, compiler=compiler)
            got = Counter(e for epoch in epochs(events) for e in run.process(epoch))
            assert got == want, plan.spell()
            assert run.counters.matches == sum(want.values())


@settings(max_examples=150, **SETTINGS)
@given(text=LAZY, streams=pattern_streams(), data=st.data())
def test_plans_switched_at_random_epochs_lose_and_double_nothing(text, streams, data):
    pattern = resolve(parse_pattern(text), SCHEMAS)
    events = [e for stream in streams.values() for e in stream]
    choices = data.draw(plans(pattern))
    if not choices:
        return
    runs = [LazyRun(pattern, data.draw(st.sampled_from(choices)))]
    got: Counter = Counter()
    for epoch in epochs(events):
        now = epoch[0].t1
        runs = [run for run in runs if now <= run.until + pattern.window]
        if data.draw(st.integers(0, 3)) == 0:
            switch = runs[-1].clock
            runs[-1].until = switch
            run = LazyRun(pattern, data.draw(st.sampled_from(choices)), since=switch)
            run.seed(list(runs[-1].negated))  # a negation before the first looks back
            runs.append(run)
        for run in runs:
            got.update(run.process(epoch))
    assert runs[-1].until == math.inf
    assert got == Counter(evaluate(pattern, streams))
