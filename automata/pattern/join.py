"""AND patterns → join automata: a node per set of bound components (the lazy-chain seed's AND).

``AND(A a, B b, C c)`` matches one event per component, distinct, in any
order and any epochs, simultaneous ones included, within the window, the
whole WHERE holding.  A run is the set of components it has bound: the start
node is the empty set, the final node all of them, and from a set ``S`` an
event of a component ``c`` outside it moves a run to ``S ∪ {c}`` if the
conditions it decides hold — the WHERE conjuncts naming ``c`` whose other
components are in ``S`` (a conjunct naming none is judged on the first
event).  Each conjunct is so judged exactly once on every path, so a full run
holds the whole WHERE.  A negation (``AND(A a, B b, !(C c))``) guards each completing edge
with an UNLESS edge per negated stream: the completing event is the match's last by
arrival, and a run keeps its first event's end (``@first``, in ticks: the events carry
``TICKS(t0)`` and ``TICKS(t1)``), so a remembered negated event
between the two stops the match.  Under ``[k]`` every edge after the first also says
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

There are ``2**k - 1`` waiting nodes for ``k`` components; the engine runs
up to :data:`MAX_COMPONENTS`.
"""

from __future__ import annotations

from cesar.automata.automaton import Automaton, EdgeKind
from cesar.automata.pattern.ast import Index, Ref
from cesar.automata.pattern.drafts import Binding, Draft, any_of
from cesar.automata.pattern.lookback import FIRST_ARRIVAL, TICKS, between_ends
from cesar.automata.pattern.resolve import keys_of, rewrite
from cesar.automata.pattern.sequence import SeqBuilder
from cesar.automata.pattern.views import View
from cesar.automata.schema import AttrType
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

MAX_COMPONENTS = 8
"""The most components an AND the engine runs may have (255 waiting nodes)."""


class JoinBuilder(SeqBuilder):
    """Builds the join automaton of an AND pattern (module docstring); SeqBuilder's bindings,
    views and edges serve it, each component a singleton step."""

    def build(self) -> Automaton:
        steps = self.p.steps
        full = (1 << len(steps)) - 1
        sets = sorted(range(1, full), key=lambda s: (s.bit_count(), s))
        node_of = {0: 0, **{s: n for n, s in enumerate(sets, 1)}, full: len(sets) + 1}
        where = self.p.conjuncts
        conjuncts = [c for c in conjuncts_of(where) if not (isinstance(c, Truth) and c.value)]
        order = {step.var: n for n, step in enumerate(steps)}
        named = [sum(1 << order[self.p.refs[k].var] for k in set(keys_of(c))) for c in conjuncts]
        for bound in [0, *sets]:
            binding = self.bound_of(bound)
            if self.p.negations and bound:
                binding[FIRST_ARRIVAL] = (Attr(Scope.LEFT, FIRST_ARRIVAL), AttrType.INT)
            for n, step in enumerate(steps):
                mine = 1 << n
                if bound & mine:
                    continue
                target = bound | mine
                decided = [
                    c
                    for c, names in zip(conjuncts, named, strict=True)
                    if names & ~target == 0 and (names & mine or (not names and not bound))
                ]
                view = self.views.of(binding, step.var)
                pred = conjoin(
                    *(rewrite(self.absent_true(c, step.var), view) for c in decided),
                    *self.same_key(bound),
                )
                made: Binding = (
                    self.output(view, binding) if target == full else {**binding, **self.opened(n)}
                )
                stream = self.stream_of(step.types)
                pred = self.of_types(step.types, pred)
                if self.p.negations and target != full:
                    arrival: Term = Attr(Scope.EVENT, TICKS["t1"])
                    if bound:
                        arrival = Call("LEAST", (Attr(Scope.LEFT, FIRST_ARRIVAL), arrival))
                    made[FIRST_ARRIVAL] = (arrival, AttrType.INT)
                if target == full:
                    self.unless(node_of[bound], node_of[target], pred, view, step.var)
                self.add(EdgeKind.FORWARD, node_of[bound], node_of[target], stream, pred, made)
        for bound in sets:
            node = node_of[bound]
            moves = [d.pred for d in self.drafts if d.source == node and d.kind is EdgeKind.FORWARD]
            waiting = [step.types for n, step in enumerate(steps) if not bound & 1 << n]
            stream = self.stream_of(waiting[0])
            self.drafts.append(
                Draft(EdgeKind.FILTER, node, node, stream, any_of(moves), {}, joins=True)
            )
            self.add(EdgeKind.STAY, node, node, stream, TRUE)
        return self.assemble(node_of[full])

    def unless(self, source: int, target: int, pred: Pred, view: View, completing: str) -> None:
        """Guard the edge completing a run with an UNLESS edge per negated stream: no
        remembered event of a negation between the match's first and last events."""
        after_first = Cmp(">", Attr(Scope.EVENT, TICKS["t0"]), Attr(Scope.LEFT, FIRST_ARRIVAL))
        for negation in self.p.negations:
            for stream in negation.types:
                guard = between_ends(
                    self.p,
                    self.absent_true,
                    negation,
                    stream,
                    pred,
                    view,
                    completing,
                    [after_first],
                )
                self.drafts.append(Draft(EdgeKind.UNLESS, source, target, stream, guard, {}))

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
