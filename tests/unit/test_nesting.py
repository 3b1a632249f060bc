"""OR and nested groups (automata/pattern/nesting.py): alternatives, what is refused and why,
and the tree oracle (nested_reference.py) on hand-worked streams."""

from collections import Counter

import pytest

from cesar.automata.compiler import compile_pattern
from cesar.automata.errors import CelSemanticError, CelSyntaxError
from cesar.automata.pattern.construct import NotCompiled
from cesar.automata.pattern.nested_reference import evaluate_nested
from cesar.automata.pattern.nesting import MAX_ALTERNATIVES, alternatives, show
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.runtime import Runner
from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.engine.engine import Engine

SCHEMAS = {n: parse_stream_spec(f"{n}(x:int)") for n in "ABCDN"}


def ev(stream, t, x=0, t0=None):
    return Event.of(stream, t if t0 is None else t0, t, {"x": x})


def shapes(text):
    return [show(alt.group) for alt in alternatives(parse_pattern(text), "P")]


def test_or_distributes_and_nested_groups_of_one_operator_splice():
    assert shapes("PATTERN SEQ(A a, OR(SEQ(B b, C c), D d)) PUBLISH P") == [
        "SEQ(a, b, c)",
        "SEQ(a, d)",
    ]
    assert shapes("PATTERN AND(A a, OR(B b, C c)) PUBLISH P") == ["AND(a, b)", "AND(a, c)"]
    assert shapes("PATTERN SEQ(OR(A a, B b), OR(C c, D d)) PUBLISH P") == [
        "SEQ(a, c)",
        "SEQ(a, d)",
        "SEQ(b, c)",
        "SEQ(b, d)",
    ]
    assert shapes("PATTERN OR(A a, SEQ(B b, SEQ(C c, !(N n), D d))) PUBLISH P") == [
        "a",
        "SEQ(b, c, !n, d)",
    ]


def test_each_alternative_publishes_the_patterns_stream_without_a_hop():
    q = compile_pattern("PATTERN SEQ(A a, OR(B b, C c)) PUBLISH P", SCHEMAS)
    assert [(a.name, a.internal) for a in q.automata] == [("P", False), ("P", False)]
    assert q.output.spec() == "P(a_x:int)"
    assert q.pattern is None and q.nested is not None
    single = compile_pattern("PATTERN SEQ(A a, SEQ(B b, C c)) PUBLISH P", SCHEMAS)
    assert [a.name for a in single.automata] == ["P"] and single.pattern is not None


def test_the_tree_oracle_and_the_engine_on_a_hand_worked_stream():
    """A at 1; B at 2, C at 3, D at 3: SEQ(a, OR(SEQ(b, c), d)) matches (a, b, c) and (a, d);
    a variable in both alternatives of an either-order OR is read by RETURN."""
    events = [ev("A", 1, 5), ev("B", 2, 6), ev("C", 3, 7), ev("D", 3, 8)]
    streams = {s: [e for e in events if e.stream == s] for s in "ABCD"}
    text = "PATTERN SEQ(A a, OR(SEQ(B b, C c), D d)) WITHIN 5 RETURN a.x AS ax PUBLISH P"
    q = compile_pattern(text, SCHEMAS)
    expected = [Event.of("P", 1, 3, {"ax": 5})] * 2
    assert q.nested is not None
    assert Counter(evaluate_nested(q.nested, streams)) == Counter(expected)
    assert Counter(Runner(q.automata).run(events)) == Counter(expected)
    engine = Engine()
    engine.subscribe("q", q.automata)
    assert Counter(engine.run(events)) == Counter(expected)
    either = "PATTERN OR(SEQ(A a, B b), SEQ(B b, A a)) RETURN a.x AS ax, b.x AS bx PUBLISH E"
    q = compile_pattern(either, SCHEMAS)
    assert q.nested is not None
    late = [ev("B", 0, 1), ev("A", 1, 5), ev("B", 2, 6), ev("B", 1, 9)]
    got = evaluate_nested(q.nested, {"A": late[1:2], "B": [late[0], late[3], late[2]]})
    assert Counter(got) == Counter(
        [Event.of("E", 0, 1, {"ax": 5, "bx": 1}), Event.of("E", 1, 2, {"ax": 5, "bx": 6})]
    )


