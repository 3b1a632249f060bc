"""From algebra to event automata: the constructions of Sections 3.3–3.5.

:func:`build_automata` turns one algebra expression into event automata, a
pure function of its input.  Linear-plus expressions (Definition 1) become one
automaton, acyclic except for self-loops, with one node per base stream, NEXT
and FOLD (so linear in the query, Theorem 4):

* a base stream ``S`` is the base automaton: one FORWARD edge from the start
  (Figure 3);
* a unary operator is folded into the edges entering the fragment's final node:
  σ conjoins its predicate, α adds assignments, ρ renames and π restricts the
  attribute map (Theorem 3's π ∘ α ∘ ρ ∘ σ; predicates and terms are written
  over the instance's binding and the raw incoming event by substitution);
* ``E1 ;θ F(S)`` adds, at E1's final node, a FILTER edge (∀, "an event that
  would be a successor kills the instance") and a FORWARD edge to a new node
  (Figure 4);
* ``μ(E1, F(S))`` adds at E1's final node a FILTER edge, a REBIND edge that
  updates the run's state and aggregates, and a FORWARD edge that outputs the
  extended run (Figure 5).  The run's first values of the right operand's
  attributes are copied into the binding (``name_1``) as the run enters;
* ``E1 ∪ E2`` shares the start node and merges the final nodes (Figure 6).

A right operand of NEXT or FOLD that is not a unary operator over a stream is
not linear-plus.  Resubscription (Section 3.5) compiles it on its own into an
*internal* automaton publishing ``<name>#<k>``, which the outer automaton reads
like any stream; the list returned has producers before consumers.

>>> from cesar.automata.schema import AttrType as T, StreamSchema
>>> from cesar.automata.algebra import Seq, Rename, Source
>>> s = Source("S", (("x", T.INT),))
>>> [a.name for a in build_automata(Seq(s, Seq(Rename(s, (("x", "y"),)), s)),
...                                 StreamSchema("q", (("x", T.INT), ("y", T.INT))))]
['q#1', 'q']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from cesar.automata.algebra import (
    Assign,
    Expr,
    Fold,
    Introduce,
    Project,
    Rename,
    Select,
    Seq,
    Source,
    Union,
    first_name,
)
from cesar.automata.automaton import Automaton, Edge, EdgeKind, Node, SplitConjunct
from cesar.automata.functions import FunctionRegistry
from cesar.automata.normal import Canonical, split
from cesar.automata.schema import AttrType, StreamSchema, TimeUnit
from cesar.automata.terms import (
    TRUE,
    Arith,
    Attr,
    Const,
    Dur,
    EventDur,
    Leaf,
    Pred,
    Scope,
    Term,
    conjoin,
    map_leaves,
    map_pred,
    map_term,
)
from cesar.automata.translate import DEFAULT_OPTIONS, Options
from cesar.automata.typecheck import infer_type

HIDDEN_FIRST = "@first"
"""Suffix of a binding that keeps an aggregate's value as a FOLD run entered (read as ``$1.x``)."""

INTERNAL_SEPARATOR = "#"
"""Internal streams are named ``<output>#<k>``; ``#`` cannot occur in a CEL name."""

_UNARY = (Select, Project, Rename, Introduce)
_INSTANCE = Scope.LEFT
"""In compiled edges, ``$1`` is the instance's binding and ``Scope.EVENT`` the incoming event."""


@dataclass(frozen=True)
class _Frame:
    """How a row's attributes follow from an instance's binding and the incoming event.

    ``map`` gives each attribute's term and type, ``pred`` the condition for
    the row to exist, ``guards`` the terms that must evaluate without a fault,
    ``dur`` what DUR means for this row.
    """

    map: Mapping[str, tuple[Term, AttrType]]
    pred: Pred
    guards: tuple[Term, ...]
    dur: Term

    def row(self) -> dict[str, Term]:
        return {name: term for name, (term, _) in self.map.items()}

    def with_guards(self, dropped: Sequence[Term]) -> tuple[Term, ...]:
        """The guards plus those of ``dropped`` that can fault and are not guards yet."""
        extra = [t for t in dropped if _can_fault(t) and t not in self.guards]
        return self.guards + tuple(dict.fromkeys(extra))

    def filter_guards(self) -> tuple[Term, ...]:
        """What must compute for an event to belong to this (right operand) row at all."""
        return self.with_guards([term for term, _ in self.map.values()])


