"""The plan constants measured on the host (server/host/calibrate.py) and how the planner weighs
them (automata/pattern/plans.py ``choose``, server/engine/planned.py ``PlanCosts.weight``)."""

from dataclasses import replace

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.pattern.plans import EAGER, PlanKind, choose
from cesar.automata.schema import parse_stream_spec
from cesar.server.engine.planned import PlanCosts
from cesar.server.host.calibrate import BOUNDS, calibrate, given

SCHEMAS = {n: parse_stream_spec(f"{n}(k:string,x:int)") for n in "ABC"}
SEQ3 = (
    "PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) { b.x > a.x } WITHIN 9 PUBLISH P"
)


def test_calibration_measures_the_lazy_constants_and_keeps_the_thresholds():
    """Measured, not the defaults: three ratios of timings all exactly 1.0 would be a fluke.
    On a loaded machine a measurement may have no signal (the DAG's slope at or below 0), and
    calibrate keeps the defaults then, as it should: a few attempts, each the best of three
    runs, must give one that measured."""
    base = PlanCosts(heavy=10.0, sweep=8, check=4)
    for _ in range(4):
        measured = calibrate(base, events=300, repeat=3)
        assert (measured.heavy, measured.sweep, measured.check) == (10.0, 8, 4)
        for value in (measured.look, measured.chain, measured.recompute):
            assert BOUNDS[0] <= value <= BOUNDS[1]
        if (measured.look, measured.chain, measured.recompute) != (1.0, 1.0, 1.0):
            break
    assert (measured.look, measured.chain, measured.recompute) != (1.0, 1.0, 1.0)


def test_weights_price_a_lazy_plans_steps_in_steps_of_the_dag():
    pattern = compile_query(SEQ3, SCHEMAS).pattern
    rates = {"a": 0.3, "b": 0.3, "c": 0.3}
    assert choose(pattern, rates, look=0.5)[0] == EAGER  # a lazy step as dear as the DAG's
    costs = replace(PlanCosts(), chain=0.2, recompute=0.2)
    assert costs.weight(PlanKind.EAGER) == 1.0 and costs.weight(PlanKind.TREE) == 0.2
    weights = {kind: costs.weight(kind) for kind in PlanKind}
    best, value = choose(pattern, rates, look=0.5, weights=weights)
    assert best != EAGER  # five lazy steps cost one of the DAG's: a lazy plan wins
    eager = choose(pattern, rates, look=0.5)[1]
    assert value < eager


def test_given_constants_replace_the_measured_ones_and_keep_the_thresholds():
    base = PlanCosts(heavy=10.0, sweep=8)
    pinned = given(" recompute=0.25 , look=8,chain=0.125", base)
    assert pinned == replace(base, look=8.0, chain=0.125, recompute=0.25)
    assert given("measure", base) is None


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("look=1,chain=1", "recompute missing"),
        ("look=1,chain=1,recompute=1,look=2", "look is given twice"),
        ("look=1,chain=1,recompute=9", "recompute=9: each constant is a number within"),
        ("look=1,chain=0.1,recompute=1", "chain=0.1: each constant"),
        ("look=nan,chain=1,recompute=1", "look=nan: each constant"),
        ("look=1,chain=1,recompute=", "recompute=: each constant"),
        ("look=1,chain=1,heavy=3", "'heavy=3': expected look=X"),
        ("", "'': expected look=X"),
        ("1,1,1", "'1': expected look=X"),
    ],
)
def test_given_constants_are_refused_saying_which_and_why(text: str, says: str) -> None:
    with pytest.raises(ValueError) as caught:
        given(text)
    assert says in str(caught.value)
