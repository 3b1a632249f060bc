"""Compiled edge predicates and attribute maps: Python source built from predicate data.

The engine's hot loop evaluates the same conjuncts and maps millions of
times.  Interpreting the term tree each time costs more than the matching;
so each canonical conjunct, guard list and map is turned once into Python
source and ``compile``d (docs/design.md, "Indices and the hot loop").  The predicate stays data: a
:class:`Codegen` is a cache keyed by the canonical form, and the generated
code has exactly the semantics of :mod:`cesar.automata.evaluate` — arithmetic
through :func:`~cesar.automata.evaluate.arith` and :func:`~cesar.automata.evaluate.neg`,
an atom whose arithmetic faults is false and counted, a map that faults
raises :class:`~cesar.automata.evaluate.ArithmeticFault`.

Generated functions take ``(L, E, D, V)``: the instance's binding, the
incoming event's attributes, the composite DUR and the event's own DUR; a
template's atoms with parameters (:mod:`cesar.automata.template`) also take
``P``, the constants of one subscription.

>>> from cesar.automata.terms import Attr, Cmp, Const, Scope
>>> from cesar.automata.schema import AttrType
>>> test = Codegen().conjunct((Cmp("<", Attr(Scope.LEFT, "p"), Attr(Scope.EVENT, "Price")),))
>>> test({"p": 10.0}, {"Price": 12.5}, 1, 1), test({"p": 10.0}, {"Price": 9.0}, 1, 1)
(True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, assert_never

from cesar.automata.algebra import Assign
from cesar.automata.arithmetic import ArithmeticFault, arith, check_int, neg
from cesar.automata.evaluate import Faults
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.schema import AttrType, Value
from cesar.automata.terms import (
    Arith,
    Attr,
    Call,
    Cmp,
    Const,
    Dur,
    DurLit,
    EventDur,
    Neg,
    Param,
    Scope,
    Term,
)

Binding = Mapping[str, Value]
Test = Callable[[Binding, Binding, int, int], bool]
ValueOf = Callable[[Binding, Binding, int, int], Value]
GeneralTest = Callable[[Binding, Binding, int, int, tuple[Value, ...]], bool]
ThresholdOf = Callable[[Binding, tuple[Value, ...]], Value]
Build = Callable[[Binding, Binding, int, int], dict[str, Value]]
Values = Callable[[Binding, Binding, int, int], tuple[tuple[str, Value], ...]]

_PY_OPS: Final = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_SCOPE_VAR: Final = {Scope.LEFT: "L", Scope.EVENT: "E"}


# ``+ - *`` of two floats cannot fault and are what ``arith`` computes: done inline; of two
# ints (not bools), ``arith``'s own checked result, inline too (a FOLD's count, ``$.Quotes + 1``);
# the other cases (mixed) through ``arith``.
def _add(a: Value, b: Value) -> Value:
    if type(a) is float and type(b) is float:
        return a + b
    if type(a) is int and type(b) is int:
        return check_int(a + b)
    return arith("+", a, b)


def _sub(a: Value, b: Value) -> Value:
    if type(a) is float and type(b) is float:
        return a - b
    if type(a) is int and type(b) is int:
        return check_int(a - b)
    return arith("-", a, b)


def _mul(a: Value, b: Value) -> Value:
    if type(a) is float and type(b) is float:
        return a * b
    if type(a) is int and type(b) is int:
        return check_int(a * b)
    return arith("*", a, b)


_INLINE: Final = {"+": "add", "-": "sub", "*": "mul"}


class _Source:
    """Python source for terms, with constants and functions passed in by name."""

    def __init__(self, functions: FunctionRegistry) -> None:
        self.functions = functions
        self.constants: list[Value] = []
        self.calls: dict[str, Callable[..., Value]] = {}

    def term(self, term: Term) -> str:
        match term:
            case Const():
                self.constants.append(term.value)
                return f"K[{len(self.constants) - 1}]"
            case Attr():
                return f"{_SCOPE_VAR[term.scope]}[{term.name!r}]"
            case Dur():
                return "D"
            case EventDur():
                return "V"
            case Param():
                return f"P[{term.index}]"
            case Arith():
                left, right = self.term(term.left), self.term(term.right)
                if term.op in _INLINE:
                    return f"{_INLINE[term.op]}({left}, {right})"
                return f"arith({term.op!r}, {left}, {right})"
            case Neg():
                return f"neg({self.term(term.operand)})"
            case Call():
                function = self.functions.get(term.name)
                assert function is not None, f"unknown function {term.name}"
                self.calls[function.name] = function.impl
                args = ", ".join(self.term(arg) for arg in term.args)
                return f"F[{function.name!r}]({args})"
            case DurLit():
                raise TypeError(f"{term!r} is compiled into ticks before code is generated")
            case _:
                assert_never(term)

    def namespace(self, faults: Faults) -> dict[str, Any]:
        return {
            "K": tuple(self.constants),
            "F": dict(self.calls),
            "arith": arith,
            "add": _add,
            "sub": _sub,
            "mul": _mul,
            "neg": neg,
            "ArithmeticFault": ArithmeticFault,
            "faults": faults,
        }


def can_fault(term: Term) -> bool:
    """True if evaluating ``term`` may raise :class:`ArithmeticFault`."""
    return isinstance(term, (Arith, Neg, Call))


def _define(
    source: _Source, body: list[str], faults: Faults, args: str = "L, E, D, V"
) -> Callable[..., Any]:
    text = f"def generated({args}):\n" + "\n".join("    " + line for line in body)
    namespace = source.namespace(faults)
    exec(compile(text, "<cesar codegen>", "exec"), namespace)
    function: Callable[..., Any] = namespace["generated"]
    return function


class Codegen:
    """Compiles conjuncts, guards and maps once each, keyed by their canonical form.

    ``faults`` counts the atoms made false by a fault, as
    :func:`~cesar.automata.evaluate.holds` does.
    """

    def __init__(
        self, faults: Faults | None = None, functions: FunctionRegistry = DEFAULT_FUNCTIONS
    ):
        self.faults = faults if faults is not None else Faults()
        self.functions = functions
        self._tests: dict[tuple[Cmp, ...], Test] = {}
        self._values: dict[Term, ValueOf] = {}
        self._thresholds: dict[Term, ThresholdOf] = {}
        self._generals: dict[tuple[Cmp, ...], GeneralTest] = {}
        self._guards: dict[tuple[Term, ...], Test] = {}
        self._maps: dict[tuple[tuple[Assign, ...], bool], Callable[..., Any]] = {}

    def conjunct(self, atoms: tuple[Cmp, ...]) -> Test:
        """A function telling whether every atom holds (a faulting atom is false)."""
        cached = self._tests.get(atoms)
        if cached is not None:
            return cached
        function: Test = _define(*self._atoms(atoms), self.faults)
        self._tests[atoms] = function
        return function

    def general(self, atoms: tuple[Cmp, ...]) -> GeneralTest:
        """As :meth:`conjunct`, for atoms with parameters: the function also takes ``P``."""
        cached = self._generals.get(atoms)
        if cached is not None:
            return cached
        function: GeneralTest = _define(*self._atoms(atoms), self.faults, "L, E, D, V, P")
        self._generals[atoms] = function
        return function

    def value(self, term: Term) -> ValueOf:
        """A function computing ``term``; raises ArithmeticFault (the caller counts it)."""
        cached = self._values.get(term)
        if cached is not None:
            return cached
        source = _Source(self.functions)
        function: ValueOf = _define(source, [f"return {source.term(term)}"], self.faults)
        self._values[term] = function
        return function

    def threshold(self, term: Term) -> ThresholdOf:
        """A function of ``(L, P)`` computing a term that reads only the binding and constants.

        Raises ArithmeticFault (the caller counts it).
        """
        cached = self._thresholds.get(term)
        if cached is not None:
            return cached
        source = _Source(self.functions)
        body = [f"return {source.term(term)}"]
        function: ThresholdOf = _define(source, body, self.faults, "L, P")
        self._thresholds[term] = function
        return function

    def _atoms(self, atoms: tuple[Cmp, ...]) -> tuple[_Source, list[str]]:
        source = _Source(self.functions)
        body: list[str] = []
        for atom in atoms:
            test = (
                f"if not ({source.term(atom.left)} {_PY_OPS[atom.op]} "
                f"{source.term(atom.right)}): return False"
            )
            if can_fault(atom.left) or can_fault(atom.right):
                body += [
                    "try:",
                    f"    {test}",
                    "except ArithmeticFault:",
                    "    faults.arithmetic += 1",
                    "    return False",
                ]
            else:
                body.append(test)
        body.append("return True")
        return source, body

    def guards(self, terms: tuple[Term, ...]) -> Test:
        """A function telling whether every guard term evaluates without a fault."""
        cached = self._guards.get(terms)
        if cached is not None:
            return cached
        source = _Source(self.functions)
        body = ["try:"]
        body += [f"    {source.term(term)}" for term in terms] or ["    pass"]
        body += ["except ArithmeticFault:", "    faults.arithmetic += 1", "    return False"]
        body.append("return True")
        function: Test = _define(source, body, self.faults)
        self._guards[terms] = function
        return function

    def build(self, assigns: Sequence[Assign]) -> Build:
        """A function computing a binding from an attribute map; raises ArithmeticFault.

        The binding's keys come in sorted order, so its items are a match's values as they
        are (the engine does not sort them per match).
        """
        function: Build = self._map(tuple(assigns), pairs=False)
        return function

    def values(self, assigns: Sequence[Assign]) -> Values:
        """As :meth:`build`, the binding's items as a match holds them: ``(name, value)`` pairs
        in sorted order, made without the dict (for an edge into a node no instance stays at).
        """
        function: Values = self._map(tuple(assigns), pairs=True)
        return function

    def _map(self, key: tuple[Assign, ...], pairs: bool) -> Callable[..., Any]:
        """The map ``key`` compiled once: making a dict, or with ``pairs`` its items' tuple."""
        cached = self._maps.get((key, pairs))
        if cached is not None:
            return cached
        source = _Source(self.functions)
        assigned = _assigned(source, key)
        if pairs:
            body = "return (" + " ".join(f"({name!r}, {value})," for name, value in assigned) + ")"
        else:
            body = "return {" + ", ".join(f"{name!r}: {value}" for name, value in assigned) + "}"
        function = _define(source, [body], self.faults)
        self._maps[key, pairs] = function
        return function


def _assigned(source: _Source, assigns: tuple[Assign, ...]) -> list[tuple[str, str]]:
    """Each assigned name, sorted, with its value's code (a FLOAT stored as a float, as
    ``evaluate.store`` does to a number)."""
    found = []
    for assign in sorted(assigns, key=lambda a: a.name):
        value = source.term(assign.term)
        if assign.type is AttrType.FLOAT:
            value = f"float({value})"
        found.append((assign.name, value))
    return found
