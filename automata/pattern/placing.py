"""Where each WHERE conjunct is judged: a pattern's steps and negations (SASE+ §3.2, Step 2).

A conjunct is placed by its *last identifier*: on a singleton's or a Kleene
closure's first event (``begin``), on a Kleene closure's later events
(``take``: ``a[i]``, ``a[i-1]``, ``agg(a[..i-1].x)``), or on the closed closure
(``close``: ``a[a.LEN]``, ``a.LEN``, ``agg(a[].x)``), checked when the run
proceeds past it. A conjunct naming a negated component goes to that
:class:`Negation` (SASE's P-). :mod:`cesar.automata.pattern.resolve` calls
:func:`place` once the WHERE is typed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cesar.automata.errors import CelSemanticError
from cesar.automata.pattern.ast import Component, Index, Ref
from cesar.automata.terms import (
    Attr,
    Cmp,
    Leaf,
    Pos,
    Pred,
    Scope,
    Term,
    Truth,
    conjoin,
    conjuncts_of,
    map_leaves,
    map_pred,
    map_term,
)

BEGIN, TAKE, CLOSE = 0, 1, 2
"""Stages of a positive step, in the order a run reaches them."""

STAGE = {
    Index.ONLY: BEGIN,
    Index.FIRST: BEGIN,
    Index.CURRENT: TAKE,
    Index.PREVIOUS: TAKE,
    Index.UPTO_PREVIOUS: TAKE,
    Index.LAST: CLOSE,
    Index.ALL: CLOSE,
    Index.LEN: CLOSE,
}
"""The stage at which a reference of each index is known."""


@dataclass(frozen=True)
class Step:
    """A positive component: its variable, streams, and the predicates placed on it."""

    var: str
    types: tuple[str, ...]
    kleene: bool
    begin: Pred
    take: Pred
    close: Pred


BETWEEN_ENDS = -2
"""A negation's ``after`` in an AND: between the match's first and last events."""


@dataclass(frozen=True)
class Negation:
    """A negated component between positive steps ``after`` and ``after + 1``.

    ``after`` is -1 for a negation before the first step, ``len(steps) - 1``
    for one after the last, and :data:`BETWEEN_ENDS` in an AND (between the match's first
    and last events, by arrival); ``pred`` is every conjunct that names ``var``.
    """

    var: str
    types: tuple[str, ...]
    after: int
    pred: Pred


def place(
    where: Pred,
    positive: Sequence[Component],
    named: Sequence[Component],
    refs: Mapping[str, Ref],
    operator: str,
) -> tuple[tuple[Step, ...], tuple[Negation, ...]]:
    """The steps of the ``positive`` components and the negations among ``named`` (every
    component, each with a variable), with each conjunct of ``where`` on the one it waits for.

    O(conjuncts × references). Raises :class:`CelSemanticError` for a conjunct naming two
    negated components, a negation reading a growing closure, or a closure's current event
    compared with what is not known when it is taken.
    """
    order = {variable(c): n for n, c in enumerate(named)}
    negated_vars = {variable(c) for c in named if c.negated}

    def stage_of(ref: Ref) -> tuple[int, int]:
        return order[ref.var], STAGE[ref.index]

    begin: dict[str, list[Pred]] = {variable(c): [] for c in positive}
    take: dict[str, list[Pred]] = {variable(c): [] for c in positive}
    close: dict[str, list[Pred]] = {variable(c): [] for c in positive}
    negated: dict[str, list[Pred]] = {}
    first = variable(positive[0])
    for conjunct in conjuncts_of(where):
        if isinstance(conjunct, Truth) and conjunct.value:
            continue
        read = [refs[key] for key in keys_of(conjunct)]
        negs = {r.var for r in read if r.var in negated_vars}
        if len(negs) > 1:
            raise CelSemanticError(
                f"a condition names two negated components ({', '.join(sorted(negs))}); split it",
                pos_of(conjunct),
            )
        if negs:
            var = negs.pop()
            for ref in read:
                if STAGE[ref.index] == TAKE:
                    raise CelSemanticError(
                        f"{ref.key} changes as {ref.var} grows; a negation can read "
                        f"{ref.var}[1], {ref.var}[{ref.var}.LEN] or aggregates of {ref.var}[]",
                        pos_of(conjunct),
                    )
            negated.setdefault(var, []).append(conjunct)
            continue
        if not read:
            begin[first].append(conjunct)
            continue
        last = max(read, key=stage_of)
        stage = stage_of(last)
        for ref in read:
            if STAGE[ref.index] == TAKE and stage_of(ref) != stage:
                later = next(r for r in read if stage_of(r) == stage)
                raise CelSemanticError(
                    f"{ref.key} is the event {ref.var} is taking, and {later.key} is not "
                    f"known then; compare {ref.var}[i] with {ref.var}[i-1], {ref.var}[1], "
                    "aggregates of the events before it and earlier components",
                    pos_of(conjunct),
                )
        {BEGIN: begin, TAKE: take, CLOSE: close}[stage[1]][last.var].append(conjunct)
    steps = tuple(
        Step(
            variable(c),
            c.types,
            c.kleene,
            conjoin(*begin[variable(c)]),
            conjoin(*take[variable(c)]),
            conjoin(*close[variable(c)]),
        )
        for c in positive
    )
    negations = []
    seen = -1
    for component in named:
        if not component.negated:
            seen += 1
            continue
        pred = conjoin(*negated.get(variable(component), []))
        after = BETWEEN_ENDS if operator == "AND" else seen
        negations.append(Negation(variable(component), component.types, after, pred))
    return steps, tuple(negations)


def keys_of(node: Term | Pred) -> list[str]:
    """The reference keys a term or predicate reads, in order, once each."""
    found: dict[str, None] = {}

    def visit(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr):
            found[leaf.name] = None
        return leaf

    map_leaves(node, visit)
    return list(found)


def variable(component: Component) -> str:
    """A named component's variable."""
    assert component.var is not None
    return component.var


def pos_of(pred: Pred) -> Pos:
    """Where ``pred`` is in the text: a comparison's operator, else its first term."""
    if isinstance(pred, Cmp):
        return pred.pos or pred.left.pos
    return pred.pos


def rewrite(pred: Pred, values: Mapping[str, Term]) -> Pred:
    """``pred`` with each reference leaf replaced by ``values[key]`` (others kept)."""
    return map_pred(pred, _swapper(values))


def rewrite_term(term: Term, values: Mapping[str, Term]) -> Term:
    """``term`` with each reference leaf replaced by ``values[key]`` (others kept)."""
    return map_term(term, _swapper(values))


def _swapper(values: Mapping[str, Term]) -> Callable[[Leaf], Term]:
    def swap(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr) and leaf.scope is Scope.EVENT and leaf.name in values:
            return values[leaf.name]
        return leaf

    return swap
