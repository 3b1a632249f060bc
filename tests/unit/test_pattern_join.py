"""AND patterns on the engine (automata/pattern/join.py): joining nodes, by arrival, any order.

Each case runs through the single-automaton runtime, the engine and the oracle
(``both``), which must agree; the expected matches are worked out by hand.
"""

from cesar.automata.automaton import EdgeKind
from cesar.automata.pattern.construct import build_pattern_automata
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.resolve import resolve
from cesar.automata.schema import Event
from cesar.automata.terms import TRUE
from tests.unit.test_pattern_construct import both
from tests.unit.test_pattern_reference import SCHEMAS, ev


def test_and_pairs_simultaneous_events_once_each_way():
    """Two events of one epoch give both assignments, each once; a third epoch's event pairs
    with each of them (any order); no event pairs with itself."""
    text = "PATTERN AND(A a, A b) RETURN a.id AS first, b.id AS second"
    events = [ev("A", 1, id=1, x=0), ev("A", 1, id=2, x=0), ev("A", 2, id=3, x=0)]
    pairs = sorted((m["first"], m["second"]) for _, _, m in both(text, events))
    assert pairs == [(1, 2), (1, 3), (2, 1), (2, 3), (3, 1), (3, 2)]


def test_and_matches_overlapping_intervals_by_arrival():
    """B [3, 4] arrives before A [1, 5] ends: still a match, spanning [1, 5] — SEQ would not
    see B after A, nor A after B."""
    a = Event.of("A", 1, 5, {"id": 1, "x": 0})
    b = Event.of("B", 3, 4, {"id": 2, "x": 0})
    text = "PATTERN AND(A a, B b) WITHIN 4 RETURN a.id, b.id"
    assert both(text, [b, a]) == [(1, 5, {"a_id": 1, "b_id": 2})]
    assert both(text.replace("WITHIN 4", "WITHIN 3"), [b, a]) == []


def test_and_of_three_streams_in_any_order_within_the_window():
    text = """PATTERN AND(A a, B b, C c) WHERE b.x > a.x AND c.id = a.id WITHIN 3
    RETURN a.x AS ax, b.x AS bx"""
    events = [
        ev("C", 1, id=7, x=0),
        ev("B", 2, id=0, x=5),
        ev("A", 3, id=7, x=1),
        ev("A", 3, id=8, x=1),
        ev("B", 5, id=0, x=0),
        ev("C", 5, id=7, x=0),
    ]
    assert both(text, events) == [(1, 3, {"ax": 1, "bx": 5}), (2, 5, {"ax": 1, "bx": 5})]


def test_an_and_automaton_has_a_joining_node_per_set_of_bound_components():
    pattern = resolve(parse_pattern("PATTERN AND(A a, B b, C c)"), SCHEMAS, "out")
    union, automaton = build_pattern_automata(pattern, SCHEMAS)
    assert union.internal and len(automaton.nodes) == 8
    assert automaton.joining == frozenset(range(1, 7))
    stays = [e for e in automaton.edges if e.kind is EdgeKind.STAY]
    assert len(stays) == 6 and all(e.pred == TRUE for e in stays)