def _can_fault(term: Term) -> bool:
    return not isinstance(term, (Attr, Const, Dur, EventDur))


Scopes = Mapping[Scope, Mapping[str, Term]]


def _substitute(scopes: Scopes, dur: Term) -> Callable[[Leaf], Term]:
    """A leaf rewriter: attribute references become the terms computing them, DUR ``dur``."""

    def leaf(item: Leaf) -> Term:
        if isinstance(item, Attr):
            return scopes[item.scope][item.name]
        if isinstance(item, Dur):
            return dur
        return item

    return leaf


def _pred(pred: Pred, scopes: Scopes, dur: Term) -> Pred:
    return map_pred(pred, _substitute(scopes, dur))


def _term(term: Term, scopes: Scopes, dur: Term) -> Term:
    return map_term(term, _substitute(scopes, dur))


def _apply(
    op: Select | Project | Rename | Introduce, frame: _Frame, functions: FunctionRegistry
) -> _Frame:
    """Fold one unary operator into a frame (Theorem 3).

    An assignment substitutes its term where the attribute is read, so an INT term
    assigned to a FLOAT attribute is made a FLOAT term (``term + 0.0``): the algebra
    stores it as a float, and ``a / v`` must divide as floats, not truncate.
    """
    row = {Scope.EVENT: frame.row()}
    if isinstance(op, Select):
        return replace(frame, pred=conjoin(frame.pred, _pred(op.pred, row, frame.dur)))
    if isinstance(op, Project):
        dropped = [term for name, (term, _) in frame.map.items() if name not in op.keep]
        kept = {name: frame.map[name] for name in op.keep}
        return replace(frame, map=kept, guards=frame.with_guards(dropped))
    if isinstance(op, Rename):
        table = dict(op.mapping)
        return replace(frame, map={table.get(k, k): v for k, v in frame.map.items()})
    types = dict(op.input.attributes)
    new: dict[str, tuple[Term, AttrType]] = {}
    for a in op.assignments:
        term = _term(a.term, row, frame.dur)
        if a.type is AttrType.FLOAT:
            typ = infer_type(a.term, lambda attr: types[attr.name], functions)
            if typ is AttrType.INT:
                term = Arith("+", term, Const(0.0, AttrType.FLOAT))
        new[a.name] = (term, a.type)
    overwritten = [frame.map[name][0] for name in new if name in frame.map]
    return replace(frame, map={**frame.map, **new}, guards=frame.with_guards(overwritten))


def _base_frame(source: Source, dur: Term) -> _Frame:
    return _Frame({n: (Attr(Scope.EVENT, n), t) for n, t in source.columns}, TRUE, (), dur)


@dataclass
class _Draft:
    """An edge under construction; unary operators above it rewrite its frame."""

    kind: EdgeKind
    source: int
    target: int
    stream: str
    frame: _Frame


@dataclass
class _Fragment:
    """A partial automaton: its final node and the ∃-edges entering it."""

    end: int
    entering: list[_Draft]


@dataclass
class _Context:
    """What the automata of one expression share: names, options and the output list."""

    name: str
    unit: TimeUnit
    options: Options
    produced: list[Automaton] = field(default_factory=list)
    internal_count: int = 0

    def fresh_stream(self) -> str:
        self.internal_count += 1
        return f"{self.name}{INTERNAL_SEPARATOR}{self.internal_count}"


