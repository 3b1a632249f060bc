"""Hypothesis strategies for random, well-typed algebra expressions and their input streams.

Expressions use all seven operators over three streams of two schemas,
S(k:string, v:int), T(k:string, v:int) and U(k:string, w:float); predicates
are parameterized (they compare attributes across scopes), use DUR and
arithmetic that can fault; α and μ compute aggregates.  Right operands of
NEXT/FOLD are arbitrary expressions, so resubscription is exercised.
"""

from __future__ import annotations

from hypothesis import strategies as st

from cesar.automata import algebra as alg
from cesar.automata.algebra import AlgebraError, Expr
from cesar.automata.schema import AttrType, Event
from cesar.automata.terms import (
    And,
    Arith,
    Attr,
    Cmp,
    Const,
    Dur,
    Neg,
    Not,
    Or,
    Pred,
    Scope,
    Term,
    Truth,
    conjoin,
)

INT, FLOAT, STRING = AttrType.INT, AttrType.FLOAT, AttrType.STRING
SCHEMAS = {
    "S": (("k", STRING), ("v", INT)),
    "T": (("k", STRING), ("v", INT)),
    "U": (("k", STRING), ("w", FLOAT)),
}
SOURCES = [alg.Source(name, columns) for name, columns in SCHEMAS.items()]
FRESH = ("a", "b", "c", "d")
KEYS = ("a", "b")

Scopes = dict[Scope, tuple[tuple[str, AttrType], ...]]


def _numeric_leaf(draw: st.DrawFn, scopes: Scopes, want_int: bool) -> Term:
    attrs = [
        Attr(scope, name)
        for scope, columns in scopes.items()
        for name, typ in columns
        if typ is INT or (typ is FLOAT and not want_int)
    ]
    choices: list[Term] = [
        Const(draw(st.sampled_from([-1, 0, 1, 2, 2, 3, 4])), INT),
        Dur(),
        *attrs,
        *attrs,
    ]
    if not want_int:
        choices.append(Const(draw(st.sampled_from([0.5, 1.0, 2.5])), FLOAT))
    return draw(st.sampled_from(choices))


def numeric_term(draw: st.DrawFn, scopes: Scopes, want_int: bool, depth: int = 2) -> Term:
    """An INT (``want_int``) or numeric term; ``/`` and ``%`` by zero fault."""
    kind = draw(st.integers(0, 5)) if depth else 0
    if kind <= 2:
        return _numeric_leaf(draw, scopes, want_int)
    if kind == 3:
        return Neg(numeric_term(draw, scopes, want_int, depth - 1))
    op = draw(st.sampled_from(["+", "-", "*", "+", "-", "*", "/", "%"]))
    left = numeric_term(draw, scopes, want_int, depth - 1)
    if op in "/%" and draw(st.booleans()):
        # Attribute divisors are sometimes 0: the fault drops the row, not the run.
        return Arith(op, left, _numeric_leaf(draw, scopes, want_int))
    return Arith(op, left, numeric_term(draw, scopes, want_int, depth - 1))


def _string_term(draw: st.DrawFn, scopes: Scopes) -> Term:
    attrs = [
        Attr(scope, name)
        for scope, columns in scopes.items()
        for name, typ in columns
        if typ is STRING
    ]
    return draw(st.sampled_from([*attrs, *attrs, Const(draw(st.sampled_from(KEYS)), STRING)]))


def atom(draw: st.DrawFn, scopes: Scopes) -> Pred:
    has_string = any(t is STRING for columns in scopes.values() for _, t in columns)
    if has_string and draw(st.booleans()):
        op = draw(st.sampled_from(["=", "=", "!="]))
        return Cmp(op, _string_term(draw, scopes), _string_term(draw, scopes))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    return Cmp(op, numeric_term(draw, scopes, False), numeric_term(draw, scopes, False))


