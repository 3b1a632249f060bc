"""What a pattern under an after-match policy publishes beside its attributes.

:mod:`cesar.automata.skipping` judges matches by their start (the first event's arrival),
the bound the policy sets (an event's arrival) and their partition.  A run keeps the
arrivals it needs as anchors of its steps (relative to its start, as the negations that look
back keep theirs: :mod:`cesar.automata.pattern.lookback`), and the completing edge publishes
them as the hidden attributes :data:`~cesar.automata.skipping.START`,
:data:`~cesar.automata.skipping.BOUND` and one :data:`~cesar.automata.skipping.KEY`
attribute per ``[attr]`` test, which the engine's skipper strips.
"""

from __future__ import annotations

from cesar.automata.pattern.ast import Index, Ref
from cesar.automata.pattern.drafts import Binding
from cesar.automata.pattern.lookback import ARRIVAL, DEPARTURE
from cesar.automata.pattern.placing import rewrite_term
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.pattern.views import View
from cesar.automata.schema import AttrType
from cesar.automata.skipping import BOUND, KEY, START, SkipKind
from cesar.automata.terms import Arith, Attr, Const, Scope, Term

_INT = AttrType.INT
_ONE = Const(1, _INT)


class Marks:
    """The hidden attributes of ``pattern``'s matches (none without a policy)."""

    def __init__(self, pattern: Resolved) -> None:
        self.p = pattern

    def anchors(self) -> list[tuple[int, str]]:
        """The (step, anchor) pairs the policy reads: the match's start (the first event's
        arrival), then its bound."""
        skip = self.p.skip
        if skip is None:
            return []
        steps = self.p.steps
        at = len(steps) - 1
        if skip.var is not None:
            at = next(n for n, step in enumerate(steps) if step.var == skip.var)
        end = DEPARTURE if steps[at].kleene else ARRIVAL
        bound = {
            SkipKind.PAST_LAST: end,
            SkipKind.TO_NEXT: ARRIVAL,
            SkipKind.TO_FIRST: ARRIVAL,
            SkipKind.TO_LAST: end,
        }[skip.kind]
        return [(0, ARRIVAL), (0 if skip.kind is SkipKind.TO_NEXT else at, bound)]

    def hidden(self, view: View, binding: Binding) -> Binding:
        """The hidden attributes on a completing edge: the start and bound relative to the
        match's ``t0`` from the anchors in ``binding`` (an anchor is DUR then, one more than
        the distance; a bound the next match may start at is one less), and the partition
        through ``view``."""
        skip = self.p.skip
        if skip is None:
            return {}
        (first, start), (at, bound) = self.anchors()
        steps = self.p.steps
        less = Const(1 if skip.kind in (SkipKind.PAST_LAST, SkipKind.TO_NEXT) else 2, _INT)

        def anchor(n: int, name: str, minus: Const) -> Term:
            return Arith("-", binding[Ref(steps[n].var, Index.ONLY, name).key][0], minus)

        terms = [anchor(first, start, _ONE), anchor(at, bound, less)]
        terms += [rewrite_term(Attr(Scope.EVENT, ref.key), view) for ref in self.keys()]
        return {
            name: (term, typ) for (name, typ), term in zip(self.attributes(), terms, strict=True)
        }

    def keys(self) -> list[Ref]:
        """The references to a match's partition: the first event's ``[attr]`` attributes, if
        every component has them."""
        if self.p.skip is None or not self.p.keyed:
            return []
        head = self.p.steps[0]
        index = Index.FIRST if head.kleene else Index.ONLY
        return [Ref(head.var, index, attr) for attr in self.p.partition]

    def attributes(self) -> tuple[tuple[str, AttrType], ...]:
        """The names and types of :meth:`hidden`'s attributes."""
        if self.p.skip is None:
            return ()
        keys = tuple((KEY + ref.attr, self.p.types[ref.key]) for ref in self.keys() if ref.attr)
        return ((START, _INT), (BOUND, _INT), *keys)
