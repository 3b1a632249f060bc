"""Negations a run judges when it completes, against remembered events (SASE's nested query).

A negation before the first component looks at events that came before its
run began; one whose condition names a later component cannot be judged when
its event comes.  Both are judged when a run completes: an UNLESS edge per
negated stream guards each completing edge (:mod:`cesar.automata.automaton`
gives its scopes), and the engine remembers each negated stream's events for
the window.  A run keeps the times the UNLESS predicate compares — its steps'
arrivals (:data:`ARRIVAL`) and a closure's departure (:data:`DEPARTURE`),
relative to its start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from cesar.automata.pattern.ast import Index, Ref
from cesar.automata.pattern.placing import BETWEEN_ENDS, Negation, keys_of, rewrite
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import AttrType
from cesar.automata.terms import (
    Arith,
    Attr,
    Cmp,
    Const,
    Dur,
    EventDur,
    Leaf,
    Pred,
    Scope,
    Term,
    conjoin,
    map_pred,
    map_term,
)
from cesar.automata.timeparts import TICKS_PARTS

UNION_TYPE = "__type"
"""The attribute of a pattern's union stream that names each event's own stream."""

ARRIVAL = "@arrive"
"""A step's binding anchor: its first event's end, relative to the run's start (DUR then)."""
DEPARTURE = "@depart"
"""A closure's binding anchor: its last event's end, relative to the run's start."""
_END = Attr(Scope.LEFT, "@end")
"""In an UNLESS predicate: the firing event's end, relative to the run's start."""
_ONE = Const(1, AttrType.INT)


TICKS = {part.which: part.name for part in TICKS_PARTS}
"""The derived attributes an ordered join or a join's negation reads: events' times in ticks."""


def looking_back(p: Resolved) -> list[Negation]:
    """The negations a run cannot judge when their event comes, so judged when it completes,
    against the events remembered: one before the first component (its events came before the
    run began), and one between components whose condition names a later component."""
    order = {step.var: n for n, step in enumerate(p.steps)}
    last = len(p.steps) - 1
    out = []
    for negation in p.negations:
        later = any(
            p.refs[key].var != negation.var and order[p.refs[key].var] > negation.after
            for key in keys_of(negation.pred)
        )
        if negation.after == BETWEEN_ENDS:
            continue  # an AND's: see join_guard
        if negation.after == -1 or (negation.after < last and later):
            out.append(negation)
    return out


def _looking_back(term: Term) -> Term:
    """A term over (binding, firing event) as an UNLESS predicate reads it: the event's
    attributes as ``$1.@e.x``, DUR as ``$1.@end``."""

    def swap(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr) and leaf.scope is Scope.EVENT:
            return Attr(Scope.LEFT, f"@e.{leaf.name}")
        if isinstance(leaf, Dur):
            return _END
        assert not isinstance(leaf, EventDur), "an edge's own-duration test is not read back"
        return leaf

    return map_term(term, swap)


def _looking_back_pred(pred: Pred) -> Pred:
    """:func:`_looking_back` on every term of ``pred``."""
    return map_pred(pred, _looking_back)


def _renamed(leaf: Leaf, old: str, new: str) -> Term:
    """``leaf``, a binding attribute ``old`` renamed ``new``."""
    if isinstance(leaf, Attr) and leaf.scope is Scope.LEFT and leaf.name == old:
        return Attr(Scope.LEFT, new)
    return leaf


def _of_stream(pred: Pred, stream: str) -> Pred:
    """``pred`` on a remembered event of ``stream``: its ``__type`` is that stream."""

    def swap(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr) and leaf.scope is Scope.EVENT and leaf.name == UNION_TYPE:
            return Const(stream, AttrType.STRING)
        return leaf

    return map_pred(pred, swap)


