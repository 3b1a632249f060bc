"""The pattern language's syntax tree (SASE / SASE+ papers; docs/patterns.md).

A pattern names its components — event types with variables, Kleene
closures ``Stock+ a[]``, negations ``!(Register b)`` and alternatives
``ANY(A, B) x`` — under ``SEQ`` or ``AND``, a selection strategy, a WHERE
predicate, a window, the returned attributes and the stream it publishes.

References to matched events (``a.x``, ``a[1].x``, ``a[i].x``, ``a[i-1].x``,
``a[a.LEN].x``, ``avg(a[..i-1].x)``, ``a.LEN``) are :class:`Ref` data.  Inside
predicates and terms each is the CEL leaf ``Attr(Scope.EVENT, ref.key)``, its
key being its canonical spelling, so the CEL term machinery (typing,
evaluation, printing, rewriting) works on pattern predicates unchanged and
:func:`~cesar.automata.terms.to_cel` prints them back as pattern text.

>>> Ref("a", Index.CURRENT, "price").key, Ref("a", Index.UPTO_PREVIOUS, "price", "AVG").key
('a[i].price', 'avg(a[..i-1].price)')
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cesar.automata.skipping import Skip
from cesar.automata.terms import Pos, Pred, Term, position


class Strategy(enum.Enum):
    """How a run selects events from the stream (SASE+ Section 2)."""

    STRICT = "strict_contiguity"
    PARTITION = "partition_contiguity"
    NEXT = "skip_till_next_match"
    ANY = "skip_till_any_match"

    __hash__ = object.__hash__


class Index(enum.Enum):
    """Which event of a variable a reference reads.

    ``ONLY`` is a singleton variable's event; the others read a Kleene
    variable: its first, current (``a[i]``, the event being taken), previous,
    or last event, every event before the current (``a[..i-1]``, under an
    aggregate) or all of them (``a[]``, under an aggregate), or its length.
    """

    ONLY = "only"
    FIRST = "first"
    CURRENT = "current"
    PREVIOUS = "previous"
    LAST = "last"
    UPTO_PREVIOUS = "upto_previous"
    ALL = "all"
    LEN = "len"

    __hash__ = object.__hash__


AGGREGATES = ("AVG", "SUM", "MIN", "MAX", "COUNT")
"""The aggregates a Kleene variable's events take (``avg(a[..i-1].x)``)."""

_SPELLING = {
    Index.FIRST: "[1]",
    Index.CURRENT: "[i]",
    Index.PREVIOUS: "[i-1]",
    Index.LAST: "[{var}.LEN]",
    Index.UPTO_PREVIOUS: "[..i-1]",
    Index.ALL: "[]",
}


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference to (an attribute of) matched events; ``attr`` is None only for ``a.LEN``.

    ``aggregate`` is set for ``UPTO_PREVIOUS`` and ``ALL`` and nowhere else.
    """

    var: str
    index: Index
    attr: str | None
    aggregate: str | None = None

    @property
    def key(self) -> str:
        """The canonical spelling, also the name of the leaf that stands for it."""
        return ref_key(self.var, self.index, self.attr, self.aggregate)


def ref_key(var: str, index: Index, attr: str | None, aggregate: str | None = None) -> str:
    """:attr:`Ref.key` of the reference these fields make, without making it.

    >>> ref_key("a", Index.ALL, "price", "AVG"), ref_key("a", Index.LAST, "price")
    ('avg(a[].price)', 'a[a.LEN].price')
    """
    if index is Index.LEN:
        return f"{var}.LEN"
    if index is Index.ONLY:
        return f"{var}.{attr}"
    inner = f"{var}{_SPELLING[index].format(var=var)}.{attr}"
    return f"{aggregate.lower()}({inner})" if aggregate else inner


@dataclass(frozen=True, slots=True)
class Component:
    """One component: its event types (several for ``ANY``), variable, and kind.

    ``types`` are stream names; ``var`` is None only for a lone component
    written without one (``EVENT SHELF_READING WHERE category = 'food'``).
    """

    types: tuple[str, ...]
    var: str | None
    kleene: bool = False
    negated: bool = False
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Group:
    """``SEQ(…)``, ``AND(…)`` or ``OR(…)`` of parts, each a component or a group."""

    operator: str
    parts: tuple[Component | Group, ...]
    pos: Pos = position()

    def components(self) -> tuple[Component, ...]:
        """Every component under the group, in the order of the text."""
        out: list[Component] = []
        for part in self.parts:
            out.extend(part.components() if isinstance(part, Group) else (part,))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Equivalence:
    """``[attr]`` or ``[attr = constant]``: every positive component agrees on ``attr``."""

    attr: str
    value: Term | None
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class ReturnItem:
    """``term [AS name]`` in RETURN."""

    term: Term
    alias: str | None
    pos: Pos = position()


@dataclass(frozen=True, slots=True)
class Pattern:
    """A whole pattern query.

    ``operator`` is ``SEQ`` or ``AND`` (a lone component is a SEQ of one);
    ``where`` holds the predicate over :class:`Ref` leaves, with the
    equivalence tests apart; ``refs`` maps each leaf key used to its ref;
    ``strategy_vars`` are the variables named in the strategy's brackets;
    ``plan`` the evaluation plan the pattern pins (``PLAN chain(c, b, a)``), spelled;
    ``skip`` its after-match policy (None: every match is published).

    ``nested`` is the structure when it is not a flat SEQ or AND of components (an OR, or a
    group inside a group; :mod:`cesar.automata.pattern.nesting`): ``operator`` is then its
    root's and ``components`` lists every component in the order of the text.
    ``returned``: the variables the default output covers (None: every positive one); an
    alternative of an OR covers those every alternative binds.
    """

    operator: str
    components: tuple[Component, ...]
    strategy: Strategy
    strategy_given: bool
    equivalences: tuple[Equivalence, ...]
    where: Pred | None
    refs: tuple[tuple[str, Ref], ...]
    window: Term | None
    returns: tuple[ReturnItem, ...] | None
    publish: str | None
    plan: str | None = None
    pos: Pos = position()
    skip: Skip | None = None
    nested: Group | None = None
    returned: frozenset[str] | None = None
