"""Time-window aggregates and time functions (automata/windows.py, server/engine/windowing.py)
against their definitions.

A window's running state gives, event by event, what the literal definition computes from
the whole stream (floats to the bit: both sums are exact); random patterns and CEL queries
reading windows give the oracles' outputs on every path, several subscriptions sharing a
window; and an engine restored between two epochs, windows half full, runs on as one that
never stopped.  Functions of events' times in a stream's zone, around a change of daylight
saving time, give the reference's output on every path.
"""

import pickle
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from cesar.automata.derived import state_of
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.runtime import Runner
from cesar.automata.schema import Event, epochs, parse_stream_spec
from cesar.automata.windows import FUNCTIONS, Window, literal
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.workload import Workload, WorkloadError
from tests.pattern_strategies import (
    SCHEMAS,
    automata_of,
    pattern_streams,
    through_a_restart,
    window_patterns,
    window_queries,
)
from tests.strategies import streams

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
MODES = {
    "full": EngineOptions(),
    "nomerge": EngineOptions(merge=False),
    "naive": EngineOptions(merge=False, indices=False),
}


@st.composite
def quotes(draw: st.DrawFn) -> list[Event]:
    """Events of Q(k, x) with float values of every magnitude (sums past the largest float
    included), simultaneous ones included."""
    out = []
    t1 = 0
    for _ in range(draw(st.integers(1, 40))):
        t1 += draw(st.sampled_from([0, 0, 1, 2, 5]))
        x = draw(
            st.floats(-1e12, 1e12, allow_nan=False)
            | st.sampled_from([0.1, 0.2, 1e-9, 1.7e308, -1.7e308, 5e-324])
        )
        out.append(Event.of("Q", t1, t1, {"k": draw(st.sampled_from("ab")), "x": x}))
    return out


@settings(max_examples=300, **SETTINGS)
@given(
    events=quotes(),
    function=st.sampled_from(FUNCTIONS),
    ticks=st.integers(1, 8),
    keyed=st.booleans(),
    limit=st.none() | st.integers(1, 5),
)
def test_the_running_window_gives_the_literal_value_event_by_event(
    events, function, ticks, keyed, limit
):
    counting = function.startswith("COUNT_")
    window = Window(function, None if counting else "x", ticks, ("k",) * keyed)
    state = state_of(window, limit)
    for epoch in epochs(events):
        for event in state.step(epoch):
            if limit is None:
                assert event.value(window.name) == literal(window, event, events)
        state.check_valid()
        again = state_of(window, limit)
        again.restore(pickle.loads(pickle.dumps(state.to_data())))
        again.check_valid()
        assert again.to_data() == state.to_data()
        if limit is None:
            assert [again.value(k) for k in _keys(epoch, window)] == [
                state.value(k) for k in _keys(epoch, window)
            ]
    if limit is not None:
        held = state.partitions if window.tumbling else state.order
        assert len(held) <= limit


def _keys(epoch, window):
    return [window.key_of(e) for e in epoch]


@settings(max_examples=250, **SETTINGS)
@given(text=window_patterns(), streams=pattern_streams())
def test_patterns_reading_windows_give_the_oracles_matches(text, streams):
    pattern = resolve(parse_pattern(text), SCHEMAS)
    automata = automata_of(pattern)
    events = [e for stream in streams.values() for e in stream]
    expected = Counter(evaluate(pattern, streams))
    assert Counter(Runner(automata).run(events)) == expected
    engine = Engine()
    engine.subscribe("q", automata, pattern=pattern)
    assert Counter(engine.run(events)) == expected
    engine.check_valid()


@pytest.mark.parametrize("mode", ["automaton", "engine", "nomerge", "naive", "planned"])
@settings(max_examples=100, **SETTINGS)
@given(
    texts=st.lists(window_queries() | window_patterns("W"), min_size=1, max_size=3),
    events=streams("S", max_events=14),
)
def test_subscriptions_sharing_windows_give_the_references_output(mode, texts, events):
    queries = [(f"q{n}", t.replace("PUBLISH W", f"PUBLISH W{n}")) for n, t in enumerate(texts)]
    try:
        workload = Workload.build(SCHEMAS.values(), queries)
    except WorkloadError as exc:  # a closure over ANY past the DNF limit: refused, as served
        assert "disjunctive normal form" in str(exc)
        reject()
    assert Counter(workload.run(events, engine=mode)) == Counter(workload.run(events))


