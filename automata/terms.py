"""Terms and predicates as data (Section 2.1: selection formulas).

Every arithmetic term and selection formula is a tree of frozen dataclasses, so
equality and hashing mean "the same predicate" and indices can key on them.
Source positions ride along for error messages but never take part in
equality.  :func:`to_cel` prints any node back as CEL text that parses to an
equal node.

>>> p = Cmp(">", Attr(Scope.RIGHT, "Price"), Arith("*", Const(1.05, AttrType.FLOAT),
...         Attr(Scope.LEFT, "Price")))
>>> to_cel(p)
'$2.Price > 1.05 * $1.Price'
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import assert_never

from cesar.automata.schema import AttrType, Value

Pos = tuple[int, int] | None
"""A (line, column) source position, 1-based, or None for built nodes."""


class Scope(enum.Enum):
    """Which event an attribute reference reads.

    ``EVENT`` is a bare name (the single event of FILTER and SELECT), ``LEFT``
    is ``$1`` (the left operand's event as it entered NEXT/FOLD), ``RIGHT`` is
    ``$2`` (the new right-hand event) and ``STATE`` is ``$`` (a FOLD run's state
    after its previous step).
    """

    EVENT = ""
    LEFT = "$1"
    RIGHT = "$2"
    STATE = "$"

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python per call


def position() -> Pos:
    return field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True, slots=True)
class Const:
    """A typed constant; ``Const(1, INT)`` and ``Const(1.0, FLOAT)`` differ."""

    value: Value
    type: AttrType
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Attr:
    """An attribute reference with its scope."""

    scope: Scope
    name: str
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Dur:
    """DUR: the duration ``t1 - t0 + 1`` of the event in scope, in ticks."""

    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class EventDur:
    """The incoming event's own duration, in ticks; exists only in compiled automaton edges.

    An edge judges an instance together with an incoming event, so its plain
    :class:`Dur` is the duration of the concatenation.  Selections on the right
    operand of NEXT/FOLD speak of the incoming event alone; the compiler writes
    their DUR as ``EventDur``.  CEL has no syntax for it; it prints as ``DUR($2)``.
    """

    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class DurLit:
    """A duration constant with a unit (``10 MIN``); compiled into ticks of the stream."""

    amount: int | float
    unit: str
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Arith:
    """A binary arithmetic term; ``op`` is one of ``+ - * / % ^``."""

    op: str
    left: Term
    right: Term
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Neg:
    """Unary minus."""

    operand: Term
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Call:
    """A call of a registered function, by its upper-case name."""

    name: str
    args: tuple[Term, ...]
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Param:
    """A template's placeholder for a constant: the ``index``-th constant of its edge.

    Exists only in edge templates (:mod:`cesar.automata.template`), where
    subscriptions equal up to their constants share one edge and each keeps its
    own constants; it prints as ``?index``.
    """

    index: int
    type: AttrType
    pos: Pos = position()


Term = Const | Attr | Dur | EventDur | DurLit | Arith | Neg | Call | Param


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Cmp:
    """An atomic predicate ``left op right``; ``op`` is one of ``= != < <= > >=``.

    Atoms are hashed over and over (DAG signatures, index keys), so the hash is
    computed once and kept.
    """

    op: str
    left: Term
    right: Term
    pos: Pos = position()
    _hash: int | None = field(default=None, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash((self.op, self.left, self.right)))
        assert self._hash is not None
        return self._hash


@dataclass(frozen=True, slots=True)
class And:
    """Conjunction of two or more predicates."""

    items: tuple[Pred, ...]
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Or:
    """Disjunction of two or more predicates."""

    items: tuple[Pred, ...]
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Not:
    """Negation."""

    item: Pred
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Truth:
    """The constant predicates TRUE and FALSE."""

    value: bool
    pos: Pos = position()


Pred = Cmp | And | Or | Not | Truth

TRUE = Truth(True)
FALSE = Truth(False)

ZERO: dict[AttrType, Const] = {
    AttrType.INT: Const(0, AttrType.INT),
    AttrType.FLOAT: Const(0.0, AttrType.FLOAT),
    AttrType.STRING: Const("", AttrType.STRING),
    AttrType.BOOL: Const(False, AttrType.BOOL),
}
"""Each type's zero: what stands for a value that is not there, where a value must be (an
attribute a union's stream lacks; a RETURN item of a variable an alternative does not bind)."""

ARITH_OPS = ("+", "-", "*", "/", "%", "^")
CMP_OPS = ("=", "!=", "<", "<=", ">", ">=")
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def conjoin(*preds: Pred) -> Pred:
    """AND of the given predicates, flattening nested conjunctions and dropping TRUE."""
    items: list[Pred] = []
    for pred in preds:
        if isinstance(pred, And):
            items.extend(pred.items)
        elif pred != TRUE:
            items.append(pred)
    if not items:
        return TRUE
    return items[0] if len(items) == 1 else And(tuple(items))


def conjuncts_of(pred: Pred) -> tuple[Pred, ...]:
    """The conjuncts of ``pred``: its items if it is an AND, else ``pred`` alone (the inverse
    of :func:`conjoin` on a flat conjunction)."""
    return pred.items if isinstance(pred, And) else (pred,)


# ---------------------------------------------------------------- traversal

Leaf = Const | Attr | Dur | EventDur | DurLit | Param


def map_leaves(
    node: Term | Pred,
    fn: Callable[[Leaf], Term],
    calls: Callable[[Call], Term | None] | None = None,
) -> Term | Pred:
    """Rebuild ``node`` with every leaf term replaced by ``fn(leaf)``; positions are kept.
    ``calls``, if given, may replace a whole call (None: keep it, its arguments mapped).

    >>> to_cel(map_leaves(Cmp("<", Attr(Scope.LEFT, "a"), Dur()),
    ...                   lambda leaf: Attr(Scope.RIGHT, "b") if isinstance(leaf, Attr) else leaf))
    '$2.b < DUR'
    """
    match node:
        case Cmp():
            left, right = map_term(node.left, fn, calls), map_term(node.right, fn, calls)
            return Cmp(node.op, left, right, node.pos)
        case Attr() | Const() | Dur() | EventDur() | DurLit() | Param():
            return fn(node)
        case Arith():
            left, right = map_term(node.left, fn, calls), map_term(node.right, fn, calls)
            return Arith(node.op, left, right, node.pos)
        case And():
            return And(tuple(map_pred(item, fn, calls) for item in node.items), node.pos)
        case Neg():
            return Neg(map_term(node.operand, fn, calls), node.pos)
        case Call():
            if calls is not None and (replaced := calls(node)) is not None:
                return replaced
            return Call(node.name, tuple(map_term(a, fn, calls) for a in node.args), node.pos)
        case Or():
            return Or(tuple(map_pred(item, fn, calls) for item in node.items), node.pos)
        case Not():
            return Not(map_pred(node.item, fn, calls), node.pos)
        case Truth():
            return node
        case _:
            assert_never(node)


def subterms(term: Term) -> tuple[Term, ...]:
    """The terms ``term`` is made of: none for a leaf.  Every kind of term is named here (and
    in each pass over terms), so a new kind fails type-checking where it is forgotten.

    >>> subterms(Arith("+", Dur(), Const(1, AttrType.INT)))
    (Dur(), Const(value=1, type=<AttrType.INT: 'int'>))
    """
    match term:
        case Arith():
            return (term.left, term.right)
        case Neg():
            return (term.operand,)
        case Call():
            return term.args
        case Const() | Attr() | Dur() | EventDur() | DurLit() | Param():
            return ()
        case _:
            assert_never(term)


def map_term(
    term: Term, fn: Callable[[Leaf], Term], calls: Callable[[Call], Term | None] | None = None
) -> Term:
    """:func:`map_leaves` for a term."""
    out = map_leaves(term, fn, calls)
    assert isinstance(out, (Const, Attr, Dur, EventDur, DurLit, Arith, Neg, Call, Param))
    return out


def map_pred(
    pred: Pred, fn: Callable[[Leaf], Term], calls: Callable[[Call], Term | None] | None = None
) -> Pred:
    """:func:`map_leaves` for a predicate."""
    out = map_leaves(pred, fn, calls)
    assert isinstance(out, (Cmp, And, Or, Not, Truth))
    return out


# ------------------------------------------------------------------ printing

_LEVEL_ADD, _LEVEL_MUL, _LEVEL_NEG, _LEVEL_POW, _LEVEL_PRIMARY = 1, 2, 3, 4, 5
_ARITH_LEVEL = {"+": _LEVEL_ADD, "-": _LEVEL_ADD, "*": _LEVEL_MUL, "/": _LEVEL_MUL, "%": _LEVEL_MUL}


def _term_level(term: Term) -> int:
    match term:
        case Attr() | Dur() | EventDur() | DurLit() | Param() | Call():
            return _LEVEL_PRIMARY
        case Const():
            return _LEVEL_NEG if term.type.numeric and _is_negative(term.value) else _LEVEL_PRIMARY
        case Arith():
            return _LEVEL_POW if term.op == "^" else _ARITH_LEVEL[term.op]
        case Neg():
            return _LEVEL_NEG
        case _:
            assert_never(term)


def _is_negative(value: Value) -> bool:
    """A number printed with a leading minus: below 0, or -0.0."""
    if isinstance(value, (bool, str)):
        return False
    return value < 0 or (value == 0 and math.copysign(1.0, value) < 0)


def _wrap(term: Term, parens: bool) -> str:
    text = to_cel(term)
    return f"({text})" if parens else text


def format_const(value: Value, typ: AttrType) -> str:
    """CEL literal text for a constant of the given type.

    >>> format_const("it's", AttrType.STRING), format_const(2.0, AttrType.FLOAT)
    ("'it''s'", '2.0')
    """
    if typ is AttrType.STRING:
        assert isinstance(value, str)
        return "'" + value.replace("'", "''") + "'"
    if typ is AttrType.BOOL:
        return "TRUE" if value else "FALSE"
    if typ is AttrType.FLOAT:
        text = repr(float(value))
        if text in ("inf", "-inf", "nan"):
            return {"inf": "1e999", "-inf": "-1e999", "nan": "(1e999 - 1e999)"}[text]
        return text
    return str(value)


_PREFIXES = {scope: f"{scope.value}." for scope in Scope}
"""How a reference of each scope is spelled before its name (an enum's ``value`` is a
descriptor call each time it is read)."""


def to_cel(node: Term | Pred) -> str:
    """Print a term or predicate as CEL text, with only the parentheses it needs.

    The text parses back to an equal node, except :class:`EventDur` and :class:`Param`,
    which CEL cannot write.
    """
    match node:
        case Attr():
            return node.name if node.scope is Scope.EVENT else _PREFIXES[node.scope] + node.name
        case Const():
            return format_const(node.value, node.type)
        case Cmp():
            return f"{to_cel(node.left)} {node.op} {to_cel(node.right)}"
        case Arith():
            if node.op == "^":
                left = _wrap(node.left, _term_level(node.left) <= _LEVEL_POW)
                right = _wrap(node.right, _term_level(node.right) < _LEVEL_NEG)
                return f"{left} ^ {right}"
            level = _ARITH_LEVEL[node.op]
            left = _wrap(node.left, _term_level(node.left) < level)
            right = _wrap(node.right, _term_level(node.right) <= level)
            return f"{left} {node.op} {right}"
        case And():
            return " AND ".join(
                f"({to_cel(item)})" if isinstance(item, (Or, And)) else to_cel(item)
                for item in node.items
            )
        case Dur():
            return "DUR"
        case EventDur():
            return "DUR($2)"
        case DurLit():
            return f"{node.amount} {node.unit}"
        case Param():
            return f"?{node.index}"
        case Neg():
            operand = _wrap(node.operand, _term_level(node.operand) < _LEVEL_NEG)
            # "--" would start a comment: a negated negative operand keeps its parentheses.
            return "-" + (f"({operand})" if operand.startswith("-") else operand)
        case Call():
            return f"{node.name}({', '.join(to_cel(arg) for arg in node.args)})"
        case Truth():
            return "TRUE" if node.value else "FALSE"
        case Not():
            inner = to_cel(node.item)
            return f"NOT ({inner})" if isinstance(node.item, (And, Or, Not)) else f"NOT {inner}"
        case Or():
            return " OR ".join(
                f"({to_cel(item)})" if isinstance(item, Or) else to_cel(item) for item in node.items
            )
        case _:
            assert_never(node)
