"""Evaluation of terms and predicates over bound events (Section 2.1).

Arithmetic follows docs/language.md (:mod:`cesar.automata.arithmetic`), functions
their registry (:mod:`cesar.automata.functions`).  Division by zero, integer
overflow, undefined powers and functions outside their domain raise
:class:`~cesar.automata.arithmetic.ArithmeticFault`; :func:`holds` turns a
faulting atom into *false* and counts it in the caller's :class:`Faults`.

>>> env = Env({Scope.EVENT: {"Price": 7, "Name": "IBM"}}, dur=1)
>>> eval_term(Arith("/", Attr(Scope.EVENT, "Price"), Const(-2, AttrType.INT)), env)
-3
>>> holds(Cmp(">", Arith("/", Const(1, AttrType.INT), Const(0, AttrType.INT)),
...           Const(0, AttrType.INT)), env, faults := Faults())
False
>>> faults.arithmetic
1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import assert_never

from cesar.automata.arithmetic import ArithmeticFault, arith, neg
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.schema import AttrType, Value
from cesar.automata.terms import (
    NEGATED,
    And,
    Arith,
    Attr,
    Call,
    Cmp,
    Const,
    Dur,
    DurLit,
    EventDur,
    Neg,
    Not,
    Or,
    Param,
    Pred,
    Scope,
    Term,
    Truth,
)


@dataclass
class Faults:
    """Counts the atoms that evaluated to false because their arithmetic faulted."""

    arithmetic: int = 0


@dataclass(frozen=True, slots=True)
class Env:
    """What a term can read: one attribute mapping per scope, and DUR in ticks.

    ``event_dur`` is the incoming event's own duration, read by
    :class:`~cesar.automata.terms.EventDur` on automaton edges; elsewhere it is unset.
    """

    scopes: Mapping[Scope, Mapping[str, Value]]
    dur: int
    event_dur: int | None = None


def eval_term(term: Term, env: Env, functions: FunctionRegistry = DEFAULT_FUNCTIONS) -> Value:
    """The value of ``term`` in ``env``; raises :class:`ArithmeticFault`."""
    match term:
        case Const():
            return term.value
        case Attr():
            return env.scopes[term.scope][term.name]
        case Dur():
            return env.dur
        case EventDur():
            assert env.event_dur is not None, "DUR($2) is read only on automaton edges"
            return env.event_dur
        case Arith():
            left = eval_term(term.left, env, functions)
            return arith(term.op, left, eval_term(term.right, env, functions))
        case Neg():
            return neg(eval_term(term.operand, env, functions))
        case Call():
            function = functions.get(term.name)
            assert function is not None, f"unknown function {term.name}"
            return function.impl(*(eval_term(arg, env, functions) for arg in term.args))
        case DurLit() | Param():
            raise TypeError(f"{term!r} is compiled away before evaluation")
        case _:
            assert_never(term)


def store(value: Value, typ: AttrType) -> Value:
    """The value an attribute of type ``typ`` holds: an int stored as FLOAT becomes a float."""
    return float(value) if typ is AttrType.FLOAT and not isinstance(value, float) else value


def compare(op: str, a: Value, b: Value) -> bool:
    """Apply a comparison operator."""
    if op == "=":
        return a == b
    if op == "!=":
        return a != b
    assert not isinstance(a, bool) and not isinstance(b, bool)
    if op == "<":
        return a < b  # type: ignore[operator]
    if op == "<=":
        return a <= b  # type: ignore[operator]
    if op == ">":
        return a > b  # type: ignore[operator]
    return a >= b  # type: ignore[operator]


def holds(
    pred: Pred, env: Env, faults: Faults, functions: FunctionRegistry = DEFAULT_FUNCTIONS
) -> bool:
    """Truth of ``pred`` in ``env``; an atom whose arithmetic faults is false and counted.

    Negation applies to atoms first (``NOT a < b`` is ``a >= b``), so a faulting
    atom is false under NOT as well: an event never matches through a fault.
    """
    if isinstance(pred, Cmp):
        try:
            return compare(
                pred.op, eval_term(pred.left, env, functions), eval_term(pred.right, env, functions)
            )
        except ArithmeticFault:
            faults.arithmetic += 1
            return False
    if isinstance(pred, And):
        return all(holds(item, env, faults, functions) for item in pred.items)
    if isinstance(pred, Or):
        return any(holds(item, env, faults, functions) for item in pred.items)
    if isinstance(pred, Truth):
        return pred.value
    assert isinstance(pred, Not)
    return holds(negate(pred.item), env, faults, functions)


def negate(pred: Pred) -> Pred:
    """The negation of ``pred`` with NOT pushed down to the atoms (De Morgan).

    >>> from cesar.automata.terms import to_cel
    >>> to_cel(negate(Or((Cmp("<", Dur(), Const(3, AttrType.INT)), Truth(False)))))
    'DUR >= 3 AND TRUE'
    """
    if isinstance(pred, Cmp):
        return Cmp(NEGATED[pred.op], pred.left, pred.right, pred.pos)
    if isinstance(pred, And):
        return Or(tuple(negate(item) for item in pred.items), pred.pos)
    if isinstance(pred, Or):
        return And(tuple(negate(item) for item in pred.items), pred.pos)
    if isinstance(pred, Truth):
        return Truth(not pred.value, pred.pos)
    return pred.item