def unless(
    p: Resolved,
    absent_true: Callable[[Pred, str], Pred],
    negation: Negation,
    stream: str,
    pred: Pred,
    view: Mapping[str, Term],
    arriving: bool,
) -> Pred:
    """The UNLESS predicate of a looking-back ``negation`` on events of ``stream``, guarding
    the completing edge ``pred`` read through ``view`` (see :mod:`cesar.automata.automaton`
    for the scopes): the completing edge holds, the remembered event lies where the
    negation looks — between the steps around it, or in the window before the first — and
    meets its condition.  ``absent_true`` is the builder's (SASE's rule for absent
    attributes); ``arriving``: the firing event begins the last step."""
    assert p.window is not None
    last = len(p.steps) - 1
    steps = p.steps

    def anchor(n: int, which: str) -> Term:
        if which == ARRIVAL and n == last and arriving:
            return _END
        if which == DEPARTURE and not steps[n].kleene:
            which = ARRIVAL
        return Attr(Scope.LEFT, Ref(steps[n].var, Index.ONLY, which).key)

    ends = Dur()  # the remembered event's end, relative to the run's start
    starts = Arith("+", Arith("-", ends, EventDur()), _ONE)
    window = Const(p.window, AttrType.INT)
    if negation.after == -1:  # in the window before the match's end, before its first event
        where = [
            Cmp("<", ends, anchor(0, ARRIVAL)),
            Cmp(">=", starts, Arith("-", _END, window)),
        ]
    else:  # after the step before it ends, arriving before the step after it does
        where = [
            Cmp(">", starts, anchor(negation.after, DEPARTURE)),
            Cmp("<", ends, anchor(negation.after + 1, ARRIVAL)),
        ]
    horizon = Cmp("<=", EventDur(), Const(p.window + 1, AttrType.INT))
    condition = _remembered(p, absent_true, negation, stream, view)
    if arriving and not steps[last].kleene:  # the firing event's stream, not the binding's
        kept = Ref(steps[last].var, Index.ONLY, UNION_TYPE).key
        condition = map_pred(condition, lambda leaf: _renamed(leaf, kept, f"@e.{UNION_TYPE}"))
    return conjoin(_looking_back_pred(pred), *where, horizon, condition)


def _remembered(
    p: Resolved,
    absent_true: Callable[[Pred, str], Pred],
    negation: Negation,
    stream: str,
    view: Mapping[str, Term],
) -> Pred:
    """The negation's condition on a remembered event of ``stream``, the match read through
    ``view`` as an UNLESS predicate reads it."""
    looked = {key: _looking_back(term) for key, term in view.items()}
    for key, ref in p.refs.items():
        if ref.var == negation.var:
            assert ref.attr is not None
            looked[key] = Attr(Scope.EVENT, ref.attr)
    return _of_stream(rewrite(absent_true(negation.pred, negation.var), looked), stream)


def join_guard(
    p: Resolved,
    absent_true: Callable[[Pred, str], Pred],
    negation: Negation,
    stream: str,
    pred: Pred,
    view: Mapping[str, Term],
    completing: str,
    where: Sequence[Pred],
) -> Pred:
    """The UNLESS predicate of a join's ``negation`` on events of ``stream``, guarding the join
    edge ``pred`` (read through ``view``) that completes a run with component ``completing``.

    The completing event is the match's last by arrival (a join node sees events in order), so
    a remembered event — of an earlier epoch — arrives before it.  ``where`` says where else
    the remembered event lies, against the run's times in ticks and its own ``TICKS(t0)`` and
    ``TICKS(t1)`` (:mod:`cesar.automata.pattern.join`); it must meet the negation's condition
    too."""
    assert p.window is not None
    horizon = Cmp("<=", EventDur(), Const(p.window + 1, AttrType.INT))
    condition = _remembered(p, absent_true, negation, stream, view)
    kept = Ref(completing, Index.ONLY, UNION_TYPE).key  # the firing event's stream
    condition = map_pred(condition, lambda leaf: _renamed(leaf, kept, f"@e.{UNION_TYPE}"))
    return conjoin(_looking_back_pred(pred), *where, horizon, condition)
