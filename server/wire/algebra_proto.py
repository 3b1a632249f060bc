"""The ``cesar.v1.Algebra`` message ↔ :mod:`cesar.automata.algebra`, typed like CEL.

A programmatic client can subscribe with the algebra itself instead of CEL
text.  :func:`from_algebra` checks the message the way the CEL translator
checks a query — every attribute reference against its operand's schema and
scope, every predicate and term typed, predicates put in canonical form — and
raises :class:`AlgebraMessageError` naming the path of the offending node
(``algebra.next.left.select.predicate``).  :func:`to_algebra` is its inverse.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import assert_never

from cesar.automata import algebra as alg
from cesar.automata.compiler import CompiledQuery, StreamExistsError, compile_expr
from cesar.automata.errors import CelError
from cesar.automata.normal import DnfLimitError, canonical
from cesar.automata.schema import AttrType, StreamSchema, TimeUnit
from cesar.automata.terms import (
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
)
from cesar.automata.typecheck import assignable, check_pred, infer_type
from cesar.server.wire.convert import to_value, value_of
from cesar.v1 import cesar_pb2 as pb

_SCOPES = {
    pb.SCOPE_EVENT: Scope.EVENT,
    pb.SCOPE_LEFT: Scope.LEFT,
    pb.SCOPE_RIGHT: Scope.RIGHT,
    pb.SCOPE_STATE: Scope.STATE,
}
_SCOPE_NUMBERS = {scope: number for number, scope in _SCOPES.items()}
_KINDS = {bool: AttrType.BOOL, int: AttrType.INT, float: AttrType.FLOAT, str: AttrType.STRING}

Scopes = Mapping[Scope, Mapping[str, AttrType]]


class AlgebraMessageError(ValueError):
    """An algebra message that does not describe a well-typed expression; names the path."""


def _fail(path: str, message: str) -> AlgebraMessageError:
    return AlgebraMessageError(f"{path}: {message}")


def _term(message: pb.Term, path: str) -> Term:
    kind = message.WhichOneof("kind")
    if kind == "constant":
        value = value_of(message.constant)
        if value is None:
            raise _fail(f"{path}.constant", "value not set")
        if isinstance(value, float) and not math.isfinite(value):
            raise _fail(f"{path}.constant", f"{value} is not a finite number")
        return Const(value, _KINDS[type(value)])  # type: ignore[arg-type]
    if kind == "attribute":
        if not message.attribute.name:
            raise _fail(f"{path}.attribute", "name not set")
        scope = _SCOPES.get(message.attribute.scope)
        if scope is None:
            known = ", ".join(pb.Scope.Name(n) for n in _SCOPES)
            raise _fail(
                f"{path}.attribute.scope", f"unknown scope {message.attribute.scope} ({known})"
            )
        return Attr(scope, message.attribute.name)
    if kind == "dur":
        return Dur()
    if kind == "event_dur":
        return EventDur()
    if kind == "arithmetic":
        a = message.arithmetic
        if a.op not in ("+", "-", "*", "/", "%", "^"):
            raise _fail(f"{path}.arithmetic.op", f"unknown operator {a.op!r}")
        return Arith(
            a.op,
            _term(a.left, f"{path}.arithmetic.left"),
            _term(a.right, f"{path}.arithmetic.right"),
        )
    if kind == "negate":
        return Neg(_term(message.negate, f"{path}.negate"))
    if kind == "call":
        args = tuple(
            _term(arg, f"{path}.call.args[{i}]") for i, arg in enumerate(message.call.args)
        )
        return Call(message.call.name.upper(), args)
    raise _fail(path, "term not set")


def _pred(message: pb.Predicate, path: str) -> Pred:
    kind = message.WhichOneof("kind")
    if kind == "compare":
        c = message.compare
        if c.op not in ("=", "!=", "<", "<=", ">", ">="):
            raise _fail(f"{path}.compare.op", f"unknown operator {c.op!r}")
        return Cmp(
            c.op, _term(c.left, f"{path}.compare.left"), _term(c.right, f"{path}.compare.right")
        )
    if kind in ("all", "any"):
        group = getattr(message, kind)
        if not group.items:
            raise _fail(f"{path}.{kind}", "needs at least one item")
        items = tuple(_pred(p, f"{path}.{kind}.items[{i}]") for i, p in enumerate(group.items))
        return And(items) if kind == "all" else Or(items)
    if kind == "negate":
        return Not(_pred(message.negate, f"{path}.negate"))
    if kind == "truth":
        return Truth(message.truth)
    raise _fail(path, "predicate not set")


def _resolver(scopes: Scopes, path: str) -> Callable[[Attr], AttrType]:
    def resolve(attr: Attr) -> AttrType:
        available = scopes.get(attr.scope)
        if available is None:
            allowed = ", ".join(s.name for s in scopes)
            raise _fail(path, f"scope {attr.scope.name} is not available here (use {allowed})")
        typ = available.get(attr.name)
        if typ is None:
            names = ", ".join(available) or "none"
            raise _fail(path, f"unknown attribute {attr.name} in scope {attr.scope.name} ({names})")
        return typ

    return resolve


def _checked_pred(message: pb.Predicate, scopes: Scopes, path: str, present: bool) -> Pred:
    if not present:
        return TRUE
    pred = _pred(message, path)
    try:
        check_pred(pred, _resolver(scopes, path))
    except CelError as exc:
        raise _fail(path, exc.message) from None
    return canonical(pred)


def _typed(term: Term, scopes: Scopes, path: str) -> AttrType:
    try:
        return infer_type(term, _resolver(scopes, path))
    except CelError as exc:
        raise _fail(path, exc.message) from None


def _declared(assignment: pb.Assignment, typ: AttrType, where: str) -> AttrType:
    """The assignment's declared type, checked against its term's type ``typ``."""
    if not assignment.type:
        return typ
    try:
        declared = AttrType(assignment.type)
    except ValueError:
        raise _fail(f"{where}.type", f"unknown type {assignment.type!r}") from None
    if not assignable(typ, declared):
        raise _fail(where, f"{assignment.name} is {declared.value} but its term is {typ.value}")
    return declared


class _Reader:
    def __init__(self, schemas: Mapping[str, StreamSchema]) -> None:
        self.schemas = schemas
        self.reads: set[str] = set()
        self.units: set[TimeUnit] = set()

    def expr(self, message: pb.Algebra, path: str) -> alg.Expr:
        try:
            return self._expr(message, path)
        except alg.AlgebraError as exc:
            raise _fail(path, str(exc)) from None

    def _expr(self, message: pb.Algebra, path: str) -> alg.Expr:
        op = message.WhichOneof("op")
        here = f"{path}.{op}"
        if op == "stream":
            schema = self.schemas.get(message.stream.name)
            if schema is None:
                raise _fail(here, f"unknown stream {message.stream.name!r}")
            self.reads.add(schema.name)
            self.units.add(schema.unit)
            return alg.Source(schema.name, schema.attributes)
        if op == "select":
            operand = self.expr(message.select.input, f"{here}.input")
            scopes = {Scope.EVENT: dict(operand.attributes)}
            pred = _checked_pred(message.select.predicate, scopes, f"{here}.predicate", True)
            return alg.Select(operand, pred)
        if op == "project":
            operand = self.expr(message.project.input, f"{here}.input")
            out: alg.Expr = alg.Project(operand, tuple(message.project.keep))
        elif op == "rename":
            operand = self.expr(message.rename.input, f"{here}.input")
            pairs = tuple((r.old_name, r.new_name) for r in message.rename.renamings)
            out = alg.Rename(operand, pairs)
        elif op == "introduce":
            operand = self.expr(message.introduce.input, f"{here}.input")
            scopes = {Scope.EVENT: dict(operand.attributes)}
            assigns = []
            for i, a in enumerate(message.introduce.assignments):
                where = f"{here}.assignments[{i}]"
                term = _term(a.term, f"{where}.term")
                typ = _declared(a, _typed(term, scopes, where), where)
                assigns.append(alg.Assign(a.name, term, typ))
            out = alg.Introduce(operand, tuple(assigns))
        elif op == "union":
            left = self.expr(message.union.left, f"{here}.left")
            out = alg.Union(left, self.expr(message.union.right, f"{here}.right"))
        elif op == "next":
            n = message.next
            left, right = self.expr(n.left, f"{here}.left"), self.expr(n.right, f"{here}.right")
            scopes = {Scope.LEFT: dict(left.attributes), Scope.RIGHT: dict(right.attributes)}
            pred = _checked_pred(n.predicate, scopes, f"{here}.predicate", n.HasField("predicate"))
            out = alg.Seq(left, right, pred)
        elif op == "fold":
            out = self._fold(message.fold, here)
        else:
            raise _fail(path, "operator not set")
        _ = out.attributes  # the operator checks its operands' schemas here
        return out

    def _fold(self, f: pb.FoldOp, here: str) -> alg.Expr:
        left, right = self.expr(f.left, f"{here}.left"), self.expr(f.right, f"{here}.right")
        left_types = dict(left.attributes)
        scopes = {
            Scope.LEFT: left_types,
            Scope.STATE: left_types,
            Scope.RIGHT: dict(right.attributes),
        }
        step = _checked_pred(f.step, scopes, f"{here}.step", f.HasField("step"))
        keep = _checked_pred(f.keep, scopes, f"{here}.keep", f.HasField("keep"))
        aggs = []
        for i, a in enumerate(f.aggregates):
            where = f"{here}.aggregates[{i}]"
            term = _term(a.term, f"{where}.term")
            typ = _typed(term, scopes, where)
            target = left_types.get(a.name)
            if target is None or not assignable(typ, target):
                raise _fail(where, f"{a.name} must be a left attribute that can hold {typ.value}")
            aggs.append(alg.Assign(a.name, term, target))
        return alg.Fold(left, right, step, keep, tuple(aggs))


def from_algebra(
    message: pb.Algebra, schemas: Mapping[str, StreamSchema], name: str
) -> tuple[alg.Expr, StreamSchema, frozenset[str]]:
    """(expression, output schema named ``name``, streams read); raise AlgebraMessageError."""
    reader = _Reader(schemas)
    expr = reader.expr(message, "algebra")
    if len(reader.units) > 1:
        raise _fail("algebra", "the streams read count time in different units")
    return expr, StreamSchema(name, expr.attributes, reader.units.pop()), frozenset(reader.reads)


def _to_term(term: Term) -> pb.Term:
    match term:
        case Const():
            return pb.Term(constant=to_value(term.value))
        case Attr():
            scope = _SCOPE_NUMBERS[term.scope]
            return pb.Term(attribute=pb.AttributeRef(scope=scope, name=term.name))
        case Dur():
            return pb.Term(dur=True)
        case EventDur():
            return pb.Term(event_dur=True)
        case Arith():
            left, right = _to_term(term.left), _to_term(term.right)
            return pb.Term(arithmetic=pb.Arithmetic(op=term.op, left=left, right=right))
        case Neg():
            return pb.Term(negate=_to_term(term.operand))
        case Call():
            args = [_to_term(a) for a in term.args]
            return pb.Term(call=pb.FunctionCall(name=term.name, args=args))
        case DurLit() | Param():
            raise TypeError(f"{term!r} is compiled away before a query travels")
        case _:
            assert_never(term)


def to_predicate(pred: Pred) -> pb.Predicate:
    """The message for a predicate."""
    match pred:
        case Cmp():
            left, right = _to_term(pred.left), _to_term(pred.right)
            return pb.Predicate(compare=pb.Comparison(op=pred.op, left=left, right=right))
        case And():
            return pb.Predicate(all=pb.Predicates(items=[to_predicate(p) for p in pred.items]))
        case Or():
            return pb.Predicate(any=pb.Predicates(items=[to_predicate(p) for p in pred.items]))
        case Not():
            return pb.Predicate(negate=to_predicate(pred.item))
        case Truth():
            return pb.Predicate(truth=pred.value)
        case _:
            assert_never(pred)


def _assignments(assigns: tuple[alg.Assign, ...]) -> list[pb.Assignment]:
    return [pb.Assignment(name=a.name, term=_to_term(a.term), type=a.type.value) for a in assigns]


def to_algebra(expr: alg.Expr) -> pb.Algebra:
    """The message for an algebra expression (:func:`from_algebra`'s inverse)."""
    if isinstance(expr, alg.Source):
        return pb.Algebra(stream=pb.StreamRef(name=expr.name))
    if isinstance(expr, alg.Select):
        return pb.Algebra(
            select=pb.SelectOp(input=to_algebra(expr.input), predicate=to_predicate(expr.pred))
        )
    if isinstance(expr, alg.Project):
        return pb.Algebra(project=pb.ProjectOp(input=to_algebra(expr.input), keep=expr.keep))
    if isinstance(expr, alg.Rename):
        pairs = [pb.Renaming(old_name=old, new_name=new) for old, new in expr.mapping]
        return pb.Algebra(rename=pb.RenameOp(input=to_algebra(expr.input), renamings=pairs))
    if isinstance(expr, alg.Introduce):
        return pb.Algebra(
            introduce=pb.IntroduceOp(
                input=to_algebra(expr.input), assignments=_assignments(expr.assignments)
            )
        )
    if isinstance(expr, alg.Union):
        return pb.Algebra(
            union=pb.UnionOp(left=to_algebra(expr.left), right=to_algebra(expr.right))
        )
    if isinstance(expr, alg.Seq):
        return pb.Algebra(
            next=pb.NextOp(
                left=to_algebra(expr.left),
                right=to_algebra(expr.right),
                predicate=to_predicate(expr.pred),
            )
        )
    return pb.Algebra(
        fold=pb.FoldOp(
            left=to_algebra(expr.left),
            right=to_algebra(expr.right),
            step=to_predicate(expr.step),
            keep=to_predicate(expr.keep),
            aggregates=_assignments(expr.aggregates),
        )
    )


def compile_algebra(
    message: pb.Algebra, schemas: Mapping[str, StreamSchema], name: str
) -> CompiledQuery:
    """Check and compile an algebra message into automata, as ``compile_query`` does for CEL."""
    expr, output, reads = from_algebra(message, schemas, name)
    try:
        return compile_expr(expr, output, reads, schemas)
    except StreamExistsError as exc:
        raise AlgebraMessageError(str(exc)) from None
    except DnfLimitError as exc:
        raise AlgebraMessageError(f"algebra: the compiled automaton's {exc}") from None
