"""Static typing of terms and predicates against stream schemas (docs/language.md).

Types are static: a string compared with a number, arithmetic on strings or a
bool ordered with ``<`` is a compile error naming both sides.

>>> from cesar.automata.terms import Attr, Scope, Const
>>> types = {"Name": AttrType.STRING}
>>> check_pred(Cmp("=", Attr(Scope.EVENT, "Name"), Const(5, AttrType.INT)),
...            lambda a: types[a.name])
Traceback (most recent call last):
cesar.automata.errors.CelSemanticError: line 1, column 1: cannot compare string Name with int 5
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import assert_never

from cesar.automata.errors import CelSemanticError
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.schema import AttrType
from cesar.automata.terms import (
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
    Term,
    Truth,
    to_cel,
)

Resolver = Callable[[Attr], AttrType]
"""Gives the type of an attribute reference or raises :class:`CelSemanticError`."""


def _described(term: Term, typ: AttrType) -> str:
    return f"{typ.value} {to_cel(term)}"


def infer_type(
    term: Term, resolve: Resolver, functions: FunctionRegistry = DEFAULT_FUNCTIONS
) -> AttrType:
    """The static type of ``term``; raises :class:`CelSemanticError` on a type error."""
    match term:
        case Const() | Param():
            return term.type
        case Attr():
            return resolve(term)
        case Dur() | EventDur() | DurLit():
            return AttrType.INT
        case Neg():
            typ = infer_type(term.operand, resolve, functions)
            if not typ.numeric:
                raise CelSemanticError(
                    f"unary minus needs a number, not {_described(term.operand, typ)}", term.pos
                )
            return typ
        case Arith():
            left = infer_type(term.left, resolve, functions)
            right = infer_type(term.right, resolve, functions)
            for side, typ in ((term.left, left), (term.right, right)):
                if not typ.numeric:
                    raise CelSemanticError(
                        f"operator {term.op} needs numbers, not {_described(side, typ)}",
                        side.pos or term.pos,
                    )
            return AttrType.INT if left is right is AttrType.INT else AttrType.FLOAT
        case Call():
            return _call_type(term, resolve, functions)
        case _:
            assert_never(term)


def _call_type(term: Call, resolve: Resolver, functions: FunctionRegistry) -> AttrType:
    """The result type of a call of a registered function, its arguments checked."""
    function = functions.get(term.name)
    if function is None:
        raise CelSemanticError(
            f"unknown function {term.name} (known: {', '.join(functions.names())})", term.pos
        )
    fewest, most = function.arity()
    if not fewest <= len(term.args) <= most:
        wanted = (
            f"{fewest}"
            if fewest == most
            else f"{fewest} or more"
            if most == math.inf
            else f"{fewest} to {most}"
        )
        raise CelSemanticError(
            f"{function.name} takes {wanted} arguments, {len(term.args)} given "
            f"({function.signature()})",
            term.pos,
        )
    types = []
    for index, arg in enumerate(term.args):
        typ = infer_type(arg, resolve, functions)
        param = function.param(index)
        if not assignable(typ, param):
            wanted = "a number" if param is AttrType.FLOAT else param.value
            raise CelSemanticError(
                f"argument {index + 1} of {function.name} must be {wanted}, "
                f"not {_described(arg, typ)} ({function.signature()})",
                arg.pos or term.pos,
            )
        types.append(typ)
    return function.result_of(types)


def assignable(source: AttrType, target: AttrType) -> bool:
    """True if a value of type ``source`` may be stored where ``target`` is expected."""
    return source is target or (source is AttrType.INT and target is AttrType.FLOAT)


def comparable(op: str, left: AttrType, right: AttrType) -> bool:
    """True if ``left op right`` is well typed."""
    if left.numeric and right.numeric:
        return True
    if left is not right:
        return False
    return left is AttrType.STRING or op in ("=", "!=")


def check_pred(
    pred: Pred, resolve: Resolver, functions: FunctionRegistry = DEFAULT_FUNCTIONS
) -> None:
    """Type-check every atom of ``pred``; raises :class:`CelSemanticError`."""
    if isinstance(pred, Cmp):
        left = infer_type(pred.left, resolve, functions)
        right = infer_type(pred.right, resolve, functions)
        if not comparable(pred.op, left, right):
            verb = "order" if left is right else "compare"
            raise CelSemanticError(
                f"cannot {verb} {_described(pred.left, left)} "
                f"{'with' if verb == 'compare' else 'and'} {_described(pred.right, right)}"
                + (f" with {pred.op}" if verb == "order" else ""),
                pred.pos or pred.left.pos,
            )
    elif isinstance(pred, (And, Or)):
        for item in pred.items:
            check_pred(item, resolve, functions)
    elif isinstance(pred, Not):
        check_pred(pred.item, resolve, functions)
    else:
        assert isinstance(pred, Truth)
