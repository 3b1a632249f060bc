"""The CEL syntax tree and its printer (docs/language.md, "Grammar").

The tree mirrors the text: stream references, FILTER, NEXT, FOLD, UNION,
SELECT and PUBLISH.  Predicates and terms inside braces are the data types of
:mod:`cesar.automata.terms`.  :func:`format_query` prints a tree as CEL text that
parses back to an equal tree, adding parentheses only where the grammar
needs them.

>>> from cesar.automata.terms import Attr, Cmp, Scope
>>> q = Query(NextExpr(StreamRef("Stock"), StreamRef("Stock"),
...           Cmp("=", Attr(Scope.LEFT, "Name"), Attr(Scope.RIGHT, "Name"))), "Pairs")
>>> format_query(q)
'Stock NEXT{$1.Name = $2.Name} Stock PUBLISH Pairs'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import assert_never

from cesar.automata.terms import Call, Leaf, Pos, Pred, Term, map_pred, map_term, to_cel


def position() -> Pos:
    return field(default=None, compare=False, hash=False, repr=False)


@dataclass(frozen=True, slots=True)
class StreamRef:
    """A stream read by name: an input stream or another subscription's PUBLISHed stream."""

    name: str
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class FilterExpr:
    """``FILTER{pred} operand``: selection σ."""

    pred: Pred
    operand: Expr
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class NextExpr:
    """``left NEXT{pred} right``: conditional sequence ;θ (``pred`` None when empty)."""

    left: Expr
    right: Expr
    pred: Pred | None
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Agg:
    """``term AS name`` inside FOLD: an aggregate recomputed at every step."""

    term: Term
    name: str
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class FoldExpr:
    """``left FOLD{step, keep, aggs} right``: iteration μ."""

    left: Expr
    right: Expr
    step: Pred | None
    keep: Pred | None
    aggs: tuple[Agg, ...]
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class UnionExpr:
    """``left UNION right``: union ∪ of two queries with compatible schemas."""

    left: Expr
    right: Expr
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Star:
    """``*`` in a SELECT list: every attribute of the source."""

    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Item:
    """``term [AS alias]`` in a SELECT list; without alias the term is a bare attribute."""

    term: Term
    alias: str | None
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class SelectExpr:
    """``SELECT items FROM source``: projection, renaming and attribute introduction."""

    items: tuple[Star | Item, ...]
    source: Expr
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class WithinExpr:
    """``operand WITHIN window``: the operand's events spanning at most ``window``.

    Sugar for ``FILTER{DUR <= window + 1} operand`` — ``t1 - t0 <= window``,
    where DUR counts both ends — which the translation pushes into the
    operand's NEXT and FOLD predicates, so partial matches end with the window.
    ``window`` is a duration literal or an int constant (ticks).
    """

    operand: Expr
    window: Term
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Query:
    """A whole query: an expression and the stream it PUBLISHes to (None if unnamed)."""

    expr: Expr
    publish: str | None
    pos: Pos = position()


Expr = StreamRef | FilterExpr | NextExpr | FoldExpr | UnionExpr | SelectExpr | WithinExpr | Query


def _unary(expr: Expr) -> str:
    if isinstance(expr, (StreamRef, FilterExpr)):
        return format_query(expr)
    return f"({format_query(expr)})"


def _stream(expr: Expr) -> str:
    if isinstance(expr, (UnionExpr, SelectExpr, WithinExpr, Query)):
        return f"({format_query(expr)})"
    return format_query(expr)


def _opt(pred: Pred | None) -> str:
    return "" if pred is None else to_cel(pred)


def format_query(node: Expr) -> str:
    """Print a query or sub-expression as CEL text."""
    if isinstance(node, StreamRef):
        return node.name
    if isinstance(node, FilterExpr):
        return f"FILTER{{{to_cel(node.pred)}}} {_unary(node.operand)}"
    if isinstance(node, NextExpr):
        return f"{_stream(node.left)} NEXT{{{_opt(node.pred)}}} {_unary(node.right)}"
    if isinstance(node, FoldExpr):
        aggs = ", ".join(f"{to_cel(agg.term)} AS {agg.name}" for agg in node.aggs)
        braces = f"{_opt(node.step)}, {_opt(node.keep)}, {aggs}".rstrip()
        return f"{_stream(node.left)} FOLD{{{braces}}} {_unary(node.right)}"
    if isinstance(node, UnionExpr):
        right = node.right
        rtext = (
            f"({format_query(right)})"
            if isinstance(right, (UnionExpr, Query))
            else (format_query(right))
        )
        left = (
            f"({format_query(node.left)})"
            if isinstance(node.left, Query)
            else (format_query(node.left))
        )
        return f"{left} UNION {rtext}"
    if isinstance(node, SelectExpr):
        items = ", ".join(
            "*"
            if isinstance(item, Star)
            else to_cel(item.term) + ("" if item.alias is None else f" AS {item.alias}")
            for item in node.items
        )
        source = node.source
        text = format_query(source) if isinstance(source, WithinExpr) else _stream(source)
        return f"SELECT {items} FROM {text}"
    if isinstance(node, WithinExpr):
        return f"{_stream(node.operand)} WITHIN {to_cel(node.window)}"
    body = format_query(node.expr)
    if isinstance(node.expr, Query):
        body = f"({body})"
    return body if node.publish is None else f"{body} PUBLISH {node.publish}"


def map_calls(expr: Expr, calls: Callable[[Call], Term | None]) -> Expr:
    """``expr`` with each function call ``calls`` replaces (None: kept, its arguments mapped)
    replaced, in every predicate, aggregate and SELECT item."""

    def keep(leaf: Leaf) -> Term:
        return leaf

    def pred(p: Pred | None) -> Pred | None:
        return None if p is None else map_pred(p, keep, calls)

    match expr:
        case StreamRef():
            return expr
        case FilterExpr():
            mapped = map_pred(expr.pred, keep, calls)
            return replace(expr, pred=mapped, operand=map_calls(expr.operand, calls))
        case NextExpr():
            left, right = map_calls(expr.left, calls), map_calls(expr.right, calls)
            return replace(expr, left=left, right=right, pred=pred(expr.pred))
        case FoldExpr():
            aggs = tuple(replace(a, term=map_term(a.term, keep, calls)) for a in expr.aggs)
            left, right = map_calls(expr.left, calls), map_calls(expr.right, calls)
            step, kept = pred(expr.step), pred(expr.keep)
            return replace(expr, left=left, right=right, step=step, keep=kept, aggs=aggs)
        case UnionExpr():
            return replace(
                expr, left=map_calls(expr.left, calls), right=map_calls(expr.right, calls)
            )
        case SelectExpr():
            items = tuple(
                item
                if isinstance(item, Star)
                else replace(item, term=map_term(item.term, keep, calls))
                for item in expr.items
            )
            return replace(expr, items=items, source=map_calls(expr.source, calls))
        case WithinExpr():
            return replace(expr, operand=map_calls(expr.operand, calls))
        case Query():
            return replace(expr, expr=map_calls(expr.expr, calls))
        case _:
            assert_never(expr)
