"""Generated predicates (server/engine/codegen.py) against the term evaluator, at the edges of
arithmetic: the inline paths for two floats and two ints (checked for 64-bit overflow), and
the mixed ones through ``arith``."""

from __future__ import annotations

import itertools

import pytest

from cesar.automata.algebra import Assign
from cesar.automata.arithmetic import ArithmeticFault
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


@pytest.mark.parametrize("count", [0, 1, 3])
def test_a_maps_values_are_its_builds_items_in_order_with_its_faults(count: int) -> None:
    """``Codegen.values`` makes what ``tuple(build(...).items())`` makes (names sorted, a
    FLOAT stored as a float), from ``()`` to several names, and faults as ``build`` does."""
    names = ["z", "Price", "a"][:count]
    assigns = [
        Assign(name, Arith("+", Attr(Scope.LEFT, "a"), Attr(Scope.EVENT, "b")), kind)
        for name, kind in zip(names, [AttrType.INT, AttrType.FLOAT, AttrType.INT], strict=False)
    ]
    codegen = Codegen()
    build, values = codegen.build(assigns), codegen.values(assigns)
    for a, b in itertools.product(VALUES, VALUES):
        try:
            expected = tuple(build({"a": a}, {"b": b}, 1, 1).items())
        except ArithmeticFault:
            with pytest.raises(ArithmeticFault):
                values({"a": a}, {"b": b}, 1, 1)
            continue
        made = values({"a": a}, {"b": b}, 1, 1)
        assert made == expected and [type(v) for _, v in made] == [type(v) for _, v in expected], (
            a,
            b,
        )
        assert [name for name, _ in made] == sorted(names)
    assert codegen.values(list(assigns)) is values  # one function per map
