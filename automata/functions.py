"""The functions a query may call, typed, in both languages (docs/language.md, "Functions").

A :class:`Function` is data: its name, its parameters' types, its result type and a pure
implementation; a :class:`FunctionRegistry` looks them up by name, case-insensitively.  The
type checker (:mod:`cesar.automata.typecheck`) reads the signature, the evaluator and the
engine's generated code call the implementation, the canonical form folds a call whose
arguments are all constants.  A result outside a function's domain (the square root of a
negative number, the logarithm of zero, an overflow) raises
:class:`~cesar.automata.arithmetic.ArithmeticFault`, which makes the atom false, as
division by zero does.

* Numbers: ``ABS``, ``ROUND(x[, digits])``, ``FLOOR``, ``CEIL``, ``SQRT``, ``LN``, ``LOG``
  (base 10), ``EXP``, ``POW``, ``LEAST`` and ``GREATEST`` (two or more arguments);
  ``ABS``, ``ROUND``, ``FLOOR``, ``CEIL``, ``POW``, ``LEAST`` and ``GREATEST`` of integers
  are integers, of any float a float.
* Strings: ``LOWER``, ``UPPER``, ``LENGTH``; ``CONTAINS``, ``STARTS_WITH`` and
  ``ENDS_WITH`` are 1 or 0; ``SIMILARITY`` is ``1 − Levenshtein(s, t) / max(len)``.

>>> DEFAULT_FUNCTIONS.get("round").impl(2.5), DEFAULT_FUNCTIONS.get("ROUND").impl(-2.5)
(3.0, -3.0)
>>> DEFAULT_FUNCTIONS.get("greatest").impl(1, 7, 3), DEFAULT_FUNCTIONS.get("least").impl(2, 0.5)
(7, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from cesar.automata.arithmetic import ArithmeticFault, arith, check_int
from cesar.automata.schema import AttrType, Value


@dataclass(frozen=True, slots=True)
class Function:
    """A registered function: name, parameter types, result type and a pure implementation.

    A FLOAT parameter also accepts INT arguments.  The last ``optional`` parameters may be
    left out; a ``variadic`` function repeats its last parameter (one or more times).  A
    ``keeps_int`` function's result is INT when every argument is.  The implementation may
    raise :class:`ArithmeticFault`.
    """

    name: str
    params: tuple[AttrType, ...]
    result: AttrType
    impl: Callable[..., Value] = field(compare=False)
    optional: int = 0
    variadic: bool = False
    keeps_int: bool = False

    def arity(self) -> tuple[int, float]:
        """The fewest and the most arguments it takes."""
        return len(self.params) - self.optional, math.inf if self.variadic else len(self.params)

    def param(self, index: int) -> AttrType:
        """The type of argument ``index`` (from 0)."""
        return self.params[min(index, len(self.params) - 1)]

    def result_of(self, args: Sequence[AttrType]) -> AttrType:
        """Its result type for arguments of types ``args``."""
        if self.keeps_int and all(a is AttrType.INT for a in args):
            return AttrType.INT
        return self.result

    def signature(self) -> str:
        """``NAME(type, …) -> type`` as the errors spell it (a number is an int or a float;
        a ``keeps_int`` result is an int for int arguments).

        >>> DEFAULT_FUNCTIONS.get("ROUND").signature()
        'ROUND(number[, int]) -> number'
        """
        names = ["number" if p is AttrType.FLOAT else p.value for p in self.params]
        required = len(self.params) - self.optional
        spelled = ", ".join(names[:required])
        if self.optional:
            spelled += f"[, {', '.join(names[required:])}]"
        if self.variadic:
            spelled += ", …"
        result = "number" if self.keeps_int else self.result.value
        return f"{self.name}({spelled}) -> {result}"


class FunctionRegistry:
    """An immutable set of functions callable from CEL, looked up case-insensitively.

    >>> reg = DEFAULT_FUNCTIONS.with_function(
    ...     Function("TWICE", (AttrType.FLOAT,), AttrType.FLOAT, lambda x: 2 * x))
    >>> reg.get("twice").result, DEFAULT_FUNCTIONS.get("TWICE")
    (<AttrType.FLOAT: 'float'>, None)
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


# ------------------------------------------------------------------ strings


def _contains(s: str, t: str) -> int:
    return 1 if t in s else 0


def _starts_with(s: str, t: str) -> int:
    return 1 if s.startswith(t) else 0


def _ends_with(s: str, t: str) -> int:
    return 1 if s.endswith(t) else 0


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


