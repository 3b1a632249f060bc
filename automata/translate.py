"""CEL syntax tree → CESAR algebra (docs/language.md).

Resolves stream names against the known stream schemas, rewrites WITHIN into DUR bounds
(:func:`windowed`), gives every attribute reference its
meaning in its scope, applies the original's ``_1`` naming after NEXT and
FOLD, compiles duration constants into ticks of the streams' time unit,
type-checks every term and predicate, and bounds the size of every
predicate's DNF.  Every error is a :class:`~cesar.automata.errors.CelSemanticError`
at the position of the offending name or term.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction

from cesar.automata import algebra as alg
from cesar.automata.ast import (
    Agg,
    Expr,
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
from cesar.automata.errors import CelSemanticError
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.normal import DEFAULT_DNF_LIMIT, NO_OPAQUE, DnfLimitError, canonical, dnf
from cesar.automata.parser import DURATION_UNITS
from cesar.automata.schema import AttrType, StreamSchema, TimeUnit, Value
from cesar.automata.terms import (
    And,
    Arith,
    Attr,
    Cmp,
    Const,
    Dur,
    DurLit,
    Leaf,
    Pos,
    Pred,
    Scope,
    Term,
    Truth,
    map_pred,
    map_term,
)
from cesar.automata.typecheck import assignable, check_pred, infer_type

DURATION_SECONDS = {
    "SEC": 1,
    "MIN": 60,
    "HOUR": 3600,
    "DAY": 86400,
    "WEEK": 7 * 86400,
    "MONTH": 30 * 86400,
    "YEAR": 365 * 86400,
}


@dataclass(frozen=True)
class Options:
    """Compiler settings: the function registry, the DNF conjunct limit, and the constants
    never to fold (:class:`~cesar.automata.normal.OpaqueFolded`; the shape cache's sentinels)."""

    functions: FunctionRegistry = DEFAULT_FUNCTIONS
    dnf_limit: int = DEFAULT_DNF_LIMIT
    opaque: frozenset[Value] = NO_OPAQUE


DEFAULT_OPTIONS = Options()


@dataclass(frozen=True)
class Translation:
    """A query in algebra form with the stream it publishes and its schema."""

    algebra: alg.Expr
    output: StreamSchema
    reads: frozenset[str]


def stream_refs(expr: Expr) -> list[StreamRef]:
    """Every stream reference in a query, in textual order."""
    if isinstance(expr, StreamRef):
        return [expr]
    if isinstance(expr, FilterExpr):
        return stream_refs(expr.operand)
    if isinstance(expr, SelectExpr):
        return stream_refs(expr.source)
    if isinstance(expr, Query):
        return stream_refs(expr.expr)
    if isinstance(expr, WithinExpr):
        return stream_refs(expr.operand)
    return stream_refs(expr.left) + stream_refs(expr.right)


def windowed(node: WithinExpr) -> Expr:
    """``operand WITHIN w`` as plain CEL: ``DUR <= w + 1`` conjoined to every NEXT and FOLD
    step predicate along the operand's chain of sequences, or a FILTER on an operand that is
    no sequence.

    Each is the same as one FILTER on the whole: a sequence's events only grow later, so a step
    past the window is never followed by one within it; pushed in, the bound lets the engine
    drop partial matches when the window has passed (their deadline).

    >>> from cesar.automata.ast import format_query
    >>> from cesar.automata.parser import parse_query
    >>> format_query(windowed(parse_query("S NEXT{$2.x > 1} S WITHIN 10 MIN").expr))
    'S NEXT{$2.x > 1 AND DUR <= 10 MIN + 1} S'
    """
    bound = Cmp("<=", Dur(node.pos), Arith("+", node.window, Const(1, AttrType.INT)), node.pos)

    def conjoin(pred: Pred | None) -> Pred:
        return bound if pred is None else And((pred, bound), node.pos)

    def push(expr: Expr) -> Expr:
        if isinstance(expr, NextExpr):
            return replace(expr, left=push(expr.left), pred=conjoin(expr.pred))
        if isinstance(expr, FoldExpr):
            return replace(expr, left=push(expr.left), step=conjoin(expr.step))
        return expr

    pushed = push(node.operand)
    return pushed if pushed is not node.operand else FilterExpr(bound, node.operand, node.pos)


def translate(
    query: Query,
    schemas: Mapping[str, StreamSchema],
    default_name: str | None = None,
    options: Options = DEFAULT_OPTIONS,
) -> Translation:
    """Translate a parsed query; ``default_name`` names its output if it has no PUBLISH."""
    refs = stream_refs(query.expr)
    unit: TimeUnit | None = None
    unit_from: StreamRef | None = None
    for ref in refs:
        schema = schemas.get(ref.name)
        if schema is None:
            raise CelSemanticError(
                f"unknown stream {ref.name} (known streams: {_some(schemas)})", ref.pos
            )
        if unit is None:
            unit, unit_from = schema.unit, ref
        elif schema.unit is not unit:
            assert unit_from is not None
            raise CelSemanticError(
                f"stream {ref.name} counts time in {schema.unit.name.lower()} but "
                f"{unit_from.name} in {unit.name.lower()}; a query's streams must share a unit",
                ref.pos,
            )
    assert unit is not None
    name = query.publish or default_name
    if name is None:
        raise CelSemanticError("the query needs PUBLISH name", query.pos)
    expr = _Translator(schemas, unit, options).expr(query.expr)
    zone = common_zone(schemas[r.name] for r in refs)
    return Translation(
        expr, StreamSchema(name, expr.attributes, unit, zone), frozenset(r.name for r in refs)
    )


def common_zone(schemas: Iterable[StreamSchema]) -> str:
    """The time zone of what a query publishes: its streams' zone if they share one, else
    UTC."""
    zones = {schema.zone for schema in schemas}
    return zones.pop() if len(zones) == 1 else "UTC"


SHOWN_STREAMS = 20
"""Known streams an error names: a server may hold a stream per subscription."""


def _some(names: Iterable[str]) -> str:
    """The first :data:`SHOWN_STREAMS` of ``names`` in order, and how many more."""
    ordered = sorted(names)
    shown = ", ".join(ordered[:SHOWN_STREAMS]) or "none"
    extra = len(ordered) - SHOWN_STREAMS
    return f"{shown} and {extra} more" if extra > 0 else shown


class _Translator:
    def __init__(
        self, schemas: Mapping[str, StreamSchema], unit: TimeUnit, options: Options
    ) -> None:
        self.schemas = schemas
        self.unit = unit
        self.options = options

    # -------------------------------------------------------------- streams

    def expr(self, node: Expr) -> alg.Expr:
        if isinstance(node, StreamRef):
            return alg.Source(node.name, self.schemas[node.name].attributes)
        if isinstance(node, Query):
            raise CelSemanticError(
                "PUBLISH is only allowed at the end of the whole query; subscribe the inner "
                "query on its own to publish it",
                node.pos,
            )
        if isinstance(node, FilterExpr):
            return self.filter(node)
        if isinstance(node, NextExpr):
            return self.next(node)
        if isinstance(node, FoldExpr):
            return self.fold(node)
        if isinstance(node, UnionExpr):
            return self.union(node)
        if isinstance(node, WithinExpr):
            return self.expr(windowed(node))
        return self.select(node)

    def filter(self, node: FilterExpr) -> alg.Expr:
        source = self.expr(node.operand)
        scopes = {Scope.EVENT: dict(source.attributes)}
        pred = self.pred(node.pred, scopes, "FILTER")
        return alg.Select(source, pred)

    def next(self, node: NextExpr) -> alg.Expr:
        left = self.expr(node.left)
        right = self.expr(node.right)
        left_names = dict(left.attributes)
        mapping: dict[str, str] = {}
        if set(left_names) & set(right.names):
            for name in left_names:
                new = alg.first_name(name)
                if new in right.names:
                    raise CelSemanticError(
                        f"after NEXT the left attribute {name} would become {new}, which the "
                        "right operand has too; rename attributes with SELECT ... AS first",
                        node.pos,
                    )
                mapping[name] = new
            left = alg.Rename(left, tuple(mapping.items()))
        scopes = {Scope.LEFT: left_names, Scope.RIGHT: dict(right.attributes)}
        pred = self.pred(node.pred, scopes, "NEXT") if node.pred is not None else Truth(True)
        pred = canonical(
            _rename_scope(pred, Scope.LEFT, mapping), self.options.functions, self.options.opaque
        )
        return alg.Seq(left, right, pred)

    def fold(self, node: FoldExpr) -> alg.Expr:
        left = self.expr(node.left)
        right = self.expr(node.right)
        left_types = dict(left.attributes)
        right_types = dict(right.attributes)
        missing = [name for name in right_types if name not in left_types]
        if missing:
            raise CelSemanticError(
                "FOLD needs every attribute of its right operand on its left; missing on the "
                f"left: {', '.join(missing)} (introduce them with SELECT ... AS)",
                node.pos,
            )
        for name, typ in right_types.items():
            if not assignable(typ, left_types[name]):
                raise CelSemanticError(
                    f"FOLD attribute {name} is {left_types[name].value} on the left but "
                    f"{typ.value} on the right",
                    node.pos,
                )
            first = alg.first_name(name)
            if first in left_types:
                raise CelSemanticError(
                    f"after FOLD the first value of {name} would be named {first}, which "
                    "already exists; rename attributes with SELECT ... AS first",
                    node.pos,
                )
        scopes = {Scope.LEFT: left_types, Scope.STATE: left_types, Scope.RIGHT: right_types}
        step = self.pred(node.step, scopes, "FOLD") if node.step is not None else Truth(True)
        keep = self.pred(node.keep, scopes, "FOLD") if node.keep is not None else Truth(True)
        aggs = tuple(self.aggregate(agg, scopes, right_types) for agg in node.aggs)
        seen: set[str] = set()
        for agg, assign in zip(node.aggs, aggs, strict=True):
            if assign.name in seen:
                raise CelSemanticError(f"aggregate {assign.name} is assigned twice", agg.pos)
            seen.add(assign.name)
        return alg.Fold(left, right, step, keep, aggs)

    def aggregate(
        self,
        agg: Agg,
        scopes: Mapping[Scope, Mapping[str, AttrType]],
        right_types: Mapping[str, AttrType],
    ) -> alg.Assign:
        target = scopes[Scope.LEFT].get(agg.name)
        if target is None:
            raise CelSemanticError(
                f"aggregate {agg.name} must name an attribute of FOLD's left operand; "
                f"introduce it there, e.g. SELECT *, ... AS {agg.name}",
                agg.pos,
            )
        if agg.name in right_types:
            raise CelSemanticError(
                f"aggregate {agg.name} is also an attribute of the right operand, which "
                "already sets it at every step; choose another name",
                agg.pos,
            )
        term = self.term(agg.term, scopes, "FOLD")
        typ = infer_type(term, self._resolver(scopes, "FOLD"), self.options.functions)
        if not assignable(typ, target):
            raise CelSemanticError(
                f"aggregate {agg.name} is {target.value} but its term is {typ.value}",
                agg.term.pos or agg.pos,
            )
        return alg.Assign(agg.name, term, target)

    def union(self, node: UnionExpr) -> alg.Expr:
        left = self.expr(node.left)
        right = self.expr(node.right)
        ltypes, rtypes = dict(left.attributes), dict(right.attributes)
        if ltypes != rtypes:
            only_left = sorted(set(ltypes) - set(rtypes))
            only_right = sorted(set(rtypes) - set(ltypes))
            typed = sorted(n for n in set(ltypes) & set(rtypes) if ltypes[n] is not rtypes[n])
            parts = []
            if only_left:
                parts.append(f"only on the left: {', '.join(only_left)}")
            if only_right:
                parts.append(f"only on the right: {', '.join(only_right)}")
            if typed:
                parts.append(f"typed differently: {', '.join(typed)}")
            raise CelSemanticError(
                f"UNION needs the same attributes on both sides ({'; '.join(parts)})", node.pos
            )
        return alg.Union(left, right)

    def select(self, node: SelectExpr) -> alg.Expr:
        source = self.expr(node.source)
        scopes = {Scope.EVENT: dict(source.attributes)}
        resolve = self._resolver(scopes, "SELECT")
        output: list[str] = []
        positions: dict[str, Pos] = {}
        assigns: list[alg.Assign] = []

        def add(name: str, pos: Pos) -> None:
            if name in positions:
                raise CelSemanticError(f"SELECT produces attribute {name} twice", pos)
            positions[name] = pos
            output.append(name)

        for item in node.items:
            if isinstance(item, Star):
                for name in source.names:
                    add(name, item.pos)
                continue
            assert isinstance(item, Item)
            term = self.term(item.term, scopes, "SELECT")
            typ = infer_type(term, resolve, self.options.functions)
            name = item.alias if item.alias is not None else _bare_name(item)
            add(name, item.pos)
            if not (isinstance(term, Attr) and term.name == name):
                assigns.append(alg.Assign(name, term, typ))
        result: alg.Expr = source
        if assigns:
            result = alg.Introduce(result, tuple(assigns))
        if tuple(output) != result.names:
            result = alg.Project(result, tuple(output))
        return result

    # ---------------------------------------------------- terms, predicates

    def _resolver(
        self, scopes: Mapping[Scope, Mapping[str, AttrType]], where: str
    ) -> Callable[[Attr], AttrType]:
        def resolve(attr: Attr) -> AttrType:
            available = scopes.get(attr.scope)
            if available is None:
                raise CelSemanticError(_scope_message(attr, where, scopes), attr.pos)
            typ = available.get(attr.name)
            if typ is None:
                side = _SIDE[attr.scope]
                names = ", ".join(available) or "none"
                raise CelSemanticError(
                    f"unknown attribute {attr.name}{side} (available: {names})", attr.pos
                )
            return typ

        return resolve

    def term(self, term: Term, scopes: Mapping[Scope, Mapping[str, AttrType]], where: str) -> Term:
        resolved = self._resolve_term(term)
        infer_type(resolved, self._resolver(scopes, where), self.options.functions)
        return resolved

    def pred(self, pred: Pred, scopes: Mapping[Scope, Mapping[str, AttrType]], where: str) -> Pred:
        resolved = self._resolve_pred(pred)
        check_pred(resolved, self._resolver(scopes, where), self.options.functions)
        try:
            dnf(resolved, self.options.dnf_limit, self.options.functions)
        except DnfLimitError as exc:
            raise CelSemanticError(str(exc), pred.pos) from None
        return canonical(resolved, self.options.functions, self.options.opaque)

    def _resolve_pred(self, pred: Pred) -> Pred:
        return map_pred(pred, self._resolve_leaf)

    def _resolve_term(self, term: Term) -> Term:
        return map_term(term, self._resolve_leaf)

    def _resolve_leaf(self, leaf: Leaf) -> Term:
        return self._duration(leaf) if isinstance(leaf, DurLit) else leaf

    def _duration(self, lit: DurLit) -> Const:
        return duration_ticks(lit, self.unit)


def duration_ticks(lit: DurLit, unit: TimeUnit) -> Const:
    """A duration literal in ticks of ``unit``: an int constant when whole, else a float.

    >>> duration_ticks(DurLit(90, "SECONDS"), TimeUnit.MIN)
    Const(value=1.5, type=<AttrType.FLOAT: 'float'>)
    """
    seconds = unit.seconds
    if seconds is None:
        raise CelSemanticError(
            f"duration {lit.amount} {lit.unit} needs streams with a time unit; declare one, "
            "e.g. Stock(...)[min], or give it in ticks without a unit",
            lit.pos,
        )
    unit_seconds = DURATION_SECONDS[DURATION_UNITS[lit.unit.upper()]]
    ticks = Fraction(str(lit.amount)) * unit_seconds / seconds
    if ticks.denominator == 1:
        return Const(int(ticks), AttrType.INT, lit.pos)
    return Const(float(ticks), AttrType.FLOAT, lit.pos)


_SIDE = {
    Scope.EVENT: "",
    Scope.LEFT: " on the left ($1)",
    Scope.RIGHT: " on the right ($2)",
    Scope.STATE: " in the run state ($)",
}


def _scope_message(attr: Attr, where: str, scopes: Mapping[Scope, object]) -> str:
    if where in ("FILTER", "SELECT"):
        return (
            f"{attr.scope.value}.{attr.name}: in {where} write the bare attribute name "
            f"{attr.name}; $1, $2 and $ belong inside NEXT and FOLD braces"
        )
    if attr.scope is Scope.EVENT:
        allowed = (
            "$1.x (left) or $2.x (right)"
            if where == "NEXT"
            else ("$1.x (left as it entered), $.x (run state) or $2.x (right)")
        )
        return f"inside {where} braces attribute {attr.name} needs a scope: {allowed}"
    return f"$.{attr.name}: the run state $ exists only inside FOLD braces; use $1 or $2"


def _bare_name(item: Item) -> str:
    assert isinstance(item.term, Attr)
    return item.term.name


def _rename_scope(pred: Pred, scope: Scope, mapping: Mapping[str, str]) -> Pred:
    """Rewrite attribute references of ``scope`` through ``mapping``."""

    def rename(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr) and leaf.scope is scope:
            return Attr(scope, mapping.get(leaf.name, leaf.name), leaf.pos)
        return leaf

    return map_pred(pred, rename)
