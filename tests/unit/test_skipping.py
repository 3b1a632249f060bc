"""After-match policies: the clause's syntax and checks (automata/pattern/parser.py, resolve.py),
what each policy keeps on a stream worked by hand, and the engine's refusals
(server/engine/skipping.py)."""

from __future__ import annotations

import pickle

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelSemanticError, CelSyntaxError
from cesar.automata.pattern.construct import build_pattern_automata
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.runtime import Runner
from cesar.automata.schema import Event, parse_stream_spec
from cesar.automata.skipping import Skip, SkipKind, Skipper
from cesar.server.engine.engine import Engine
from cesar.server.engine.workload import Workload

S = {"S": parse_stream_spec("S(k:string,v:int)")}
RISE = "PATTERN SEQ(S a, S b) WHERE [k] AND b.v > a.v WITHIN 10"


def rising() -> list[Event]:
    """v = 1, 2, 3 at ticks 1-3 for k = 'x', the same at 5-7 for k = 'y'; then a tick at 20
    that ends every window (no match: nothing follows it)."""
    events = [Event.of("S", t, t, {"k": "x", "v": t}) for t in (1, 2, 3)]
    events += [Event.of("S", t, t, {"k": "y", "v": t - 4}) for t in (5, 6, 7)]
    return [*events, Event.of("S", 20, 20, {"k": "z", "v": 0})]


def pairs(text: str) -> list[tuple[int, int]]:
    """The (a, b) ticks of each match ``text`` publishes on :func:`rising`, by every path."""
    pattern = resolve(parse_pattern(text), S, "M")
    events = rising()
    expected = sorted(evaluate(pattern, {"S": events}), key=repr)
    automata = build_pattern_automata(pattern, S)
    assert sorted(Runner(automata).run(events), key=repr) == expected
    engine = Engine()
    engine.subscribe("q", automata, pattern=pattern)
    assert sorted(engine.run(events), key=repr) == expected
    engine.check_valid()
    return sorted((e.t0, e.t1) for e in expected)


@pytest.mark.parametrize(
    ("clause", "kept"),
    [
        ("", [(1, 2), (1, 3), (2, 3), (5, 6), (5, 7), (6, 7)]),
        ("AFTER MATCH SKIP PAST LAST ROW", [(1, 2), (5, 6)]),
        ("AFTER MATCH SKIP TO NEXT ROW", [(1, 2), (2, 3), (5, 6), (6, 7)]),
        ("AFTER MATCH SKIP TO FIRST b", [(1, 2), (2, 3), (5, 6), (6, 7)]),
        ("after match skip past last event", [(1, 2), (5, 6)]),
    ],
)
def test_each_policy_keeps_per_partition_the_matches_flink_would(clause, kept):
    assert pairs(f"{RISE} {clause}") == kept


def test_past_last_row_takes_the_earliest_start_then_the_earliest_end():
    """(1, 2) before (1, 3): both start at 1, the earlier end is taken first; (2, 3) starts
    at 2, not after (1, 2)'s last event."""
    assert pairs(f"{RISE} AFTER MATCH SKIP PAST LAST ROW") == [(1, 2), (5, 6)]


def test_a_match_is_held_until_no_earlier_run_can_complete():
    """At tick 3 no match is final yet: a run started at 1 may complete until 11."""
    pattern = resolve(parse_pattern(f"{RISE} AFTER MATCH SKIP PAST LAST ROW"), S, "M")
    engine = Engine()
    engine.subscribe("q", build_pattern_automata(pattern, S), pattern=pattern)
    assert [engine.process([e]) for e in rising()[:3]] == [[], [], []]
    assert [(e.t0, e.t1) for e in engine.process([Event.of("S", 11, 11, {"k": "x", "v": 0})])] == [
        (1, 2)
    ]


