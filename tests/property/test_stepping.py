"""Shared μ steps (server/engine/stepping.py) against the reference evaluator and the engine
without them.

Queries are FOLDs whose step compares the event only with constants and bounds DUR (the
shape of Table 2's NonDeterministic), one or two deep, some with a running aggregate that can
fault (NonDeterministicAgg's shape: runs replay the steps they owe), drawn as families with
constants from small sets: equal step constants put runs of several subscriptions in one group,
and unequal DUR bounds make nodes whose runs must step eagerly.  Streams have durations and
simultaneous events, so two steps of one epoch, a step with a duration and a FORWARD in a
stepping epoch all occur.  The stateful machine subscribes such folds and their variants among
the engine machine's rules, so snapshots and restarts (which settle every lazy run) and
subscriptions that change a node's DUR bound happen while runs owe steps.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from cesar.automata import algebra as alg
from cesar.automata.algebra import AlgebraError, Expr
from cesar.automata.reference import evaluate
from cesar.automata.schema import AttrType, Event
from cesar.automata.terms import TRUE, And, Arith, Attr, Cmp, Const, Dur, Pred, Scope
from cesar.server.engine.engine import Engine, EngineOptions
from tests.algebra_strategies import KEYS, SOURCES, input_streams
from tests.property.test_engine import SETTINGS, subscribe
from tests.property.test_templates import TemplateMachine

INT, STRING = AttrType.INT, AttrType.STRING
S, T = SOURCES[0], SOURCES[1]


def _step(draw: st.DrawFn, name: str) -> Pred:
    """``DUR <= c AND $2.name = key`` (and sometimes ``$2.v >= n``): constants only."""
    atoms = [
        Cmp("<=", Dur(), Const(draw(st.sampled_from([2, 3, 5, 30])), INT)),
        Cmp("=", Attr(Scope.RIGHT, name), Const(draw(st.sampled_from(KEYS)), STRING)),
    ]
    if draw(st.booleans()):
        atoms.append(Cmp(">=", Attr(Scope.RIGHT, "v"), Const(draw(st.integers(0, 3)), INT)))
    return And(tuple(atoms))


def _chosen(draw: st.DrawFn, name: str) -> Pred:
    """What a run's output must satisfy to go on (Table 2's θ2): the event only."""
    if draw(st.booleans()):
        return TRUE
    return Cmp(draw(st.sampled_from(["<", ">=", "="])), Attr(Scope.EVENT, name), Const(2, INT))


@st.composite
def stepping_folds(draw: st.DrawFn) -> Expr:
    """σ(μ(σ(S), S; step)), sometimes with a second μ over its output (NonDeterministic's
    shape, on the strategies' streams)."""
    first: Expr = alg.Select(
        draw(st.sampled_from([S, T])),
        Cmp("=", Attr(Scope.EVENT, "k"), Const(draw(st.sampled_from(KEYS)), STRING)),
    )
    aggregates: tuple[alg.Assign, ...] = ()
    if draw(st.booleans()):  # a running aggregate: runs replay the steps they owe
        first = alg.Introduce(first, (alg.Assign("n", Attr(Scope.EVENT, "v"), INT),))
        total = Attr(Scope.STATE, "n")
        step_value = Attr(Scope.RIGHT, "v")
        term = draw(
            st.sampled_from(
                [
                    Arith("+", total, step_value),
                    Arith("-", Arith("*", total, Const(2, INT)), step_value),
                    Arith("/", total, step_value),  # faults when the step's v is 0
                ]
            )
        )
        aggregates = (alg.Assign("n", term, INT),)
    right = draw(st.sampled_from([S, T]))
    fold: Expr = alg.Fold(first, right, _step(draw, "k"), TRUE, aggregates)
    fold = alg.Select(fold, _chosen(draw, "v"))
    if draw(st.booleans()):
        left = alg.Introduce(
            fold,
            (
                alg.Assign("a", Attr(Scope.EVENT, "k"), STRING),
                alg.Assign("b", Attr(Scope.EVENT, "v"), INT),
            ),
        )
        right = alg.Rename(draw(st.sampled_from([S, T])), (("k", "a"), ("v", "b")))
        step = And(
            (
                Cmp("<=", Dur(), Const(draw(st.sampled_from([3, 5, 30])), INT)),
                Cmp("=", Attr(Scope.RIGHT, "a"), Const(draw(st.sampled_from(KEYS)), STRING)),
            )
        )
        second = alg.Select(alg.Fold(left, right, step, TRUE, ()), _chosen(draw, "b"))
        try:
            second.attributes  # noqa: B018 - schema inference validates the operands
        except AlgebraError:
            return fold
        return second
    return fold


@st.composite
def families(draw: st.DrawFn) -> list[Expr]:
    """One to six stepping folds, often repeating one (runs of several slots in one group)."""
    pool = [draw(stepping_folds()) for _ in range(draw(st.integers(1, 3)))]
    return [draw(st.sampled_from(pool)) for _ in range(draw(st.integers(1, 6)))]


@settings(max_examples=200, **SETTINGS)
@given(exprs=families(), streams=input_streams())
def test_shared_steps_give_the_reference_output(exprs, streams):
    shared = Engine()
    alone = Engine(EngineOptions(steps=False))
    for number, expr in enumerate(exprs):
        subscribe(shared, f"q{number}", expr)
        subscribe(alone, f"q{number}", expr)
    events = sorted((e for stream in streams.values() for e in stream), key=lambda e: e.t1)
    epochs: dict[int, list[Event]] = {}
    for event in events:
        epochs.setdefault(event.t1, []).append(event)
    got: Counter[Event] = Counter()
    baseline: Counter[Event] = Counter()
    for t1 in sorted(epochs):
        got.update(shared.process(epochs[t1]))
        baseline.update(alone.process(epochs[t1]))
        shared.check_valid()
    expected: Counter[Event] = Counter()
    for number, expr in enumerate(exprs):
        expected.update(evaluate(expr, streams, name=f"q{number}"))
    assert got == expected
    assert baseline == expected
    assert alone.counters.steps_shared == 0


class SteppingMachine(TemplateMachine):
    """The template machine, also subscribing stepping folds; its variants of them change
    the constants, DUR bounds among them, of nodes whose runs owe steps."""

    @rule(expr=stepping_folds())
    def subscribe_stepping(self, expr):
        self.subscribe(expr)


TestSteppingMachine = SteppingMachine.TestCase
TestSteppingMachine.settings = settings(max_examples=80, stateful_step_count=30, **SETTINGS)