def test_a_seq_inside_an_and_is_ordered_on_the_oracle_and_the_engine():
    """AND(SEQ(a, b), SEQ(c, d)): the pairs in any order, overlapping too; the engine's join
    ordered by the structure gives the same, and refuses a closure inside the AND."""
    text = "PATTERN AND(SEQ(A a, B b), SEQ(C c, D d)) WITHIN 9 PUBLISH P"
    streams = {"A": [ev("A", 1)], "B": [ev("B", 4)], "C": [ev("C", 2), ev("C", 5)]}
    streams["D"] = [ev("D", 3)]
    events = sorted((e for s in streams.values() for e in s), key=lambda e: e.t1)
    q = compile_pattern(text, SCHEMAS)
    assert q.nested is not None
    got = evaluate_nested(q.nested, streams)
    assert [(e.t0, e.t1) for e in got] == [(1, 4)]  # c at 2, d at 3; c at 5 has no later d
    assert Counter(Runner(q.automata).run(events)) == Counter(got)
    closure = "PATTERN AND(SEQ(A+ a[], B b), SEQ(C c, D d)) WITHIN 9 PUBLISH P"
    with pytest.raises(NotCompiled, match=r"the Kleene closure a is inside an AND"):
        compile_pattern(closure, SCHEMAS)
    assert compile_pattern(closure, SCHEMAS, build=False).nested is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PATTERN OR(A a, !(N n)) WITHIN 3", "a negation stands in a SEQ"),
        ("PATTERN AND(A a, SEQ(B b, !(N n))) WITHIN 3", "cannot start or end with a negation"),
        ("PATTERN AND(A a, OR(B b, C+ c[]))", "AND takes components without"),
        ("PATTERN SEQ(A a, OR(B b, C c)) RETURN b.x + c.x AS s", "RETURN reads b, c, which no"),
        ("PATTERN SEQ(A a, OR(B b, C c)) RETURN ALTERNATIVE(a.x) AS n", "takes no argument"),
        ("PATTERN SEQ(A a, OR(B b, C c)) WHERE b.x = c.x", "names b, c, which no alternative"),
        ("PATTERN OR(SEQ(A a, B b), SEQ(C a, B b))", "variable a names two different"),
        ("PATTERN SEQ(A a, SEQ(!(N n), !(N m)), B b) WITHIN 3", "a group needs a component"),
        ("PATTERN OR(A a, B b) WHERE skip_till_next_match(a, b) {}", "skip_till_any_match only"),
        (
            "PATTERN OR(AND(A a, B b), C c) WITHIN 3 AFTER MATCH SKIP PAST LAST ROW",
            "every alternative must be a sequence of components; AND",
        ),
        (
            "PATTERN OR(SEQ(A a, B b), C c) WITHIN 3 AFTER MATCH SKIP TO LAST b",
            "b is not a component",
        ),
        ("PATTERN OR(SEQ(A a, B b), C c) AFTER MATCH SKIP TO NEXT ROW", "needs WITHIN"),
        ("PATTERN OR(A a, SEQ(B b, C c)) PLAN chain(c, b)", "a lazy plan orders the components"),
        ("PATTERN SEQ(B b, OR(A a, B b))", "declared twice"),
        ("PATTERN OR(SEQ(!(N n), A a), B b)", "needs WITHIN"),
    ],
)
def test_what_no_evaluator_runs_is_refused_with_the_reason(text, message):
    with pytest.raises(CelSemanticError, match=message) as caught:
        compile_pattern(text + " PUBLISH P", SCHEMAS, build=False)
    assert caught.value.line == 1 and caught.value.column >= 1


def test_return_says_which_alternative_matched_and_zero_for_what_it_does_not_bind():
    text = "PATTERN SEQ(A a, OR(SEQ(B b, C c), D d)) RETURN ALTERNATIVE() AS alt, b.x, d.x"
    q = compile_pattern(text + " PUBLISH P", SCHEMAS)
    assert q.output.spec() == "P(alt:int,b_x:int,d_x:int)"
    events = [ev("A", 1), ev("B", 2, 5), ev("D", 3, 7), ev("C", 4)]
    rows = sorted((dict(e.values) for e in Runner(q.automata).run(events)), key=repr)
    assert rows == [{"alt": 1, "b_x": 5, "d_x": 0}, {"alt": 2, "b_x": 0, "d_x": 7}]
    streams = {n: [e for e in events if e.stream == n] for n in "ABCD"}
    assert sorted((dict(e.values) for e in evaluate_nested(q.nested, streams)), key=repr) == rows
    flat = compile_pattern("PATTERN SEQ(A a, B b) RETURN ALTERNATIVE() AS alt PUBLISH P", SCHEMAS)
    assert [dict(e.values) for e in Runner(flat.automata).run(events)] == [{"alt": 1}]


