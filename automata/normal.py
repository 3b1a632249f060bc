"""Canonical form, DNF and the static/dynamic split of predicates (Section 4.1).

The canonical form makes syntactically different but trivially equivalent
predicates equal: NOT is pushed to the atoms, constant sub-terms are folded,
operands of ``+``, ``*``, ``=`` and ``!=`` are ordered, a constant always stands
on the right of a comparison, and conjunctions and disjunctions are flattened,
sorted and de-duplicated.  :func:`dnf` then yields the conjuncts that indices
register one by one, and :func:`split` separates each conjunct's *static* atoms
(``attribute relop constant`` on the incoming event) from its *dynamic* rest.

>>> from cesar.automata.terms import Attr, Scope, to_cel
>>> a, n = Attr(Scope.RIGHT, "Price"), Attr(Scope.RIGHT, "Name")
>>> ibm = Const("IBM", AttrType.STRING)
>>> p = And((Cmp("<", Const(10, AttrType.INT), a), Not(Cmp("!=", n, ibm))))
>>> to_cel(canonical(p))
"$2.Name = 'IBM' AND $2.Price > 10"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from cesar.automata.arithmetic import ArithmeticFault, arith
from cesar.automata.evaluate import Env, compare, eval_term, negate
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.schema import AttrType, Value
from cesar.automata.terms import (
    FALSE,
    FLIPPED,
    TRUE,
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
    to_cel,
)

DEFAULT_DNF_LIMIT = 256
_EMPTY_ENV = Env({}, 0)


NO_OPAQUE: frozenset[Value] = frozenset()


class OpaqueFolded(ValueError):
    """A constant the caller declared opaque would have been folded with another.

    The shape cache compiles a query with sentinels in its literals' places and
    declares them opaque: a literal folded into a truth value or a new constant
    leaves no trace of itself in the compiled form, so the form is no template.
    """


def _guard(opaque: frozenset[Value], *operands: Const) -> None:
    if opaque and any(c.value in opaque for c in operands):
        raise OpaqueFolded(f"the constant {operands[0].value!r} folds with another")


class DnfLimitError(ValueError):
    """A predicate whose DNF would have more conjuncts than the configured limit."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"predicate expands to {size} conjuncts in disjunctive normal form, "
            f"more than the limit of {limit}; simplify it or split the subscription"
        )


def _key(node: Term | Pred) -> tuple[int, str]:
    """Sort key: constants last, then by printed text (deterministic and total)."""
    return (1 if isinstance(node, Const) else 0, to_cel(node))


def const_of(value: Value) -> Const:
    """The constant holding ``value``, typed by its Python type.

    >>> const_of(2.5).type.value, const_of(True).type.value
    ('float', 'bool')
    """
    if isinstance(value, bool):
        return Const(value, AttrType.BOOL)
    if isinstance(value, int):
        return Const(value, AttrType.INT)
    if isinstance(value, float):
        return Const(value, AttrType.FLOAT)
    return Const(value, AttrType.STRING)


