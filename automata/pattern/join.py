"""AND patterns → join automata: a node per set of bound components (the lazy-chain seed's AND).

``AND(A a, B b, C c)`` matches one event per component, distinct, in any
order and any epochs, simultaneous ones included, within the window, the
whole WHERE holding.  A run is the set of components it has bound: the start
node is the empty set, the final node all of them, and from a set ``S`` an
event of a component ``c`` outside it moves a run to ``S ∪ {c}`` if the
conditions it decides hold — the WHERE conjuncts naming ``c`` whose other
components are in ``S`` (a conjunct naming none is judged on the first
event).  Each conjunct is so judged exactly once on every path, so a full run
holds the whole WHERE.  Under ``[k]`` every edge after the first also says
the event's ``k`` equals the run's, which the conditions imply, so that
placement sees the pattern is partitioned on ``k``.

The waiting nodes *join* (:mod:`cesar.automata.automaton`): they see events
by arrival, whatever their intervals, later events of the same epoch
included, and a run spans its events' smallest ``t0`` and largest ``t1``.
Every event is seen once by each run made before it, so each assignment of
distinct events to components is made exactly once — the first event's
component first, and so on in the order the events came.  A node's STAY edge
is TRUE (skip till any match): a run that moves on also stays, waiting for
other events.  The window bounds every ∃-edge's DUR, so a run goes when its
window has passed.

Components may be ordered (:class:`~cesar.automata.pattern.poset.Order`: SEQ and AND
nested in one another): a run then is a set closed under the order — a component is bound
only after those it follows, which arrived before it started — and the edge binding it also
says that it starts after each of them ends.  A run keeps those events' ends in ticks (the
events carry ``TICKS(t0)`` and ``TICKS(t1)``, derived attributes).  A negation's gap —
inside an AND, after its first event ends and before its last arrives; between a SEQ's parts
— is judged when a run completes, by an UNLESS edge per negated stream against the events
the engine remembers for the window (so a negation needs WITHIN); the completing event is
the match's last by arrival.

There are ``2**k - 1`` waiting nodes for ``k`` components (fewer when ordered); the engine
runs up to :data:`MAX_COMPONENTS`.
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.automaton import Automaton, EdgeKind
from cesar.automata.pattern.ast import Index, Ref
from cesar.automata.pattern.drafts import Binding, Draft, any_of
from cesar.automata.pattern.lookback import TICKS, join_guard
from cesar.automata.pattern.placing import keys_of, rewrite
from cesar.automata.pattern.poset import Order, unordered
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.pattern.sequence import SeqBuilder
from cesar.automata.pattern.views import View
from cesar.automata.schema import AttrType, StreamSchema
from cesar.automata.terms import (
    TRUE,
    Attr,
    Call,
    Cmp,
    Pred,
    Scope,
    Term,
    Truth,
    conjoin,
    conjuncts_of,
)
from cesar.automata.translate import Options

MAX_COMPONENTS = 8
"""The most components an AND the engine runs may have (255 waiting nodes)."""


class JoinBuilder(SeqBuilder):
    """Builds the join automaton of an AND pattern (module docstring), its components ordered
    by ``order`` (none for a flat AND); SeqBuilder's bindings, views and edges serve it, each
    component a singleton step."""

    def __init__(
        self,
        pattern: Resolved,
        schemas: Mapping[str, StreamSchema],
        options: Options,
        union: str | None,
        order: Order | None = None,
    ) -> None:
        super().__init__(pattern, schemas, options, union)
        self.order = order or unordered(len(pattern.steps), [g.var for g in pattern.negations])
        gaps = self.order.gaps
        self.timed = frozenset().union(*self.order.follows, *(g.after | g.before for g in gaps))
        """The components whose event's end (in ticks) a run keeps: what follows them, or a
        negation's gap, reads it."""

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
        where = self.p.conjuncts
        conjuncts = [c for c in conjuncts_of(where) if not (isinstance(c, Truth) and c.value)]
        order = {step.var: n for n, step in enumerate(steps)}
        named = [sum(1 << order[self.p.refs[k].var] for k in set(keys_of(c))) for c in conjuncts]
        for bound in [0, *sets]:
            binding = self.bound_of(bound)
            for n in self.timed:
                if bound >> n & 1:
                    end = _end(steps[n].var)
                    binding[end] = (Attr(Scope.LEFT, end), AttrType.INT)
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
                    Cmp(">", Attr(Scope.EVENT, TICKS["t0"]), Attr(Scope.LEFT, _end(steps[m].var)))
                    for m in sorted(self.order.follows[n])
                ]
                pred = conjoin(
                    *(rewrite(self.conditions.absent_true(c, step.var), view) for c in decided),
                    *self.same_key(bound),
                    *after,
                )
                pred = self.conditions.of_types(step.types, pred)
                made: Binding
                if target == full:
                    made = self.output(view, binding)
                    self.guard(node_of[bound], node_of[full], pred, view, step.var)
                else:
                    made = {**binding, **self.opened(n)}
                    if n in self.timed:
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

        start, arrive = Attr(Scope.EVENT, TICKS["t0"]), Attr(Scope.EVENT, TICKS["t1"])
        for gap in self.order.gaps:
            lows = [end(m) for m in sorted(gap.after)]
            highs = [end(m) for m in sorted(gap.before)]
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
                unless = join_guard(
                    self.p,
                    self.conditions.absent_true,
                    negation,
                    stream,
                    pred,
                    view,
                    completing,
                    where,
                )
                self.drafts.append(Draft(EdgeKind.UNLESS, source, target, stream, unless, {}))

    def same_key(self, bound: int) -> list[Pred]:
        """The event agrees with the run on each equivalence attribute (``[k]``): implied by
        the conditions, said on every edge so the automaton shows it is key-partitioned."""
        if not bound:
            return []
        first = self.p.steps[(bound & -bound).bit_length() - 1].var
        return [
            Cmp("=", Attr(Scope.EVENT, attr), Attr(Scope.LEFT, Ref(first, Index.ONLY, attr).key))
            for attr in self.p.partition
        ]

    def bound_of(self, bound: int) -> Binding:
        """What a run that has bound the components of the set ``bound`` keeps of them."""
        carried = self.carried(len(self.p.steps))
        keep = {
            ref.key for n in range(len(self.p.steps)) if bound & 1 << n for ref, _ in self.stored(n)
        }
        return {key: value for key, value in carried.items() if key in keep}


def _end(var: str) -> str:
    """The binding attribute holding a component's event's end, in ticks."""
    return f"@t1.{var}"
