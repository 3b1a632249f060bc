"""Hypothesis strategies shared by the property tests: terms, predicates, queries, streams."""

from __future__ import annotations

import operator

from hypothesis import strategies as st

from cesar.automata.ast import (
    Agg,
    FilterExpr,
    FoldExpr,
    Item,
    NextExpr,
    Query,
    SelectExpr,
    Star,
    StreamRef,
    UnionExpr,
    WithinExpr,
)
from cesar.automata.parser import DURATION_UNITS, KEYWORDS
from cesar.automata.schema import INT_MAX, AttrType, Event
from cesar.automata.terms import (
    ARITH_OPS,
    CMP_OPS,
    And,
    Arith,
    Attr,
    Call,
    Cmp,
    Const,
    Dur,
    DurLit,
    Neg,
    Not,
    Or,
    Scope,
    Truth,
)

names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda n: n.upper() not in KEYWORDS
)

# ------------------------------------------------ syntax trees (parser codomain)

syntax_consts = st.one_of(
    st.integers(0, INT_MAX).map(lambda v: Const(v, AttrType.INT)),
    st.floats(0, 1e300, allow_nan=False, allow_infinity=False).map(
        lambda v: Const(v, AttrType.FLOAT)
    ),
    st.text(max_size=5).map(lambda v: Const(v, AttrType.STRING)),
    st.booleans().map(lambda v: Const(v, AttrType.BOOL)),
)
syntax_leaves = st.one_of(
    syntax_consts,
    st.builds(Attr, st.sampled_from(list(Scope)), names),
    st.just(Dur()),
    st.builds(
        DurLit,
        st.one_of(st.integers(0, 1000), st.sampled_from([0.5, 2.25, 10.0])),
        st.sampled_from(sorted(DURATION_UNITS)),
    ),
)
syntax_terms = st.recursive(
    syntax_leaves,
    lambda inner: st.one_of(
        st.builds(Arith, st.sampled_from(ARITH_OPS), inner, inner),
        st.builds(Neg, inner),
        st.builds(
            Call,
            st.sampled_from(["CONTAINS", "SIMILARITY", "F"]),
            st.lists(inner, max_size=3).map(tuple),
        ),
    ),
    max_leaves=6,
)
syntax_preds = st.recursive(
    st.one_of(
        st.builds(Cmp, st.sampled_from(CMP_OPS), syntax_terms, syntax_terms),
        st.builds(Truth, st.booleans()),
    ),
    lambda inner: st.one_of(
        st.builds(And, st.lists(inner, min_size=2, max_size=3).map(tuple)),
        st.builds(Or, st.lists(inner, min_size=2, max_size=3).map(tuple)),
        st.builds(Not, inner),
    ),
    max_leaves=5,
)
optional_preds = st.none() | syntax_preds
windows = st.one_of(
    st.integers(0, 100).map(lambda v: Const(v, AttrType.INT)),
    st.builds(DurLit, st.integers(0, 100), st.sampled_from(sorted(DURATION_UNITS))),
)
select_items = st.one_of(
    st.just(Star()),
    st.builds(Item, st.builds(Attr, st.just(Scope.EVENT), names), st.none() | names),
    st.builds(Item, syntax_terms, names),
)


def _extend(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.builds(FilterExpr, syntax_preds, inner),
        st.builds(NextExpr, inner, inner, optional_preds),
        st.builds(
            FoldExpr,
            inner,
            inner,
            optional_preds,
            optional_preds,
            st.lists(st.builds(Agg, syntax_terms, names), max_size=2).map(tuple),
        ),
        st.builds(UnionExpr, inner, inner),
        st.builds(SelectExpr, st.lists(select_items, min_size=1, max_size=3).map(tuple), inner),
        st.builds(WithinExpr, inner, windows),
        st.builds(Query, inner, names),
    )


syntax_exprs = st.recursive(st.builds(StreamRef, names), _extend, max_leaves=5)
queries = st.builds(Query, syntax_exprs, st.none() | names)

# ------------------------------------------ well-typed predicates over one event