class Canonical:
    """Canonical forms of one compile's predicates, each distinct one worked out once.

    A compile's edges repeat their atoms (a pattern's condition reaches every edge
    that may take its event): 72 % of the atoms a pattern's edges canonicalize, and
    77 % of the sort keys printed, were met before in the same compile.  The memo
    lives as long as the instance (one compile); equal nodes (positions aside) share
    one canonical form.  ``opaque``: see :class:`OpaqueFolded`.
    """

    __slots__ = ("_forms", "_keys", "functions", "opaque")

    def __init__(
        self, functions: FunctionRegistry = DEFAULT_FUNCTIONS, opaque: frozenset[Value] = NO_OPAQUE
    ) -> None:
        self.functions = functions
        self.opaque = opaque
        self._forms: dict[Pred, Pred] = {}
        self._keys: dict[Term | Pred, tuple[int, str]] = {}

    def key(self, node: Term | Pred) -> tuple[int, str]:
        """Sort key: constants last, then by printed text (deterministic and total)."""
        found = self._keys.get(node)
        if found is None:
            found = self._keys[node] = _key(node)
        return found

    def term(self, term: Term) -> Term:
        """Fold constant sub-terms and order the operands of commutative operators.

        A constant sub-term whose evaluation faults is kept as it is, so the fault
        still makes its atom false (and counted) at run time.  Folding a value of
        ``opaque`` (other than negating it) raises :class:`OpaqueFolded`.
        """
        functions, opaque = self.functions, self.opaque
        match term:
            case Neg():
                operand = self.term(term.operand)
                if isinstance(operand, Const):
                    try:
                        return const_of(eval_term(Neg(operand), _EMPTY_ENV, functions))
                    except ArithmeticFault:
                        pass
                return Neg(operand)
            case Arith():
                left = self.term(term.left)
                right = self.term(term.right)
                if isinstance(left, Const) and isinstance(right, Const):
                    _guard(opaque, left, right)
                    try:
                        return const_of(arith(term.op, left.value, right.value))
                    except ArithmeticFault:
                        pass
                if term.op in ("+", "*") and self.key(left) > self.key(right):
                    left, right = right, left
                return Arith(term.op, left, right)
            case Call():
                args = tuple(self.term(arg) for arg in term.args)
                function = functions.get(term.name)
                if function is not None and all(isinstance(arg, Const) for arg in args):
                    _guard(opaque, *(arg for arg in args if isinstance(arg, Const)))
                    try:
                        return const_of(eval_term(Call(function.name, args), _EMPTY_ENV, functions))
                    except ArithmeticFault:
                        pass
                return Call(term.name.upper(), args)
            case _ if term.pos is None:  # a leaf without a position is canonical as it is
                return term
            case Const():
                return Const(term.value, term.type)
            case Attr():
                return Attr(term.scope, term.name)
            case Dur():
                return Dur()
            case EventDur():
                return EventDur()
            case DurLit() | Param():
                return term
            case _:
                assert_never(term)

    def pred(self, pred: Pred) -> Pred:
        """The canonical form of ``pred`` (see the module docstring); positions are dropped.

        A comparison or arithmetic over a value of ``opaque`` raises
        :class:`OpaqueFolded` where it would fold.
        """
        found = self._forms.get(pred)
        if found is None:
            found = self._forms[pred] = self._form(pred)
        return found

    def _form(self, pred: Pred) -> Pred:
        if isinstance(pred, Not):
            return self.pred(negate(pred.item))
        if isinstance(pred, Cmp):
            return self._atom(pred)
        if isinstance(pred, Truth):
            return TRUE if pred.value else FALSE
        is_and = isinstance(pred, And)
        unit, zero = (TRUE, FALSE) if is_and else (FALSE, TRUE)
        items: set[Pred] = set()
        for item in pred.items:
            sub = self.pred(item)
            if isinstance(sub, Truth):
                if sub.value != is_and:  # FALSE under AND, TRUE under OR
                    return zero
                continue
            if isinstance(sub, And if is_and else Or):
                items.update(sub.items)
            else:
                items.add(sub)
        ordered = tuple(sorted(items, key=self.key))
        if not ordered:
            return unit
        if len(ordered) == 1:
            return ordered[0]
        return And(ordered) if is_and else Or(ordered)

    def _atom(self, atom: Cmp) -> Pred:
        left = self.term(atom.left)
        right = self.term(atom.right)
        op = atom.op
        if isinstance(left, Const) and isinstance(right, Const):
            _guard(self.opaque, left, right)
            return TRUE if compare(op, left.value, right.value) else FALSE
        if isinstance(left, Const) or (
            not isinstance(right, Const) and self.key(left) > self.key(right)
        ):
            left, right, op = right, left, FLIPPED[op]
        elif left is atom.left and right is atom.right and atom.pos is None:
            return atom  # canonical already: the same object keeps its hash
        return Cmp(op, left, right)

    def conjuncts(self, form: Pred, limit: int = DEFAULT_DNF_LIMIT) -> tuple[Conjunct, ...]:
        """:func:`dnf` of ``form``, a predicate in canonical form already (:meth:`pred`)."""
        size = dnf_size(form)
        if size > limit:
            raise DnfLimitError(size, limit)
        key = self.key
        conjuncts = {Conjunct(tuple(sorted(set(atoms), key=key))) for atoms in _expand(form)}
        return tuple(sorted(conjuncts, key=lambda c: [key(a) for a in c.atoms]))


def canonical_term(
    term: Term,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
    opaque: frozenset[Value] = NO_OPAQUE,
) -> Term:
    """:meth:`Canonical.term` of one term."""
    return Canonical(functions, opaque).term(term)


def canonical(
    pred: Pred,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
    opaque: frozenset[Value] = NO_OPAQUE,
) -> Pred:
    """The canonical form of ``pred`` (see the module docstring); positions are dropped.

    A comparison or arithmetic over a value of ``opaque`` raises :class:`OpaqueFolded`
    where it would fold.  Many predicates of one compile: :class:`Canonical`.
    """
    return Canonical(functions, opaque).pred(pred)


@dataclass(frozen=True, slots=True)
class Conjunct:
    """A conjunction of canonical atoms, sorted and without duplicates; empty means TRUE."""

    atoms: tuple[Cmp, ...]

    def pred(self) -> Pred:
        """The conjunct as a predicate."""
        if not self.atoms:
            return TRUE
        return self.atoms[0] if len(self.atoms) == 1 else And(self.atoms)