def simple_atom(draw: st.DrawFn, scopes: Scopes) -> Pred:
    """A comparison a query writer would write: attribute to attribute, to a constant, or DUR,
    or a new event's attribute to a multiple of the earlier one's (``$2.v > 2 * $1.v``)."""
    attrs = [(Attr(scope, n), t) for scope, columns in scopes.items() for n, t in columns]
    kind = draw(st.integers(0, 3)) if attrs else 2
    if kind == 3:
        new = [a for a, t in attrs if t is not STRING and a.scope is Scope.RIGHT]
        old = [a for a, t in attrs if t is not STRING and a.scope is not Scope.RIGHT]
        if not new or not old:
            kind = 0
        else:
            factor = Const(draw(st.sampled_from([0, 1, 2, 3, 0.5, 2.5])), INT)
            if isinstance(factor.value, float):
                factor = Const(factor.value, FLOAT)
            side = Arith(draw(st.sampled_from("*+-/")), draw(st.sampled_from(old)), factor)
            op = draw(st.sampled_from(["<", "<=", ">", ">="]))
            first = draw(st.sampled_from(new))
            return Cmp(op, first, side) if draw(st.booleans()) else Cmp(op, side, first)
    if kind == 2:
        bound = draw(st.sampled_from([Const(n, INT) for n in range(1, 7)] + [Const(2.5, FLOAT)]))
        return Cmp(draw(st.sampled_from(["<=", "<", ">", "="])), Dur(), bound)
    left, typ = draw(st.sampled_from(attrs))
    if typ is STRING:
        others = [a for a, t in attrs if t is STRING and a != left]
        right = draw(st.sampled_from(others)) if others and kind == 0 else None
        constant = Const(draw(st.sampled_from(KEYS)), STRING)
        return Cmp(draw(st.sampled_from(["=", "=", "!="])), left, right or constant)
    others = [a for a, t in attrs if t is not STRING and a != left]
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    if others and kind == 0:
        return Cmp(op, left, draw(st.sampled_from(others)))
    return Cmp(op, left, Const(draw(st.integers(0, 4)), INT))


def predicate(draw: st.DrawFn, scopes: Scopes, depth: int = 2) -> Pred:
    """A predicate over the attributes in ``scopes``: atoms under AND, OR and NOT.

    Half of them are conjunctions of at most two simple atoms, so that
    sequences match often enough to test something.
    """
    if draw(st.booleans()):
        return conjoin(*(simple_atom(draw, scopes) for _ in range(draw(st.integers(0, 2)))))
    kind = draw(st.integers(0, 8)) if depth else draw(st.integers(0, 3))
    if kind <= 2:
        return atom(draw, scopes)
    if kind == 3:
        return Truth(draw(st.integers(0, 3)) > 0)
    if kind == 4:
        return Not(predicate(draw, scopes, depth - 1))
    items = tuple(predicate(draw, scopes, depth - 1) for _ in range(draw(st.integers(2, 3))))
    return And(items) if kind == 5 else Or(items)


def adapt(draw: st.DrawFn, expr: Expr, target: alg.Columns) -> Expr:
    """Bend ``expr`` to the schema ``target`` with π, ρ and α (for ∪ and μ's right operand)."""
    available = list(expr.attributes)
    chosen: list[tuple[str, str]] = []
    missing: list[tuple[str, AttrType]] = []
    for name, typ in target:
        same = [a for a in available if a[1] is typ]
        if same and draw(st.integers(0, 4)):
            pick = next((a for a in same if a[0] == name), draw(st.sampled_from(same)))
            available.remove(pick)
            chosen.append((pick[0], name))
        else:
            missing.append((name, typ))
    out: Expr = alg.Project(expr, tuple(source for source, _ in chosen))
    renames = tuple((source, name) for source, name in chosen if source != name)
    if renames:
        out = alg.Rename(out, renames)
    if missing:
        scopes: Scopes = {Scope.EVENT: out.attributes}
        out = alg.Introduce(out, tuple(_assign(draw, name, typ, scopes) for name, typ in missing))
    return alg.Project(out, tuple(name for name, _ in target))


