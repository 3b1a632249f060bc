"""CEL's arithmetic on values: 64-bit integers, floats, and the faults where a result is undefined.

``int op int`` gives an int (``/`` truncates toward zero, ``%`` is the C remainder, ``^``
with a negative exponent truncates too), any float operand gives a float (docs/language.md).
Division by zero, integer overflow and undefined powers raise :class:`ArithmeticFault`,
which makes the atom reading them false (:func:`~cesar.automata.evaluate.holds`).

>>> arith("/", -7, 2), arith("^", 2, -1), arith("*", 1.5, 2)
(-3, 0, 3.0)
"""

from __future__ import annotations

import math

from cesar.automata.faults import ArithmeticFault
from cesar.automata.schema import INT_MAX, INT_MIN, Value

__all__ = ["ArithmeticFault", "arith", "check_int", "neg"]


def check_int(value: int) -> int:
    """``value`` if a 64-bit integer holds it; else :class:`ArithmeticFault`."""
    if not INT_MIN <= value <= INT_MAX:
        raise ArithmeticFault(f"integer overflow: {value}")
    return value


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise ArithmeticFault("division by zero")
    quotient = abs(a) // abs(b)
    return check_int(quotient if (a < 0) == (b < 0) else -quotient)


def _int_pow(a: int, b: int) -> int:
    if b < 0:
        if a == 0:
            raise ArithmeticFault("zero to a negative power")
        if abs(a) == 1:
            return a ** (-b % 2) if a == -1 else 1
        return 0
    if abs(a) > 1 and b > 63:
        raise ArithmeticFault("integer overflow in ^")
    return check_int(a**b)


def arith(op: str, a: Value, b: Value) -> Value:
    """Apply a binary arithmetic operator with CEL's int/float rules."""
    assert not isinstance(a, (str, bool)) and not isinstance(b, (str, bool))
    if isinstance(a, int) and isinstance(b, int):
        if op == "+":
            return check_int(a + b)
        if op == "-":
            return check_int(a - b)
        if op == "*":
            return check_int(a * b)
        if op == "/":
            return _int_div(a, b)
        if op == "%":
            return check_int(a - b * _int_div(a, b))
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
    assert not isinstance(value, (str, bool))
    return check_int(-value) if isinstance(value, int) else -value