@pytest.mark.parametrize("mode", ["automaton", "engine", "nomerge", "planned", "reference"])
def test_when_the_input_ends_what_a_policy_holds_is_released_by_every_engine(mode):
    """Without the tick at 20, both matches are still held when the events end at 7 (a run
    started at 1 could complete until 11): ``cesar run`` (a Workload) releases and counts
    them."""
    program = Workload.build(S.values(), [("M", f"{RISE} AFTER MATCH SKIP PAST LAST ROW")])
    out = program.run(rising()[:-1], engine=mode)
    assert sorted((e.t0, e.t1) for e in out) == [(1, 2), (5, 6)]
    assert program.released == (0 if mode == "reference" else 2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PATTERN SEQ(S a, S b) AFTER MATCH SKIP PAST LAST ROW", "needs WITHIN"),
        ("PATTERN AND(S a, S b) WITHIN 5 AFTER MATCH SKIP TO NEXT ROW", "applies to SEQ"),
        ("PATTERN SEQ(S a, S b) WITHIN 5 AFTER MATCH SKIP TO LAST c", "c is not a component"),
        ("PATTERN SEQ(S a, S b) WITHIN 5 AFTER MATCH SKIP TO FIRST a", "skip nothing"),
        ("PATTERN SEQ(S a, !(S n), S b) WITHIN 5 AFTER MATCH SKIP TO LAST n", "not a component"),
    ],
)
def test_a_policy_that_cannot_mean_anything_is_refused_with_its_place(text, message):
    with pytest.raises(CelSemanticError, match=message) as raised:
        resolve(parse_pattern(text), S, "M")
    assert (raised.value.line, raised.value.column) == (1, text.index("AFTER") + 1)


def test_a_misspelt_policy_says_what_was_expected():
    text = "PATTERN SEQ(S a, S b) WITHIN 5\nAFTER MATCH SKIP TO NEXT b"
    with pytest.raises(CelSyntaxError, match=r"line 2, column 1: .*expected AFTER MATCH SKIP"):
        parse_pattern(text)


def test_a_query_may_not_read_a_stream_published_under_a_policy():
    pattern = resolve(parse_pattern(f"{RISE} AFTER MATCH SKIP TO NEXT ROW"), S, "M")
    engine = Engine()
    engine.subscribe("q", build_pattern_automata(pattern, S), pattern=pattern)
    reader = compile_query("M NEXT{} S", {**S, "M": pattern.output}, "R")
    with pytest.raises(ValueError, match="no query may read it"):
        engine.subscribe("r", reader.automata)
    engine.unsubscribe("q")
    engine.subscribe("r", reader.automata)
    with pytest.raises(ValueError, match="cannot be published under AFTER MATCH SKIP"):
        engine.subscribe("q", build_pattern_automata(pattern, S), pattern=pattern)
    engine.check_valid()


def test_a_skipper_saved_and_restored_keeps_its_held_matches_and_bounds():
    skipper = Skipper(Skip(SkipKind.PAST_LAST, window=5))
    values = {"@start": 0, "@bound": 1, "@key.k": "x", "v": 1}
    skipper.add(Event.of("M", 1, 2, values))
    skipper.add(Event.of("M", 2, 3, values))
    assert [e.t0 for e in skipper.release(6)] == [1]
    again = Skipper(skipper.skip)
    again.restore(skipper.to_data(), "M")
    again.check_valid()
    assert again.bounds == {("x",): 2}
    assert again.release(7) == []  # (2, 3) starts at 2, not after (1, 2)'s end


def test_a_skipper_forgets_the_bounds_no_match_can_meet():
    """Forty partitions each publish a match; once the clock is a window past their bounds,
    none is kept (a later match of theirs starts after them anyway)."""
    skipper = Skipper(Skip(SkipKind.PAST_LAST, window=5))
    for k in range(40):
        skipper.add(Event.of("M", 1, 2, {"@start": 0, "@bound": 1, "@key.k": str(k), "v": 1}))
    assert len(skipper.release(6)) == 40
    assert len(skipper.bounds) == 40  # not yet moot: the horizon is 1, the bounds 2
    skipper.add(Event.of("M", 9, 12, {"@start": 0, "@bound": 3, "@key.k": "0", "v": 2}))
    assert [e.t0 for e in skipper.release(14)] == [9]
    assert skipper.bounds == {("0",): 12}
    skipper.check_valid()


def test_a_compiled_policy_travels_by_pickle_as_the_compile_workers_send_it() -> None:
    """The compile workers pickle a query's automata to the front; the policy is a compiled
    frozen class there, which refuses pickle's default field writes."""
    (automaton,) = compile_query(f"{RISE} AFTER MATCH SKIP TO LAST b PUBLISH M", S).automata
    assert automaton.skip is not None
    copy = pickle.loads(pickle.dumps(automaton))
    assert copy.skip == automaton.skip and copy.skip.window == 10 and copy.skip.var == "b"
    assert str(copy.skip) == "AFTER MATCH SKIP TO LAST b"
