"""Shared internal streams (server/engine/commons.py): composite patterns that differ in
constants share their union and their join nodes; the union leaves with its last reader; a
pattern with OR publishes without a hop."""

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.engine.engine import Engine, EngineOptions

SCHEMAS = {n: parse_stream_spec(f"{n}(k:int,Price:float)") for n in "ABCD"}
AND = "PATTERN AND(SEQ(A a, B b), SEQ(C c, D d)) WHERE [k] AND a.Price > {c} WITHIN 9 PUBLISH P{i}"
OR = "PATTERN SEQ(A a, OR(SEQ(B b, C c), D d)) WHERE [k] AND a.Price > {c} WITHIN 9 PUBLISH P{i}"
EVENTS = [
    Event.of(s, t, t, {"k": 1, "Price": p})
    for t, (s, p) in enumerate([("A", 5.0), ("C", 1.0), ("B", 1.0), ("D", 1.0), ("A", 2.0)], 1)
]


def subscribed(form, count, options=None):
    engine = Engine(options)
    for i in range(count):
        engine.subscribe(f"s{i}", compile_query(form.format(c=i, i=i), SCHEMAS).automata)
        engine.check_valid()
    return engine


@pytest.mark.parametrize("form", [AND, OR])
def test_patterns_differing_in_a_constant_share_every_node(form):
    one, many = subscribed(form, 1), subscribed(form, 40)
    assert len(many.program.dag.nodes) == len(one.program.dag.nodes)
    assert many.subscriptions == [f"s{i}" for i in range(40)]  # the union is no one's


def test_the_union_is_made_once_per_event_and_goes_with_its_last_reader():
    engine = subscribed(AND, 3)
    unions = [s for s in engine.program.since if s.startswith("#union")]
    assert len(unions) == 1
    out = engine.run(EVENTS)
    # a.Price 5 passes the constants 0..3 of s0..s2: one match each, the union's events
    # made once per event (5 of them), not once per pattern.
    assert sorted(e.stream for e in out) == ["P0", "P1", "P2"]
    assert engine.counters.matches == 3 + len(EVENTS)
    for i in range(3):
        assert unions[0] in engine.program.since
        engine.unsubscribe(f"s{i}")
        engine.check_valid()
    assert not engine.program.since and len(engine.program.dag.nodes) == 1


def test_an_engine_that_does_not_merge_gives_each_pattern_its_own_union():
    engine = subscribed(AND, 3, EngineOptions(merge=False))
    assert len([s for s in engine.program.since if s.startswith("#union")]) == 3
    assert sorted(e.stream for e in engine.run(EVENTS)) == ["P0", "P1", "P2"]


def test_an_or_publishes_each_alternatives_match_once_to_its_stream():
    engine = subscribed(OR, 2)
    out = engine.run(EVENTS)
    # A(5) then B, C: SEQ(a, b, c) needs b before c (C at 2, B at 3: no); A(5) then D(4):
    # SEQ(a, d) for both patterns; A(2) at 5 has nothing after it.
    assert sorted(e.stream for e in out) == ["P0", "P1"]
    assert engine.counters.matches == 2  # no internal stream in between
    engine.unsubscribe("s0")
    engine.check_valid()
    assert engine.program.slot_of.keys() == {"P1"} and len(engine.program.slot_of["P1"]) == 2
