"""Pattern automata's edges as drafts, then canonical: the last stage of pattern compilation.

A builder (:mod:`cesar.automata.pattern.sequence`, :mod:`cesar.automata.pattern.join`)
writes each edge as a :class:`Draft` — its predicate and target binding as
terms — and :func:`edges_of` makes them the automaton's canonical, split edges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cesar.automata.algebra import Assign
from cesar.automata.automaton import Edge, EdgeKind, SplitConjunct
from cesar.automata.normal import Canonical, Conjunct, split
from cesar.automata.schema import AttrType
from cesar.automata.terms import Or, Pred, Scope, Term
from cesar.automata.translate import Options

Binding = dict[str, tuple[Term, AttrType]]
"""A target binding: each attribute's term and type."""


@dataclass
class Draft:
    """An edge before its predicate is canonical and split (see :class:`Edge`)."""

    kind: EdgeKind
    source: int
    target: int
    stream: str
    pred: Pred
    map: Binding
    keeps_end: bool = False
    joins: bool = False
    unless_taken: bool = False


def any_of(preds: Sequence[Pred]) -> Pred:
    """The disjunction of ``preds`` (one of them alone)."""
    return preds[0] if len(preds) == 1 else Or(tuple(preds))


def _absorbed(conjuncts: Sequence[Conjunct]) -> list[Conjunct]:
    """The DNF without conjuncts another one's atoms are a part of (``A or (A and B)`` is
    ``A``): a FILTER edge ORs what kills a run with what moves it, and a move under the
    window repeats a kill.  O(conjuncts² × atoms).

    >>> from cesar.automata.terms import Attr, Cmp, Const, Scope
    >>> a = Cmp("<", Attr(Scope.EVENT, "x"), Const(1, AttrType.INT))
    >>> b = Cmp(">", Attr(Scope.EVENT, "y"), Const(2, AttrType.INT))
    >>> [len(c.atoms) for c in _absorbed([Conjunct((a, b)), Conjunct((a,))])]
    [1]
    """
    sets = [frozenset(c.atoms) for c in conjuncts]
    kept = []
    for index, conjunct in enumerate(conjuncts):
        mine = sets[index]
        if not any(
            other < mine or (other == mine and earlier < index)
            for earlier, other in enumerate(sets)
            if earlier != index
        ):
            kept.append(conjunct)
    return kept


def edges_of(drafts: list[Draft], options: Options) -> tuple[Edge, ...]:
    """The drafts as canonical edges, in the order construct.py gives them: by source, kind."""
    forms = Canonical(options.functions, options.opaque)
    edges = []
    for draft in drafts:
        pred = forms.pred(draft.pred)
        conjuncts = tuple(
            SplitConjunct(*split(c, Scope.EVENT))
            for c in _absorbed(forms.conjuncts(pred, options.dnf_limit))
        )
        assigns = tuple(
            Assign(name, forms.term(term), typ) for name, (term, typ) in draft.map.items()
        )
        edges.append(
            Edge(
                draft.kind,
                draft.source,
                draft.target,
                draft.stream,
                pred,
                conjuncts,
                (),
                assigns,
                draft.keeps_end,
                draft.joins,
                draft.unless_taken,
            )
        )
    order = {
        EdgeKind.FILTER: 0,
        EdgeKind.STAY: 1,
        EdgeKind.REBIND: 2,
        EdgeKind.FORWARD: 3,
        EdgeKind.TIMEOUT: 4,
        EdgeKind.UNLESS: 5,
    }
    edges.sort(key=lambda e: (e.source, order[e.kind], e.target))
    return tuple(edges)
