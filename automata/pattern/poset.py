"""SEQ and AND nested in one another → a join automaton ordered by a partial order.

An alternative of a nested pattern (:mod:`cesar.automata.pattern.nesting`) that holds a SEQ
and an AND one inside the other — OpenCEP's ``AND(SEQ(a, b), SEQ(c, d))`` — orders some of
its components and not others.  Its :class:`Order` says, per component, which components'
events must end before it starts (:func:`order_of`): a SEQ's part follows the previous part,
and it suffices to order the first components of a part after the last ones of the part
before (the order within each part carries it on).

:class:`PosetBuilder` builds the join automaton of :mod:`cesar.automata.pattern.join` on it:
a run is a set of bound components, closed under the order (a component is bound only after
the ones it follows, which arrived before it starts), and the edge binding a component also
says that it starts after each of them ends.  A run keeps each event's end in ticks (the
events carry ``TICKS(t0)`` and ``TICKS(t1)``, derived attributes).  A negation watches a gap
(:class:`Gap`): in a SEQ, after the previous part's events end and before the next part's
first arrival; in an AND, after its first event ends and before its last arrives.  Each is
judged when a run completes, by an UNLESS edge per negated stream against the events the
engine remembers for the window (so a negation needs WITHIN).

What this does not run raises :class:`Unordered`: a Kleene closure, and a negation before the
first or after the last component of the whole match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cesar.automata.automaton import Automaton, EdgeKind
from cesar.automata.pattern.ast import Component, Group
from cesar.automata.pattern.drafts import Binding, Draft, any_of
from cesar.automata.pattern.join import JoinBuilder
from cesar.automata.pattern.lookback import TICKS, between_ends
from cesar.automata.pattern.resolve import Resolved, keys_of, rewrite
from cesar.automata.pattern.views import View
from cesar.automata.schema import AttrType, StreamSchema
from cesar.automata.terms import TRUE, Attr, Call, Cmp, Pred, Scope, Term, Truth, conjoin
from cesar.automata.terms import conjuncts_of as split_conjuncts
from cesar.automata.translate import Options

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


def _end(var: str) -> str:
    """The binding attribute holding a component's event's end, in ticks."""
    return f"@t1.{var}"


class PosetBuilder(JoinBuilder):
    """The join automaton of a partially ordered pattern (module docstring)."""

    def __init__(
        self,
        pattern: Resolved,
        schemas: Mapping[str, StreamSchema],
        options: Options,
        union: str | None,
        order: Order,
    ) -> None:
        super().__init__(pattern, schemas, options, union)
        self.order = order

    def build(self) -> Automaton:
        steps = self.p.steps
        full = (1 << len(steps)) - 1
        follows = [sum(1 << m for m in f) for f in self.order.follows]
        closed = [
            s
            for s in range(1, full)
            if all(follows[n] & ~s == 0 for n in range(len(steps)) if s >> n & 1)
        ]
        sets = sorted(closed, key=lambda s: (s.bit_count(), s))
        node_of = {0: 0, **{s: n for n, s in enumerate(sets, 1)}, full: len(sets) + 1}
        conjuncts = [
            c for c in split_conjuncts(self.p.conjuncts) if not (isinstance(c, Truth) and c.value)
        ]
        position = {step.var: n for n, step in enumerate(steps)}
        named = [sum(1 << position[self.p.refs[k].var] for k in set(keys_of(c))) for c in conjuncts]
        ticks0 = Attr(Scope.EVENT, TICKS["t0"])
        for bound in [0, *sets]:
            binding = self.bound_of(bound)
            for n, step in enumerate(steps):
                if bound >> n & 1:
                    binding[_end(step.var)] = (Attr(Scope.LEFT, _end(step.var)), AttrType.INT)
            for n, step in enumerate(steps):
                mine = 1 << n
                if bound & mine or follows[n] & ~bound:
                    continue
                target = bound | mine
                decided = [
                    c
                    for c, names in zip(conjuncts, named, strict=True)
                    if names & ~target == 0 and (names & mine or (not names and not bound))
                ]
                view = self.views.of(binding, step.var)
                after = [
                    Cmp(">", ticks0, Attr(Scope.LEFT, _end(steps[m].var)))
                    for m in sorted(self.order.follows[n])
                ]
                pred = conjoin(
                    *(rewrite(self.absent_true(c, step.var), view) for c in decided),
                    *self.same_key(bound),
                    *after,
                )
                pred = self.of_types(step.types, pred)
                made: Binding
                if target == full:
                    made = self.output(view, binding)
                    self.guard(node_of[bound], node_of[full], pred, view, step.var)
                else:
                    made = {**binding, **self.opened(n)}
                    made[_end(step.var)] = (Attr(Scope.EVENT, TICKS["t1"]), AttrType.INT)
                stream = self.stream_of(step.types)
                self.add(EdgeKind.FORWARD, node_of[bound], node_of[target], stream, pred, made)
        for bound in sets:
            node = node_of[bound]
            moves = [d.pred for d in self.drafts if d.source == node and d.kind is EdgeKind.FORWARD]
            waiting = [
                step.types
                for n, step in enumerate(steps)
                if not bound >> n & 1 and not follows[n] & ~bound
            ]
            stream = self.stream_of(waiting[0])
            self.drafts.append(
                Draft(EdgeKind.FILTER, node, node, stream, any_of(moves), {}, joins=True)
            )
            self.add(EdgeKind.STAY, node, node, stream, TRUE)
        return self.assemble(node_of[full])

    def guard(self, source: int, target: int, pred: Pred, view: View, completing: str) -> None:
        """Guard the edge completing a run with an UNLESS edge per gap and negated stream."""
        steps = self.p.steps
        negations = {g.var: g for g in self.p.negations}

        def end(m: int) -> Term:
            if steps[m].var == completing:
                return Attr(Scope.LEFT, f"@e.{TICKS['t1']}")
            return Attr(Scope.LEFT, _end(steps[m].var))

        def extreme(name: str, ends: list[Term]) -> Term:
            return ends[0] if len(ends) == 1 else Call(name, tuple(ends))

        for gap in self.order.gaps:
            lows = [end(m) for m in sorted(gap.after)]
            highs = [end(m) for m in sorted(gap.before)]
            start, arrive = Attr(Scope.EVENT, TICKS["t0"]), Attr(Scope.EVENT, TICKS["t1"])
            where = (
                [Cmp(">", start, low) for low in lows]
                if gap.after_all
                else [Cmp(">", start, extreme("LEAST", lows))]
            )
            where += (
                [Cmp("<", arrive, high) for high in highs]
                if gap.before_all
                else [Cmp("<", arrive, extreme("GREATEST", highs))]
            )
            negation = negations[gap.var]
            for stream in negation.types:
                unless = between_ends(
                    self.p, self.absent_true, negation, stream, pred, view, completing, where
                )
                self.drafts.append(Draft(EdgeKind.UNLESS, source, target, stream, unless, {}))