@settings(max_examples=100, **SETTINGS)
@given(
    texts=st.lists(window_patterns(), min_size=1, max_size=3),
    streams=pattern_streams(),
    data=st.data(),
)
def test_a_restored_engine_keeps_its_windows(texts, streams, data):
    builds = [
        lambda n=n, t=t: automata_of(
            resolve(parse_pattern(t.replace("PUBLISH P", f"PUBLISH P{n}")), SCHEMAS)
        )
        for n, t in enumerate(texts)
    ]
    parts = epochs([e for stream in streams.values() for e in stream])
    expected, got = through_a_restart(builds, parts, data.draw(st.integers(0, len(parts))))
    assert got == expected


ZONED = parse_stream_spec("Z(k:string,v:int)[min, America/New_York]")
NIGHT_OF_THE_CHANGE = 26736840  # 2020-11-01 06:00 UTC: 01:00 EST, an hour after 01:00 EDT


@st.composite
def zoned_events(draw: st.DrawFn) -> list[Event]:
    """Events of Z within 150 minutes of the end of daylight saving time in New York (the
    hour from 01:00 comes twice), some with durations."""
    out = []
    for _ in range(draw(st.integers(0, 12))):
        t1 = NIGHT_OF_THE_CHANGE + draw(st.integers(-150, 150))
        t0 = t1 - draw(st.sampled_from([0, 0, 30, 90]))
        values = {"k": draw(st.sampled_from("ab")), "v": draw(st.integers(0, 4))}
        out.append(Event.of("Z", t0, t1, values))
    return sorted(out, key=lambda e: e.t1)


@st.composite
def time_queries(draw: st.DrawFn) -> str:
    """A CEL query or a pattern over Z reading functions of its events' times."""
    function = draw(st.sampled_from(["HOUR", "MINUTE", "MINUTE_OF_DAY", "DAY_OF_WEEK", "DATE"]))
    which = draw(st.sampled_from(["t0", "t1"]))
    value = "'2020-11-01'" if function == "DATE" else str(draw(st.integers(0, 70)))
    op = draw(st.sampled_from(["=", "<", ">="]))
    if draw(st.integers(0, 3)) == 0:  # buckets on New York's clock, the hour from 01:00 twice
        length = draw(st.sampled_from([30, 45, 60, 90, 1440]))
        offset = draw(st.integers(0, length - 1))
        count = draw(st.integers(1, 3))
        return (
            f"SELECT *, COUNT_TUMBLING({length}, {offset}, k) AS n, SUM_TUMBLING(v, {length}) "
            f"AS s FROM FILTER{{COUNT_TUMBLING({length}, {offset}, k) {op} {count}}} Z PUBLISH W"
        )
    if draw(st.booleans()):
        side = draw(st.sampled_from(["$1.", "$2."]))
        return (
            f"SELECT *, HOUR({which}) AS h FROM (Z NEXT{{$1.k = $2.k AND "
            f"{function}({side}{which}) {op} {value}}} Z) PUBLISH W"
        )
    return (
        f"PATTERN SEQ(Z a, Z b) WHERE [k] AND {function}(b.{which}) {op} {value} WITHIN 90 "
        f"RETURN a.v AS v, {function}(a.{which}) AS f PUBLISH W"
    )


@pytest.mark.parametrize("mode", ["automaton", "engine", "naive", "planned"])
@settings(max_examples=100, **SETTINGS)
@given(texts=st.lists(time_queries(), min_size=1, max_size=3), events=zoned_events())
def test_time_functions_in_the_streams_zone_on_every_path(mode, texts, events):
    queries = [(f"q{n}", t.replace("PUBLISH W", f"PUBLISH W{n}")) for n, t in enumerate(texts)]
    workload = Workload.build([ZONED], queries)
    assert Counter(workload.run(events, engine=mode)) == Counter(workload.run(events))