def test_a_nested_pattern_takes_a_policy_and_an_eager_plan():
    text = "PATTERN OR(SEQ(A a, B b), C c) WITHIN 3 AFTER MATCH SKIP PAST LAST ROW PLAN eager"
    automata = compile_pattern(text + " PUBLISH P", SCHEMAS).automata
    assert [(a.name, a.skip is not None) for a in automata] == [("P", True), ("P", True)]


def test_too_many_alternatives_name_the_limit():
    ors = ", ".join(f"OR(A a{n}, B b{n})" for n in range(6))
    with pytest.raises(CelSemanticError, match=f"64 alternatives, more than {MAX_ALTERNATIVES}"):
        compile_pattern(f"PATTERN SEQ({ors}) PUBLISH P", SCHEMAS, build=False)


def test_a_misspelt_group_is_a_syntax_error_saying_what_could_come():
    with pytest.raises(CelSyntaxError, match="line 1, column 21") as caught:
        parse_pattern("PATTERN SEQ(A a, OR B b)")
    assert "'('" in str(caught.value)


def test_a_negation_in_an_and_lies_between_the_first_and_last_events_by_arrival():
    """AND(A a, B b, !(N n)): A at 1 and B at 3 are split by N at 2 (dropped); A at 6 and B
    at 3 or 4 have N at 5, which fails n.x > a.x, between them (kept); the engine judges
    it as the oracle does, against the N events it remembers."""
    text = "PATTERN AND(A a, B b, !(N n)) WHERE n.x > a.x WITHIN 9 PUBLISH P"
    events = [ev("A", 1, 1), ev("N", 2, 5), ev("B", 3, 2), ev("B", 4, 3), ev("N", 5, 0)]
    events.append(ev("A", 6, 4))
    streams = {s: [e for e in events if e.stream == s] for s in "ABN"}
    q = compile_pattern(text, SCHEMAS)
    assert q.pattern is not None
    expected = Counter(
        [Event.of("P", 3, 6, {"a_x": 4, "b_x": 2}), Event.of("P", 4, 6, {"a_x": 4, "b_x": 3})]
    )
    assert Counter(evaluate(q.pattern, streams)) == expected
    assert Counter(Runner(q.automata).run(events)) == expected
    engine = Engine()
    engine.subscribe("q", q.automata)
    assert Counter(engine.run(events)) == expected
    nested = compile_pattern(
        text.replace("(N n))", "(N n)))").replace("AND(", "OR(AND("), SCHEMAS, build=False
    )
    assert nested.nested is not None
    assert Counter(evaluate_nested(nested.nested, streams)) == expected
    with pytest.raises(NotCompiled, match=r"negation in an AND .* needs WITHIN"):
        compile_pattern("PATTERN AND(A a, B b, !(N n)) PUBLISH P", SCHEMAS)


def test_an_and_inside_an_and_is_one_conjunction_for_its_negation():
    """AND(AND(!(N n), A a), B b) splices into AND(!(N n), A a, B b): N at 1 lies between A at
    0 and B at 2, so the tree oracle drops the match as the flat oracle and the engine do
    (it once judged the negation against the inner AND alone, whose gap is empty)."""
    events = [ev("A", 0), ev("N", 1), ev("B", 2)]
    streams = {s: [e for e in events if e.stream == s] for s in "ABN"}
    flat = compile_pattern("PATTERN AND(!(N n), A a, B b) WITHIN 2 PUBLISH P", SCHEMAS)
    nested = compile_pattern(
        "PATTERN AND(AND(!(N n), A a), B b) WITHIN 2 PUBLISH P", SCHEMAS, build=False
    )
    assert flat.pattern is not None and nested.nested is not None
    assert evaluate(flat.pattern, streams) == []
    assert evaluate_nested(nested.nested, streams) == []
    kept = {"A": streams["A"], "B": streams["B"], "N": [ev("N", 3)]}
    assert Counter(evaluate_nested(nested.nested, kept)) == Counter(evaluate(flat.pattern, kept))
    assert evaluate(flat.pattern, kept)  # N after the match: it stands