class _Builder:
    """Builds one automaton; non-linear-plus right operands go to their own builders."""

    def __init__(self, context: _Context) -> None:
        self.context = context
        self.node_count = 1
        self.drafts: list[_Draft] = []

    def new_node(self) -> int:
        self.node_count += 1
        return self.node_count - 1

    def add(self, kind: EdgeKind, source: int, target: int, stream: str, frame: _Frame) -> _Draft:
        draft = _Draft(kind, source, target, stream, frame)
        self.drafts.append(draft)
        return draft

    def fragment(self, expr: Expr) -> _Fragment:
        if isinstance(expr, _UNARY):
            inner = self.fragment(expr.input)
            for draft in inner.entering:
                draft.frame = _apply(expr, draft.frame, self.context.options.functions)
            return inner
        if isinstance(expr, Source):
            end = self.new_node()
            edge = self.add(EdgeKind.FORWARD, 0, end, expr.name, _base_frame(expr, Dur()))
            return _Fragment(end, [edge])
        if isinstance(expr, Union):
            left, right = self.fragment(expr.left), self.fragment(expr.right)
            for draft in right.entering:
                draft.target = left.end
            return _Fragment(left.end, left.entering + right.entering)
        if isinstance(expr, Seq):
            return self.seq(expr)
        return self.fold(expr)

    def right_operand(self, expr: Expr) -> tuple[str, _Frame]:
        """The stream a right operand reads and its frame; resubscribes if not linear-plus."""
        ops: list[Select | Project | Rename | Introduce] = []
        while isinstance(expr, _UNARY):
            ops.append(expr)
            expr = expr.input
        source = expr if isinstance(expr, Source) else self.resubscribe(expr)
        frame = _base_frame(source, EventDur())
        for op in reversed(ops):
            frame = _apply(op, frame, self.context.options.functions)
        return source.name, frame

    def resubscribe(self, expr: Expr) -> Source:
        name = self.context.fresh_stream()
        schema = StreamSchema(name, expr.attributes, self.context.unit)
        self.context.produced.append(_Builder(self.context).build(expr, schema, internal=True))
        return Source(name, expr.attributes)

    def seq(self, expr: Seq) -> _Fragment:
        left = self.fragment(expr.left)
        stream, right = self.right_operand(expr.right)
        scopes: Scopes = {
            _INSTANCE: {name: Attr(_INSTANCE, name) for name in expr.left.names},
            Scope.RIGHT: right.row(),
        }
        live = conjoin(right.pred, _pred(expr.pred, scopes, Dur()))
        self.add(
            EdgeKind.FILTER,
            left.end,
            left.end,
            stream,
            _Frame({}, live, right.filter_guards(), Dur()),
        )
        out: dict[str, tuple[Term, AttrType]] = {
            name: (Attr(_INSTANCE, name), typ) for name, typ in expr.left.attributes
        }
        out.update(right.map)
        end = self.new_node()
        edge = self.add(
            EdgeKind.FORWARD, left.end, end, stream, _Frame(out, live, right.guards, Dur())
        )
        return _Fragment(end, [edge])

    def fold(self, expr: Fold) -> _Fragment:
        left = self.fragment(expr.left)
        stream, right = self.right_operand(expr.right)
        right_names = expr.right.names
        left_types = dict(expr.left.attributes)
        aggregate_names = {a.name for a in expr.aggregates}
        left_refs = {
            leaf.name
            for node in (expr.step, expr.keep, *(a.term for a in expr.aggregates))
            for leaf in _attrs(node)
            if leaf.scope is Scope.LEFT
        }
        firsts = {name: first_name(name) for name in right_names}
        firsts.update({name: name + HIDDEN_FIRST for name in sorted(left_refs & aggregate_names)})
        for draft in left.entering:
            entry = dict(draft.frame.map)
            entry.update({copy: entry[name] for name, copy in firsts.items()})
            draft.frame = replace(draft.frame, map=entry)
        binding: dict[str, tuple[Term, AttrType]] = {
            name: (Attr(_INSTANCE, name), typ) for name, typ in expr.left.attributes
        }
        binding.update({copy: (Attr(_INSTANCE, copy), left_types[n]) for n, copy in firsts.items()})
        scopes: Scopes = {
            Scope.LEFT: {n: Attr(_INSTANCE, firsts.get(n, n)) for n in expr.left.names},
            Scope.STATE: {n: Attr(_INSTANCE, n) for n in expr.left.names},
            Scope.RIGHT: right.row(),
        }
        live = conjoin(right.pred, _pred(expr.step, scopes, Dur()))
        fire = conjoin(live, _pred(expr.keep, scopes, Dur()))
        state = dict(binding)
        state.update({name: right.map[name] for name in right_names})
        state.update({a.name: (_term(a.term, scopes, Dur()), a.type) for a in expr.aggregates})
        self.add(
            EdgeKind.FILTER,
            left.end,
            left.end,
            stream,
            _Frame({}, live, right.filter_guards(), Dur()),
        )
        self.add(
            EdgeKind.REBIND, left.end, left.end, stream, _Frame(state, fire, right.guards, Dur())
        )
        out = {}
        for name in expr.left.names:
            if name in firsts and name in right_names:
                out[firsts[name]] = binding[firsts[name]]
            else:
                out[name] = state[name]
        out.update({name: state[name] for name in right_names})
        end = self.new_node()
        edge = self.add(
            EdgeKind.FORWARD, left.end, end, stream, _Frame(out, fire, right.guards, Dur())
        )
        return _Fragment(end, [edge])

    def build(self, expr: Expr, output: StreamSchema, internal: bool = False) -> Automaton:
        top = self.fragment(expr)
        used = sorted({0, top.end} | {n for d in self.drafts for n in (d.source, d.target)})
        number = {old: new for new, old in enumerate(used)}
        attributes: dict[int, tuple[tuple[str, AttrType], ...]] = {0: ()}
        for draft in self.drafts:
            if draft.kind is not EdgeKind.FILTER:
                attributes.setdefault(
                    number[draft.target], tuple((n, t) for n, (_, t) in draft.frame.map.items())
                )
        forms = Canonical(self.context.options.functions, self.context.options.opaque)
        edges = [self.edge(draft, number, forms) for draft in self.drafts]
        order = {EdgeKind.FILTER: 0, EdgeKind.REBIND: 1, EdgeKind.FORWARD: 2}
        edges.sort(key=lambda e: (e.source, order[e.kind], e.target))
        nodes = tuple(Node(n, attributes.get(n, ())) for n in range(len(used)))
        return Automaton(output, nodes, tuple(edges), number[top.end], internal)

    def edge(self, draft: _Draft, number: Mapping[int, int], forms: Canonical) -> Edge:
        pred = forms.pred(draft.frame.pred)
        conjuncts = tuple(
            SplitConjunct(*split(c, Scope.EVENT))
            for c in forms.conjuncts(pred, self.context.options.dnf_limit)
        )
        guards = tuple(dict.fromkeys(forms.term(g) for g in draft.frame.guards))
        assigns = tuple(
            Assign(name, forms.term(term), typ) for name, (term, typ) in draft.frame.map.items()
        )
        return Edge(
            draft.kind,
            number[draft.source],
            number[draft.target],
            draft.stream,
            pred,
            conjuncts,
            guards,
            assigns if draft.kind is not EdgeKind.FILTER else (),
        )


def _attrs(node: Term | Pred) -> list[Attr]:
    found: list[Attr] = []

    def visit(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr):
            found.append(leaf)
        return leaf

    map_leaves(node, visit)
    return found


def build_automata(
    expr: Expr, output: StreamSchema, options: Options = DEFAULT_OPTIONS
) -> tuple[Automaton, ...]:
    """The automata implementing ``expr``: internal producers first, the one publishing last.

    Raises :class:`~cesar.automata.normal.DnfLimitError` if an edge predicate's DNF
    exceeds ``options.dnf_limit``.
    """
    context = _Context(output.name, output.unit, options)
    main = _Builder(context).build(expr, output)
    return (*context.produced, main)