def _assign(draw: st.DrawFn, name: str, typ: AttrType, scopes: Scopes) -> alg.Assign:
    if typ is STRING:
        return alg.Assign(name, _string_term(draw, scopes), STRING)
    return alg.Assign(name, numeric_term(draw, scopes, typ is INT), typ)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 4) -> Expr:
    """A random algebra expression of nesting depth at most ``depth``."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(SOURCES))
    kind = draw(
        st.sampled_from(["select", "project", "rename", "introduce", "union", "seq", "fold"])
    )
    inner = draw(expressions(depth - 1))
    own: Scopes = {Scope.EVENT: inner.attributes}
    if kind == "select":
        return alg.Select(inner, predicate(draw, own))
    if kind == "project":
        names = draw(st.lists(st.sampled_from(inner.names), unique=True, min_size=1))
        return alg.Project(inner, tuple(names))
    if kind == "rename":
        free = [n for n in FRESH if n not in inner.names]
        old = draw(st.lists(st.sampled_from(inner.names), unique=True, min_size=1, max_size=2))
        return alg.Rename(inner, tuple(zip(old, free, strict=False)))
    if kind == "introduce":
        name = draw(st.sampled_from([*FRESH, *inner.names]))
        typ = draw(st.sampled_from([INT, FLOAT, STRING]))
        return alg.Introduce(inner, (_assign(draw, name, typ, own),))
    other = draw(expressions(depth - 1))
    if kind == "union":
        return alg.Union(inner, adapt(draw, other, inner.attributes))
    if kind == "seq":
        scopes = {Scope.LEFT: inner.attributes, Scope.RIGHT: other.attributes}
        return alg.Seq(inner, other, predicate(draw, scopes))
    return _fold(draw, inner, other)


@st.composite
def resubscriptions(draw: st.DrawFn) -> Expr:
    """NEXT or FOLD whose right operand is NEXT, FOLD or ∪ (not linear-plus: resubscription)."""
    left = draw(expressions(1))
    a, b = draw(expressions(1)), draw(expressions(1))
    kind = draw(st.sampled_from(["seq", "fold", "union"]))
    if kind == "seq":
        scopes = {Scope.LEFT: a.attributes, Scope.RIGHT: b.attributes}
        right: Expr = alg.Seq(a, b, predicate(draw, scopes))
    elif kind == "fold":
        right = _fold(draw, a, b)
    else:
        right = alg.Union(a, adapt(draw, b, a.attributes))
    if draw(st.booleans()):
        scopes = {Scope.LEFT: left.attributes, Scope.RIGHT: right.attributes}
        return alg.Seq(left, right, predicate(draw, scopes))
    return _fold(draw, left, right)


def _fold(draw: st.DrawFn, left: Expr, other: Expr) -> Expr:
    shared = draw(st.lists(st.sampled_from(left.attributes), unique=True, min_size=1, max_size=2))
    right = adapt(draw, other, tuple(shared))
    scopes = {
        Scope.LEFT: left.attributes,
        Scope.STATE: left.attributes,
        Scope.RIGHT: right.attributes,
    }
    right_names = set(right.names)
    numeric = [(n, t) for n, t in left.attributes if n not in right_names and t is not STRING]
    aggregated = []
    if numeric:
        aggregated = draw(st.lists(st.sampled_from(numeric), unique=True, max_size=1))
    fold = alg.Fold(
        left,
        right,
        predicate(draw, scopes),
        predicate(draw, scopes, depth=1),
        tuple(_assign(draw, name, typ, scopes) for name, typ in aggregated),
    )
    try:
        fold.attributes  # noqa: B018 - schema inference validates the operands
    except AlgebraError:
        return left
    return fold


@st.composite
def input_streams(draw: st.DrawFn, max_events: int = 30) -> dict[str, list[Event]]:
    """Events of S, T and U: durations, simultaneous ends, few distinct values."""
    out: dict[str, list[Event]] = {name: [] for name in SCHEMAS}
    half = st.integers(max_events // 2, max_events)
    count = draw(st.one_of(st.integers(0, max_events), half, half))
    for _ in range(count):
        stream = draw(st.sampled_from(sorted(SCHEMAS)))
        t1 = draw(st.integers(0, 10))
        t0 = t1 - draw(st.sampled_from([0, 0, 0, 1, 3]))
        values: dict[str, object] = {"k": draw(st.sampled_from(KEYS))}
        if stream == "U":
            values["w"] = draw(st.sampled_from([0.5, 1.0, 2.5]))
        else:
            values["v"] = draw(st.integers(0, 4))
        out[stream].append(Event.of(stream, t0, t1, values))  # type: ignore[arg-type]
    return out
