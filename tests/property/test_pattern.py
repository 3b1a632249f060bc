"""Patterns on every fast path against the pattern oracle (automata/pattern/reference.py).

Random patterns the engine runs (tests/pattern_strategies.py: every strategy,
Kleene closures with aggregates, negation, ANY, equivalence tests, windows) over
random streams with durations and simultaneous events: the single-automaton
runtime and the multi-query engine — merged with indices, unmerged, naive —
give the oracle's output multiset, several subscriptions at once; and an
engine restored from a snapshot runs on as one that never stopped.  AND
patterns (tests/pattern_strategies.py ``conjunctions``) go through the same.
"""

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.partition import partition_keys
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.runtime import Runner
from cesar.automata.schema import Event, epochs
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.workload import Workload
from tests.pattern_strategies import (
    SCHEMAS,
    automata_of,
    compiled_patterns,
    conjunctions,
    negated_patterns,
    pattern_streams,
    through_a_restart,
)

MODES = {
    "full": EngineOptions(),
    "nomerge": EngineOptions(merge=False),
    "naive": EngineOptions(merge=False, indices=False),
}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


def compiled(text):
    pattern = resolve(parse_pattern(text), SCHEMAS)
    return pattern, automata_of(pattern)


@settings(max_examples=300, **SETTINGS)
@given(text=compiled_patterns(), streams=pattern_streams())
def test_the_automaton_gives_the_oracles_matches(text, streams):
    pattern, automata = compiled(text)
    events = [e for stream in streams.values() for e in stream]
    assert Counter(Runner(automata).run(events)) == Counter(evaluate(pattern, streams))


@settings(max_examples=400, **SETTINGS)
@given(text=negated_patterns() | conjunctions(), streams=pattern_streams())
def test_negation_and_and_on_the_runtime_and_the_engine(text, streams):
    pattern, automata = compiled(text)
    events = [e for stream in streams.values() for e in stream]
    expected = Counter(evaluate(pattern, streams))
    assert Counter(Runner(automata).run(events)) == expected
    engine = Engine()
    engine.subscribe("q", automata)
    assert Counter(engine.run(events)) == expected
    engine.check_valid()


ANY_PATTERN = compiled_patterns() | conjunctions()


@settings(max_examples=200, **SETTINGS)
@given(text=ANY_PATTERN | negated_patterns(), streams=pattern_streams())
def test_a_pattern_partitioned_on_k_gives_per_partition_what_it_gives_whole(text, streams):
    """Placement's soundness for patterns: for each key partition_keys reports, the oracle on
    each partition of the input by the key's value, unioned, is the oracle on the whole."""
    pattern, automata = compiled(text)
    read = {name: events for name, events in streams.items() if name in pattern.reads}
    whole = Counter(evaluate(pattern, read))
    for key in partition_keys(automata, SCHEMAS):
        values = {e.attrs()[key] for events in read.values() for e in events}
        parts: Counter = Counter()
        for value in values:
            part = {n: [e for e in events if e.attrs()[key] == value] for n, events in read.items()}
            parts.update(evaluate(pattern, part))
        assert parts == whole


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=150, **SETTINGS)
@given(
    texts=st.lists(ANY_PATTERN, min_size=1, max_size=3),
    copies=st.integers(1, 2),
    streams=pattern_streams(),
)
def test_the_engine_gives_each_subscription_the_oracles_matches(mode, texts, copies, streams):
    engine = Engine(MODES[mode])
    expected = Counter()
    for number, text in enumerate(texts * copies):
        pattern, automata = compiled(text.replace("PUBLISH P", f"PUBLISH P{number}"))
        engine.subscribe(f"q{number}", automata)
        expected.update(evaluate(pattern, streams))
    engine.check_valid()
    events = [e for stream in streams.values() for e in stream]
    assert Counter(engine.run(events)) == expected
    engine.check_valid()


READERS = ["P NEXT{} S PUBLISH R", "S NEXT{} P PUBLISH R", "FILTER{DUR > 2} P PUBLISH R"]


@settings(max_examples=200, **SETTINGS)
@given(
    text=negated_patterns() | compiled_patterns(),
    reader=st.sampled_from(READERS),
    streams=pattern_streams(),
    mode=st.sampled_from(["automaton", "engine", "nomerge"]),
    spread=st.sampled_from([1, 3]),
)
def test_a_query_reading_a_pattern_sees_each_match_at_its_time(text, reader, streams, mode, spread):
    """A CEL query reading a pattern's matches — one a trailing negation publishes when the
    clock passes its window's end included, which ends before that epoch — pairs them with
    the events after them, as the reference evaluator does with the whole stream.  Spread
    epochs leave windows ending between them."""
    compiled(text)  # a pattern past the DNF limit is refused by the server: no fast path
    workload = Workload.build(SCHEMAS.values(), [("P", text), ("R", reader)])
    events = [
        Event(e.stream, e.t0 * spread, e.t1 * spread, e.values)
        for stream in streams.values()
        for e in stream
    ]
    assert Counter(workload.run(events, engine=mode)) == Counter(workload.run(events))


@settings(max_examples=100, **SETTINGS)
@given(
    texts=st.lists(ANY_PATTERN | negated_patterns(), min_size=1, max_size=3),
    streams=pattern_streams(),
    data=st.data(),
)
def test_a_restored_engine_runs_patterns_on_as_if_never_stopped(texts, streams, data):
    """Capture the run state between two epochs (spoiled marks, runs waiting out a trailing
    negation, union streams, AND's joining runs, events remembered for negations that look
    back), rebuild from the pattern texts, restore: the same later alerts."""
    builds = [
        lambda n=n, t=t: compiled(t.replace("PUBLISH P", f"PUBLISH P{n}"))[1]
        for n, t in enumerate(texts)
    ]
    parts = epochs([e for stream in streams.values() for e in stream])
    expected, got = through_a_restart(builds, parts, data.draw(st.integers(0, len(parts))))
    assert got == expected
