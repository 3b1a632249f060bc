"""The conditions on a SEQ pattern's edges, read through a run's binding (SASE+ §3, Steps 3–6).

A step's begin and take conditions, a Kleene closure's close condition, a
negation's condition and the partition test, each written over the event and
the binding an instance holds (:mod:`cesar.automata.pattern.views`). An event
of the union stream is tested for its stream first (``__type``), and an atom on
an attribute the event's stream lacks holds (SASE's rule for ANY):
:meth:`Conditions.absent_true`. :class:`~cesar.automata.pattern.sequence.SeqBuilder`
puts them on the edges it drafts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cesar.automata.evaluate import negate
from cesar.automata.pattern.ast import Index, Ref, Strategy
from cesar.automata.pattern.drafts import Binding
from cesar.automata.pattern.lookback import UNION_TYPE
from cesar.automata.pattern.placing import Negation, keys_of, rewrite
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.pattern.views import View, Views, counted
from cesar.automata.schema import AttrType, StreamSchema
from cesar.automata.terms import (
    FALSE,
    TRUE,
    And,
    Attr,
    Cmp,
    Const,
    Not,
    Or,
    Pred,
    Scope,
    Term,
    conjoin,
)

ZERO = Const(0, AttrType.INT)
"""The count an aggregate over a closure has when none of its events had the attribute."""


class Conditions:
    """The predicates of one pattern's edges, for the stream layout of its automaton."""

    def __init__(
        self,
        pattern: Resolved,
        schemas: Mapping[str, StreamSchema],
        union: str | None,
        views: Views,
    ) -> None:
        self.p = pattern
        self.schemas = schemas
        self.union = union
        """The union stream every edge reads, or None: each edge reads its component's."""
        self.views = views
        self.components = {step.var: step.types for step in pattern.steps}
        self.components.update({g.var: g.types for g in pattern.negations})
        self.partial = any(
            self.lacking(ref.var, ref.attr) and ref.aggregate != "COUNT"
            for ref in pattern.refs.values()
        )
        """Some reference may read an attribute its event's stream lacks (else
        :meth:`absent_true` has no atom to widen)."""

    def lacking(self, var: str, attr: str | None) -> list[str]:
        """The streams of ``var``'s component without ``attr`` (an ANY of streams that differ)."""
        return [t for t in self.components[var] if attr and self.schemas[t].type_of(attr) is None]

    def ignore(self, n: int, binding: Binding, kleene: bool) -> Pred:
        """What a run at step ``n`` (waiting for it, or inside its closure) may skip."""
        strategy = self.p.strategy
        if strategy is Strategy.ANY:
            return TRUE
        if strategy is Strategy.STRICT:
            return FALSE
        if strategy is Strategy.PARTITION:
            return Not(self.same_partition(binding))
        return Not(self.takes(n, binding) if kleene else self.begins(n, binding))

    def of_types(self, types: tuple[str, ...], pred: Pred) -> Pred:
        """``pred`` on an event of one of ``types``: on the union stream, its type is tested."""
        if self.union is None:
            return pred
        tests = [Cmp("=", Attr(Scope.EVENT, UNION_TYPE), Const(t, AttrType.STRING)) for t in types]
        return conjoin(tests[0] if len(tests) == 1 else Or(tuple(tests)), pred)

    def of_stream(self, types: Sequence[str]) -> Pred:
        """The union event comes from one of ``types`` (FALSE for none)."""
        tests = [Cmp("=", Attr(Scope.EVENT, UNION_TYPE), Const(t, AttrType.STRING)) for t in types]
        return FALSE if not tests else tests[0] if len(tests) == 1 else Or(tuple(tests))

    def begins(self, n: int, binding: Binding) -> Pred:
        """Step ``n``'s begin condition on the event, for an instance holding ``binding``."""
        step = self.p.steps[n]
        begin = self.absent_true(step.begin, step.var)
        return self.of_types(step.types, rewrite(begin, self.views.of(binding, step.var)))

    def closes(self, n: int, view: View) -> Pred:
        """Kleene step ``n``'s close condition, read through ``view``."""
        return rewrite(self.absent_true(self.p.steps[n].close, None), view)

    def absent_true(self, pred: Pred, event_var: str | None, taking: bool = False) -> Pred:
        """``pred`` with each atom made true for events whose stream lacks an attribute it reads.

        SASE: a condition on an attribute the event does not have holds.  An
        ANY component's event may come from a stream without the attribute;
        its stream is ``__type`` of the union event (``event_var``'s, the one
        being taken when ``taking``) or kept in the binding: an earlier
        component's, a closure's first or last event's.  An aggregate over a
        closure none of whose events had the attribute is absent too.
        """

        def absent(ref: Ref) -> list[Pred]:
            lacking = self.lacking(ref.var, ref.attr)
            if not lacking or ref.aggregate == "COUNT":
                return []
            assert ref.attr is not None
            if ref.aggregate is not None:
                return [Cmp("=", Attr(Scope.EVENT, counted(ref.var, ref.attr).key), ZERO)]
            mine = ref.var == event_var
            if ref.index is Index.CURRENT or (mine and ref.index is Index.ONLY):
                stream: Term = Attr(Scope.EVENT, UNION_TYPE)
            elif ref.index is Index.FIRST:
                first = Ref(ref.var, Index.FIRST, UNION_TYPE).key
                stream = Attr(Scope.EVENT, UNION_TYPE if mine and not taking else first)
            elif ref.index in (Index.LAST, Index.PREVIOUS):
                stream = Attr(Scope.EVENT, Ref(ref.var, Index.LAST, UNION_TYPE).key)
            else:
                stream = Attr(Scope.LEFT, Ref(ref.var, Index.ONLY, UNION_TYPE).key)
            return [Cmp("=", stream, Const(t, AttrType.STRING)) for t in lacking]

        def fix(node: Pred) -> Pred:
            if isinstance(node, Not):
                return fix(negate(node.item))
            if isinstance(node, (And, Or)):
                return type(node)(tuple(fix(item) for item in node.items))
            if not isinstance(node, Cmp) or not self.partial:
                return node
            tests: list[Pred] = [node]
            for key in keys_of(node):
                tests += absent(self.p.refs[key])
            return node if len(tests) == 1 else Or(tuple(tests))

        return fix(pred)

    def takes(self, n: int, binding: Binding) -> Pred:
        """Kleene step ``n``'s take condition on the event (its ``a[i]``)."""
        step = self.p.steps[n]
        view = self.views.of(binding, step.var, taking=True)
        take = self.absent_true(step.take, step.var, taking=True)
        return self.of_types(step.types, rewrite(take, view))

    def negated(self, negation: Negation, binding: Binding) -> Pred:
        """The negation's condition on an event of its stream, for an instance with ``binding``."""
        view = self.views.of(binding)
        for key, ref in self.p.refs.items():
            if ref.var == negation.var:
                assert ref.attr is not None
                view[key] = Attr(Scope.EVENT, ref.attr)
        pred = self.absent_true(negation.pred, negation.var)
        return self.of_types(negation.types, rewrite(pred, view))

    def same_partition(self, binding: Binding) -> Pred:
        """The event is in the run's partition: its equivalence attributes equal the first's."""
        first = self.p.steps[0]
        index = Index.FIRST if first.kleene else Index.ONLY
        return conjoin(
            *(
                Cmp("=", Attr(Scope.EVENT, attr), binding[Ref(first.var, index, attr).key][0])
                for attr in self.p.partition
            )
        )