# ------------------------------------------------------------------ numbers


def _abs(x: Value) -> Value:
    assert not isinstance(x, (str, bool))
    return check_int(abs(x)) if isinstance(x, int) else abs(x)


def _half_away(x: float) -> float:
    """``x`` rounded to the nearest integer, halves away from zero (as SQL rounds)."""
    return math.copysign(math.floor(abs(x) + 0.5), x)


def _round(x: Value, digits: Value = 0) -> Value:
    assert not isinstance(x, (str, bool)) and isinstance(digits, int)
    if isinstance(x, int):
        if digits >= 0:
            return x
        scale = 10 ** min(-digits, 19)
        return check_int(int(_half_away(x / scale)) * scale)
    if not math.isfinite(x):
        return x
    scale = 10.0 ** max(min(digits, 308), -308)
    return _half_away(x * scale) / scale if math.isfinite(x * scale) else x


def _whole(to_int: Callable[[float], int]) -> Callable[[Value], Value]:
    """FLOOR or CEIL: an int as it is, a finite float to a whole float."""

    def whole(x: Value) -> Value:
        assert not isinstance(x, (str, bool))
        return x if isinstance(x, int) or not math.isfinite(x) else float(to_int(x))

    return whole


def _sqrt(x: Value) -> float:
    assert not isinstance(x, (str, bool))
    if x < 0:
        raise ArithmeticFault("the square root of a negative number")
    return math.sqrt(x)


def _logarithm(log: Callable[[float], float]) -> Callable[[Value], float]:
    """LN or LOG: faults at or below 0."""

    def logarithm(x: Value) -> float:
        assert not isinstance(x, (str, bool))
        if x <= 0:
            raise ArithmeticFault("the logarithm of a number not above 0")
        return log(x)

    return logarithm


def _exp(x: Value) -> float:
    assert not isinstance(x, (str, bool))
    try:
        return math.exp(x)
    except OverflowError:
        raise ArithmeticFault("exp overflows") from None


def _pow(x: Value, y: Value) -> Value:
    return arith("^", x, y)


def _extreme(pick: Callable[..., Value]) -> Callable[..., Value]:
    def extreme(*args: Value) -> Value:
        best = pick(args)
        return float(best) if any(isinstance(a, float) for a in args) else best

    return extreme


_NUMBER = AttrType.FLOAT
"""A numeric parameter: a FLOAT parameter accepts INT arguments."""

DEFAULT_FUNCTIONS = FunctionRegistry(
    [
        Function("CONTAINS", (AttrType.STRING, AttrType.STRING), AttrType.INT, _contains),
        Function("STARTS_WITH", (AttrType.STRING, AttrType.STRING), AttrType.INT, _starts_with),
        Function("ENDS_WITH", (AttrType.STRING, AttrType.STRING), AttrType.INT, _ends_with),
        Function("SIMILARITY", (AttrType.STRING, AttrType.STRING), AttrType.FLOAT, _similarity),
        Function("LOWER", (AttrType.STRING,), AttrType.STRING, str.lower),
        Function("UPPER", (AttrType.STRING,), AttrType.STRING, str.upper),
        Function("LENGTH", (AttrType.STRING,), AttrType.INT, len),
        Function("ABS", (_NUMBER,), AttrType.FLOAT, _abs, keeps_int=True),
        Function("ROUND", (_NUMBER, AttrType.INT), AttrType.FLOAT, _round, 1, keeps_int=True),
        Function("FLOOR", (_NUMBER,), AttrType.FLOAT, _whole(math.floor), keeps_int=True),
        Function("CEIL", (_NUMBER,), AttrType.FLOAT, _whole(math.ceil), keeps_int=True),
        Function("SQRT", (_NUMBER,), AttrType.FLOAT, _sqrt),
        Function("LN", (_NUMBER,), AttrType.FLOAT, _logarithm(math.log)),
        Function("LOG", (_NUMBER,), AttrType.FLOAT, _logarithm(math.log10)),
        Function("EXP", (_NUMBER,), AttrType.FLOAT, _exp),
        Function("POW", (_NUMBER, _NUMBER), AttrType.FLOAT, _pow, keeps_int=True),
        *(
            Function(
                name,
                (_NUMBER, _NUMBER),
                AttrType.FLOAT,
                _extreme(pick),
                variadic=True,
                keeps_int=True,
            )
            for name, pick in (("LEAST", min), ("GREATEST", max))
        ),
    ]
)
"""The functions every query may call."""