INT_ATTRS = ("x", "y")
FLOAT_ATTRS = ("f",)
STRING_ATTRS = ("s",)


def _ev(name: str) -> Attr:
    return Attr(Scope.EVENT, name)


numeric_leaves = st.one_of(
    st.integers(-3, 3).map(lambda v: Const(v, AttrType.INT)),
    st.sampled_from([-1.5, 0.0, 0.5, 2.0]).map(lambda v: Const(v, AttrType.FLOAT)),
    st.sampled_from(INT_ATTRS + FLOAT_ATTRS).map(_ev),
    st.just(Dur()),
)
string_leaves = st.one_of(
    st.sampled_from(STRING_ATTRS).map(_ev),
    st.sampled_from(["", "a", "b", "ab", "Ab"]).map(lambda v: Const(v, AttrType.STRING)),
)
string_terms = st.one_of(
    string_leaves,
    st.builds(Call, st.sampled_from(["LOWER", "UPPER"]), string_leaves.map(lambda t: (t,))),
)
"""Strings, and the library's functions of strings (automata/functions.py)."""
digits = st.integers(-1, 2).map(lambda v: Const(v, AttrType.INT))
numeric_terms = st.recursive(
    numeric_leaves
    | st.builds(Call, st.just("LENGTH"), string_terms.map(lambda t: (t,)))
    | st.builds(
        Call,
        st.sampled_from(["CONTAINS", "STARTS_WITH", "ENDS_WITH"]),
        st.tuples(string_terms, string_terms),
    ),
    lambda inner: st.one_of(
        st.builds(Arith, st.sampled_from(ARITH_OPS), inner, inner),
        st.builds(Neg, inner),
        st.builds(
            Call,
            st.sampled_from(["ABS", "FLOOR", "CEIL", "SQRT", "LN", "LOG", "EXP", "ROUND"]),
            inner.map(lambda t: (t,)),
        ),
        st.builds(Call, st.just("ROUND"), st.tuples(inner, digits)),
        st.builds(Call, st.just("POW"), st.tuples(inner, inner)),
        st.builds(
            Call,
            st.sampled_from(["LEAST", "GREATEST"]),
            st.lists(inner, min_size=2, max_size=3).map(tuple),
        ),
    ),
    max_leaves=4,
)
"""Numbers: arithmetic, and the library's functions of numbers and of strings."""
typed_atoms = st.one_of(
    st.builds(Cmp, st.sampled_from(CMP_OPS), numeric_terms, numeric_terms),
    st.builds(Cmp, st.sampled_from(CMP_OPS), string_terms, string_terms),
    st.builds(Truth, st.booleans()),
)
typed_preds = st.recursive(
    typed_atoms,
    lambda inner: st.one_of(
        st.builds(And, st.lists(inner, min_size=2, max_size=3).map(tuple)),
        st.builds(Or, st.lists(inner, min_size=2, max_size=3).map(tuple)),
        st.builds(Not, inner),
    ),
    max_leaves=6,
)
event_values = st.fixed_dictionaries(
    {
        "x": st.integers(-3, 3),
        "y": st.integers(-3, 3),
        "f": st.sampled_from([-1.5, 0.0, 0.5, 2.0]),
        "s": st.sampled_from(["", "a", "b", "ab"]),
    }
)

# --------------------------------------------------------------- event streams


@st.composite
def streams(draw: st.DrawFn, name: str = "S", max_events: int = 8) -> list[Event]:
    """Events of ``S(k:string, v:int)`` with durations and simultaneous end times."""
    events = []
    for _ in range(draw(st.integers(0, max_events))):
        t1 = draw(st.integers(0, 8))
        t0 = t1 - draw(st.sampled_from([0, 0, 0, 1, 3]))
        values = {"k": draw(st.sampled_from(["a", "b"])), "v": draw(st.integers(0, 4))}
        events.append(Event.of(name, t0, t1, values))
    return sorted(events, key=lambda e: e.t1)


OPS = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
"""The model of each comparison operator (``index.ranges.compare`` is checked against it)."""