def static_atoms(conjunct: Conjunct) -> tuple[tuple[str, str, Value], ...]:
    """A static conjunct as ``(attribute, operator, constant)`` atoms, the indices' form.

    Every atom must be static over the incoming event (:func:`is_static`).

    >>> from cesar.automata.terms import Attr, Scope
    >>> static_atoms(Conjunct((Cmp(">", Attr(Scope.EVENT, "Price"), Const(10, AttrType.INT)),)))
    (('Price', '>', 10),)
    """
    out = []
    for atom in conjunct.atoms:
        assert is_static(atom, Scope.EVENT), f"not a static atom: {atom}"
        assert isinstance(atom.left, Attr) and isinstance(atom.right, Const)
        out.append((atom.left.name, atom.op, atom.right.value))
    return tuple(out)


def dnf_size(pred: Pred) -> int:
    """The number of conjuncts the DNF of ``pred`` has before simplification."""
    if isinstance(pred, Or):
        return sum(dnf_size(item) for item in pred.items)
    if isinstance(pred, And):
        size = 1
        for item in pred.items:
            size *= dnf_size(item)
        return size
    if isinstance(pred, Not):
        return dnf_size(negate(pred.item))
    return 1


def dnf(
    pred: Pred, limit: int = DEFAULT_DNF_LIMIT, functions: FunctionRegistry = DEFAULT_FUNCTIONS
) -> tuple[Conjunct, ...]:
    """The disjunctive normal form of ``pred``: canonical conjuncts, sorted, unique.

    An empty tuple is FALSE; a tuple holding the empty conjunct is TRUE.
    Raises :class:`DnfLimitError` if the expansion would exceed ``limit``
    conjuncts.  Cost: proportional to the expanded size, at most ``limit``.

    >>> from cesar.automata.terms import Attr, Scope
    >>> x, y = Attr(Scope.EVENT, "x"), Attr(Scope.EVENT, "y")
    >>> one, two = Const(1, AttrType.INT), Const(2, AttrType.INT)
    >>> p = And((Or((Cmp("=", x, one), Cmp("=", x, two))), Cmp(">", y, one)))
    >>> [to_cel(c.pred()) for c in dnf(p)]
    ['x = 1 AND y > 1', 'x = 2 AND y > 1']
    """
    forms = Canonical(functions)
    return forms.conjuncts(forms.pred(pred), limit)


def conjuncts_of(form: Pred, limit: int = DEFAULT_DNF_LIMIT) -> tuple[Conjunct, ...]:
    """:func:`dnf` of ``form``, a predicate in canonical form already (:func:`canonical`).

    Each atom's sort key is printed once, however many conjuncts hold it.
    """
    return Canonical().conjuncts(form, limit)


def _expand(pred: Pred) -> list[list[Cmp]]:
    if isinstance(pred, Truth):
        return [[]] if pred.value else []
    if isinstance(pred, Cmp):
        return [[pred]]
    if isinstance(pred, Or):
        return [conj for item in pred.items for conj in _expand(item)]
    assert isinstance(pred, And)
    result: list[list[Cmp]] = [[item for item in pred.items if isinstance(item, Cmp)]]
    for item in pred.items:
        if not isinstance(item, Cmp):
            result = [left + right for left in result for right in _expand(item)]
    return result


def is_static(atom: Cmp, incoming: Scope) -> bool:
    """True if ``atom`` is ``attribute relop constant`` over the incoming event."""
    return (
        isinstance(atom.left, Attr)
        and atom.left.scope is incoming
        and isinstance(atom.right, Const)
    )


def split(conjunct: Conjunct, incoming: Scope) -> tuple[Conjunct, Conjunct]:
    """Split a conjunct into its static part and its dynamic part (Section 4.1).

    ``incoming`` is the scope of the event being matched: ``Scope.RIGHT`` on
    NEXT/FOLD edges, ``Scope.EVENT`` for a selection on one stream.

    >>> from cesar.automata.terms import Attr, Scope
    >>> c = dnf(And((Cmp("=", Attr(Scope.RIGHT, "Name"), Attr(Scope.LEFT, "Name")),
    ...              Cmp(">", Attr(Scope.RIGHT, "Price"), Const(10, AttrType.INT)))))[0]
    >>> static, dynamic = split(c, Scope.RIGHT)
    >>> to_cel(static.pred()), to_cel(dynamic.pred())
    ('$2.Price > 10', '$1.Name = $2.Name')
    """
    static = tuple(atom for atom in conjunct.atoms if is_static(atom, incoming))
    dynamic = tuple(atom for atom in conjunct.atoms if not is_static(atom, incoming))
    return Conjunct(static), Conjunct(dynamic)
