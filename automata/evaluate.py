"""Evaluation of terms and predicates over bound events (Section 2.1).

Arithmetic follows docs/language.md: ints are 64-bit, ``int op int`` gives an int
(``/`` truncates toward zero, ``%`` is the C remainder), any float operand
gives a float.  Division by zero, integer overflow and undefined powers raise
:class:`ArithmeticFault`; :func:`holds` turns a faulting atom into *false* and
counts it in the caller's :class:`Faults`.

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

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cesar.automata.schema import INT_MAX, INT_MIN, AttrType, Value
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
    Pred,
    Scope,
    Term,
    Truth,
)


class ArithmeticFault(ArithmeticError):
    """Division by zero, 64-bit overflow or an undefined power."""


@dataclass
class Faults:
    """Counts the atoms that evaluated to false because their arithmetic faulted."""

    arithmetic: int = 0


@dataclass(frozen=True, slots=True)
class Function:
    """A registered function: name, parameter types, result type and a pure implementation.

    A FLOAT parameter also accepts INT arguments.  The implementation may raise
    :class:`ArithmeticFault`.
    """

    name: str
    params: tuple[AttrType, ...]
    result: AttrType
    impl: Callable[..., Value] = field(compare=False)


def _contains(s: str, t: str) -> int:
    return 1 if t in s else 0


def levenshtein(a: str, b: str) -> int:
    """Edit distance with unit costs.

    >>> levenshtein("kitten", "sitting")
    3
    """
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _similarity(s: str, t: str) -> float:
    longest = max(len(s), len(t))
    return 1.0 if longest == 0 else 1.0 - levenshtein(s, t) / longest


class FunctionRegistry:
    """An immutable set of functions callable from CEL, looked up case-insensitively.

    >>> reg = DEFAULT_FUNCTIONS.with_function(
    ...     Function("LEN", (AttrType.STRING,), AttrType.INT, len))
    >>> reg.get("len").result, DEFAULT_FUNCTIONS.get("LEN")
    (<AttrType.INT: 'int'>, None)
    """

    def __init__(self, functions: Iterable[Function] = ()) -> None:
        self._functions = {fn.name.upper(): fn for fn in functions}

    def get(self, name: str) -> Function | None:
        return self._functions.get(name.upper())

    def with_function(self, function: Function) -> FunctionRegistry:
        """A new registry with ``function`` added (replacing one of the same name)."""
        return FunctionRegistry([*self._functions.values(), function])

    def names(self) -> list[str]:
        return sorted(self._functions)


DEFAULT_FUNCTIONS = FunctionRegistry(
    [
        Function("CONTAINS", (AttrType.STRING, AttrType.STRING), AttrType.INT, _contains),
        Function("SIMILARITY", (AttrType.STRING, AttrType.STRING), AttrType.FLOAT, _similarity),
    ]
)


@dataclass(frozen=True, slots=True)
class Env:
    """What a term can read: one attribute mapping per scope, and DUR in ticks.

    ``event_dur`` is the incoming event's own duration, read by
    :class:`~cesar.automata.terms.EventDur` on automaton edges; elsewhere it is unset.
    """

    scopes: Mapping[Scope, Mapping[str, Value]]
    dur: int
    event_dur: int | None = None


def _check_int(value: int) -> int:
    if not INT_MIN <= value <= INT_MAX:
        raise ArithmeticFault(f"integer overflow: {value}")
    return value


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise ArithmeticFault("division by zero")
    quotient = abs(a) // abs(b)
    return _check_int(quotient if (a < 0) == (b < 0) else -quotient)


def _int_pow(a: int, b: int) -> int:
    if b < 0:
        if a == 0:
            raise ArithmeticFault("zero to a negative power")
        if abs(a) == 1:
            return a ** (-b % 2) if a == -1 else 1
        return 0
    if abs(a) > 1 and b > 63:
        raise ArithmeticFault("integer overflow in ^")
    return _check_int(a**b)


def arith(op: str, a: Value, b: Value) -> Value:
    """Apply a binary arithmetic operator with CEL's int/float rules."""
    assert not isinstance(a, str | bool) and not isinstance(b, str | bool)
    if isinstance(a, int) and isinstance(b, int):
        if op == "+":
            return _check_int(a + b)
        if op == "-":
            return _check_int(a - b)
        if op == "*":
            return _check_int(a * b)
        if op == "/":
            return _int_div(a, b)
        if op == "%":
            return _check_int(a - b * _int_div(a, b))
        return _int_pow(a, b)
    x, y = float(a), float(b)
    try:
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        if op == "/":
            if y == 0.0:
                raise ArithmeticFault("division by zero")
            return x / y
        if op == "%":
            if y == 0.0:
                raise ArithmeticFault("division by zero")
            return math.fmod(x, y)
        return math.pow(x, y)
    except (OverflowError, ValueError, ZeroDivisionError) as exc:
        raise ArithmeticFault(str(exc)) from None


def neg(value: Value) -> Value:
    """Unary minus; raises :class:`ArithmeticFault` on integer overflow."""
    assert not isinstance(value, str | bool)
    return _check_int(-value) if isinstance(value, int) else -value


def eval_term(term: Term, env: Env, functions: FunctionRegistry = DEFAULT_FUNCTIONS) -> Value:
    """The value of ``term`` in ``env``; raises :class:`ArithmeticFault`."""
    if isinstance(term, Const):
        return term.value
    if isinstance(term, Attr):
        return env.scopes[term.scope][term.name]
    if isinstance(term, Dur):
        return env.dur
    if isinstance(term, EventDur):
        assert env.event_dur is not None, "DUR($2) is read only on automaton edges"
        return env.event_dur
    if isinstance(term, Arith):
        return arith(
            term.op, eval_term(term.left, env, functions), eval_term(term.right, env, functions)
        )
    if isinstance(term, Neg):
        return neg(eval_term(term.operand, env, functions))
    if isinstance(term, Call):
        function = functions.get(term.name)
        assert function is not None, f"unknown function {term.name}"
        return function.impl(*(eval_term(arg, env, functions) for arg in term.args))
    assert not isinstance(term, DurLit), "duration literals are compiled into ticks first"
    raise TypeError(f"not a term: {term!r}")


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
