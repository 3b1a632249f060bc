"""Template sharing against the engine without sharing and the reference evaluator.

Subscriptions are drawn as *families*: a few random template expressions,
each member a copy with fresh constants in its predicates (drawn from small
sets, so equal constants, overlapping ranges and NEXT / FOLD steps with
per-member constants on later steps all occur).  Members of one template share
the merged DAG's nodes and instances (server/engine/params.py); each must still
get exactly its own reference output, as in the engine without merging.

* Differential: a family in one engine with sharing, one without, and the
  reference, per subscription.
* Stateful: subscribe members, unsubscribe any, publish epochs in any order
  (the engine machine of test_engine.py with one more rule: a variant of an
  expression already subscribed); every ``check_valid()`` after every step.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from cesar.automata import algebra as alg
from cesar.automata.reference import evaluate
from cesar.automata.schema import AttrType
from cesar.automata.terms import Const, Leaf, Term, map_pred
from cesar.server.engine.engine import Engine, EngineOptions
from tests.algebra_strategies import KEYS, expressions, input_streams
from tests.property.test_engine import SETTINGS, EngineMachine, subscribe

NEW_CONSTANTS = {
    AttrType.INT: [-1, 0, 1, 2, 3, 4, 6],
    AttrType.FLOAT: [0.5, 1.0, 1.5, 2.5],
    AttrType.STRING: list(KEYS),
}


def vary(draw: st.DrawFn, expr: alg.Expr) -> alg.Expr:
    """``expr`` with every constant of its predicates drawn again (same type)."""

    def fresh(leaf: Leaf) -> Term:
        if isinstance(leaf, Const) and leaf.type in NEW_CONSTANTS:
            return Const(draw(st.sampled_from(NEW_CONSTANTS[leaf.type])), leaf.type)
        return leaf

    if isinstance(expr, alg.Source):
        return expr
    if isinstance(expr, alg.Select):
        return alg.Select(vary(draw, expr.input), map_pred(expr.pred, fresh))
    if isinstance(expr, alg.Project):
        return alg.Project(vary(draw, expr.input), expr.keep)
    if isinstance(expr, alg.Rename):
        return alg.Rename(vary(draw, expr.input), expr.mapping)
    if isinstance(expr, alg.Introduce):
        return alg.Introduce(vary(draw, expr.input), expr.assignments)
    if isinstance(expr, alg.Union):
        return alg.Union(vary(draw, expr.left), vary(draw, expr.right))
    if isinstance(expr, alg.Seq):
        return alg.Seq(vary(draw, expr.left), vary(draw, expr.right), map_pred(expr.pred, fresh))
    assert isinstance(expr, alg.Fold)
    return alg.Fold(
        vary(draw, expr.left),
        vary(draw, expr.right),
        map_pred(expr.step, fresh),
        map_pred(expr.keep, fresh),
        expr.aggregates,
    )


@st.composite
def families(draw: st.DrawFn) -> list[alg.Expr]:
    """Two to eight subscriptions drawn from one or two templates, each with its own constants."""
    templates = [draw(expressions(3)) for _ in range(draw(st.integers(1, 2)))]
    return [vary(draw, draw(st.sampled_from(templates))) for _ in range(draw(st.integers(2, 8)))]


@pytest.mark.parametrize("tuned", [0, 8])
@settings(max_examples=300, **SETTINGS)
@given(exprs=families(), streams=input_streams())
def test_each_member_of_a_family_gets_its_own_output(tuned, exprs, streams):
    """With value masks from the first slot and every inner edge found through FR (tuned 0),
    and with the defaults (small groups compared directly, few leaving edges found by key)."""
    shared = Engine(EngineOptions(small_group=tuned, few_leaving=tuned))
    alone = Engine(EngineOptions(merge=False))
    for number, expr in enumerate(exprs):
        subscribe(shared, f"q{number}", expr)
        subscribe(alone, f"q{number}", expr)
    events = [e for stream in streams.values() for e in stream]
    got, baseline = Counter(shared.run(events)), Counter(alone.run(events))
    shared.check_valid()
    expected = Counter()
    for number, expr in enumerate(exprs):
        expected.update(evaluate(expr, streams, name=f"q{number}"))
    assert got == expected
    assert baseline == expected


class TemplateMachine(EngineMachine):
    """The engine machine, also subscribing variants of what it subscribed before.

    Groups switch to value masks after two slots and nodes with two leaving
    edges use the inner FR index, so both ways of each are driven.
    """

    options = EngineOptions(small_group=2, few_leaving=1)

    @rule(data=st.data())
    def subscribe_variant(self, data):
        if self.history:
            self.subscribe(vary(data.draw, data.draw(st.sampled_from(self.history))))


TestTemplateMachine = TemplateMachine.TestCase
TestTemplateMachine.settings = settings(max_examples=150, stateful_step_count=25, **SETTINGS)
