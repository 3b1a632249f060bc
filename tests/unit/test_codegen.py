"""Generated predicates (server/engine/codegen.py) against the term evaluator, at the edges of
arithmetic: the inline paths for two floats and two ints (checked for 64-bit overflow), and
the mixed ones through ``arith``."""

from __future__ import annotations

import itertools

import pytest

from cesar.automata.evaluate import Env, Faults, holds
from cesar.automata.schema import INT_MAX, INT_MIN, AttrType
from cesar.automata.terms import Arith, Attr, Cmp, Const, Scope
from cesar.server.engine.codegen import Codegen

VALUES = [0, 1, -1, 3, INT_MAX, INT_MIN, INT_MAX // 2 + 1, 2.5, -0.5, 1e308]


@pytest.mark.parametrize("op", ["+", "-", "*"])
def test_arithmetic_in_generated_code_is_the_evaluators_with_its_faults(op: str) -> None:
    term = Arith(op, Attr(Scope.LEFT, "a"), Attr(Scope.EVENT, "b"))
    atom = Cmp(">=", term, Const(0, AttrType.INT))
    faults, expected = Faults(), Faults()
    test = Codegen(faults).conjunct((atom,))
    for a, b in itertools.product(VALUES, VALUES):
        env = Env({Scope.LEFT: {"a": a}, Scope.EVENT: {"b": b}}, 1)
        assert test({"a": a}, {"b": b}, 1, 1) == holds(atom, env, expected), (a, op, b)
        assert faults.arithmetic == expected.arithmetic, (a, op, b)
    assert expected.arithmetic > 0  # some pairs overflow: the fault path is exercised
