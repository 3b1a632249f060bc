"""After-match policies (automata/skipping.py, server/engine/skipping.py) against the oracle.

Random SEQ patterns under a random ``AFTER MATCH SKIP`` (tests/pattern_strategies.py
``skipping_patterns``) over random streams with durations and simultaneous events: the
single-automaton runtime and the engine in each mode publish the matches the pattern
oracle keeps, beside the same patterns without a policy (which share their automata's
nodes); and an engine restored between two epochs, matches held, runs on as one that
never stopped.
"""

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.runtime import Runner
from cesar.automata.schema import epochs
from cesar.server.engine.engine import Engine, EngineOptions
from tests.pattern_strategies import (
    SCHEMAS,
    automata_of,
    pattern_streams,
    skipping_patterns,
    through_a_restart,
)

MODES = {
    "full": EngineOptions(),
    "nomerge": EngineOptions(merge=False),
    "naive": EngineOptions(merge=False, indices=False),
}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


def compiled(text, number=0):
    pattern = resolve(parse_pattern(text.replace("PUBLISH P", f"PUBLISH P{number}")), SCHEMAS)
    return pattern, automata_of(pattern)


def without_policy(text):
    """The same pattern publishing every match."""
    head, tail = text.split(" AFTER MATCH SKIP ")
    return f"{head} PUBLISH {tail.split(' PUBLISH ')[1]}"


@settings(max_examples=300, **SETTINGS)
@given(text=skipping_patterns(), streams=pattern_streams())
def test_the_automaton_publishes_the_matches_the_oracle_keeps(text, streams):
    pattern, automata = compiled(text)
    events = [e for stream in streams.values() for e in stream]
    runner = Runner(automata)
    published = Counter(runner.run(events)) + Counter(runner.finish())
    assert published == Counter(evaluate(pattern, streams))


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=120, **SETTINGS)
@given(texts=st.lists(skipping_patterns(), min_size=1, max_size=3), streams=pattern_streams())
def test_the_engine_publishes_each_subscription_the_matches_the_oracle_keeps(mode, texts, streams):
    engine = Engine(MODES[mode])
    expected: Counter = Counter()
    for number, text in enumerate([*texts, *map(without_policy, texts)]):
        pattern, automata = compiled(text, number)
        engine.subscribe(f"q{number}", automata, pattern=pattern)
        expected.update(evaluate(pattern, streams))
    events = [e for stream in streams.values() for e in stream]
    published = Counter()
    for epoch in epochs(events):
        published.update(engine.process(epoch))
        engine.check_valid()
    published.update(engine.finish())  # the input ends: what is held goes out
    engine.check_valid()
    assert published == expected


@settings(max_examples=100, **SETTINGS)
@given(
    texts=st.lists(skipping_patterns(), min_size=1, max_size=3),
    streams=pattern_streams(),
    data=st.data(),
)
def test_a_restored_engine_publishes_the_matches_it_held(texts, streams, data):
    """Capture between two epochs, matches held and partitions' bounds set; rebuild from the
    texts, restore: the same later alerts."""
    builds = [lambda n=n, t=t: compiled(t, n)[1] for n, t in enumerate(texts)]
    parts = epochs([e for stream in streams.values() for e in stream])
    expected, got = through_a_restart(builds, parts, data.draw(st.integers(0, len(parts))))
    assert got == expected


def _no_trailing_negation(text):
    """A trailing negation's match waits for time to pass, not for the input to end."""
    return not parse_pattern(text).components[-1].negated


@pytest.mark.parametrize("mode", ["full", "automaton"])
@settings(max_examples=80, **SETTINGS)
@given(
    texts=st.lists(skipping_patterns().filter(_no_trailing_negation), min_size=1, max_size=3),
    streams=pattern_streams(),
)
def test_when_the_input_ends_the_matches_held_are_released(mode, texts, streams):
    """Without the last epoch after every window, what a policy holds when the events end is
    published by ``finish``, as the oracle (which sees the whole input) keeps it."""
    streams = {name: [e for e in events if e.t1 < 20] for name, events in streams.items()}
    events = [e for stream in streams.values() for e in stream]
    built = [compiled(text, number) for number, text in enumerate(texts)]
    expected = Counter(e for pattern, _ in built for e in evaluate(pattern, streams))
    if mode == "automaton":
        runner = Runner([a for _, automata in built for a in automata])
        published = Counter(runner.run(events)) + Counter(runner.finish())
    else:
        engine = Engine()
        for number, (pattern, automata) in enumerate(built):
            engine.subscribe(f"q{number}", automata, pattern=pattern)
        published = Counter(engine.run(events)) + Counter(engine.finish())
        engine.check_valid()
    assert published == expected
