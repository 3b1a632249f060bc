"""The order a pattern's structure puts on its components: SEQ and AND nested in one another.

An alternative of a nested pattern (:mod:`cesar.automata.pattern.nesting`) that holds a SEQ
and an AND one inside the other — OpenCEP's ``AND(SEQ(a, b), SEQ(c, d))`` — orders some of
its components and not others.  Its :class:`Order` says, per component, which components'
events must end before it starts (:func:`order_of`): a SEQ's part follows the previous part,
and it suffices to order the first components of a part after the last ones of the part
before (the order within each part carries it on).  A negation watches a :class:`Gap`: in a
SEQ, after the previous part's events end and before the next part's first arrival; in an
AND, after its first event ends and before its last arrives.  A flat AND is the
:func:`unordered` case.  The join automaton (:mod:`cesar.automata.pattern.join`) runs on it.

What the join does not run raises :class:`Unordered`: a Kleene closure, and a negation
before the first or after the last component of the whole match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cesar.automata.pattern.ast import Component, Group

Part = Component | Group


class Unordered(ValueError):
    """An alternative the partial-order join does not run; the message says why."""


@dataclass(frozen=True)
class Gap:
    """Where a negated event must not lie: after the components ``after`` end (each of them
    if ``after_all``, else the first of them) and arriving before ``before`` do (each, or
    the last of them)."""

    var: str
    after: frozenset[int]
    after_all: bool
    before: frozenset[int]
    before_all: bool


@dataclass(frozen=True)
class Order:
    """Per component (by step), the components it follows; and the negations' gaps."""

    follows: tuple[frozenset[int], ...]
    gaps: tuple[Gap, ...]


def order_of(part: Part, steps: Sequence[str]) -> Order:
    """The order the OR-free structure ``part`` puts on the components ``steps`` (variables,
    in the order of the text).

    >>> from cesar.automata.pattern.parser import parse_pattern
    >>> p = parse_pattern("PATTERN AND(SEQ(A a, B b), SEQ(C c, !(N n), D d)) PUBLISH P")
    >>> o = order_of(p.nested, ["a", "b", "c", "d"])
    >>> [sorted(f) for f in o.follows], [(g.var, sorted(g.after), sorted(g.before)) for g in o.gaps]
    ([[], [0], [], [2]], [('n', [2], [3])])
    """
    index = {var: n for n, var in enumerate(steps)}
    follows: list[set[int]] = [set() for _ in steps]
    gaps: list[Gap] = []

    def every(p: Part) -> frozenset[int]:
        if isinstance(p, Component):
            return frozenset() if p.negated else frozenset({index[_var(p)]})
        return frozenset().union(*(every(q) for q in p.parts))

    def visit(p: Part) -> tuple[frozenset[int], frozenset[int]]:
        """(first, last): the components nothing in ``p`` precedes, and that precede nothing."""
        if isinstance(p, Component):
            if p.kleene:
                raise Unordered(f"the Kleene closure {p.var} is inside an AND")
            one = frozenset({index[_var(p)]})
            return one, one
        if p.operator == "AND":
            firsts: frozenset[int] = frozenset()
            lasts: frozenset[int] = frozenset()
            whole = every(p)
            for q in p.parts:
                if isinstance(q, Component) and q.negated:
                    gaps.append(Gap(_var(q), whole, False, whole, False))
                    continue
                first, last = visit(q)
                firsts, lasts = firsts | first, lasts | last
            return firsts, lasts
        previous: frozenset[int] | None = None
        start: frozenset[int] = frozenset()
        pending: list[str] = []
        for q in p.parts:
            if isinstance(q, Component) and q.negated:
                if previous is None:
                    raise Unordered("a negation comes before the match's first component")
                pending.append(_var(q))
                continue
            first, last = visit(q)
            if previous is None:
                start = first
            else:
                for n in first:
                    follows[n] |= previous
                gaps.extend(Gap(var, previous, True, first, True) for var in pending)
            previous, pending = last, []
        if pending:
            raise Unordered("a negation comes after the match's last component")
        assert previous is not None
        return start, previous

    visit(part)
    return Order(tuple(frozenset(f) for f in follows), tuple(gaps))


def _var(component: Component) -> str:
    assert component.var is not None
    return component.var


def unordered(steps: int, negations: Sequence[str]) -> Order:
    """The order of a flat AND of ``steps`` components: none, each negation between the
    match's first and last events."""
    whole = frozenset(range(steps))
    return Order(
        (frozenset(),) * steps, tuple(Gap(var, whole, False, whole, False) for var in negations)
    )
