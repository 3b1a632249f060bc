"""SEQ patterns → event automata: the NFAb of SASE+ §3 as FORWARD / REBIND / FILTER / STAY edges.

One node per NFAb state a run waits in: the start node waits for the first
step; a node ``W_k`` waits to begin singleton-preceded step ``k``; a node
``K_k`` is inside Kleene step ``k`` (its ``a[i]`` state).  After a Kleene
step there is no waiting node: a run proceeds to step ``k + 1`` only with an
event that begins it (SASE+ Step 6), so the FORWARD edge leaving ``K_k``
begins step ``k + 1`` directly.

At each node the strategy sets what a run may *ignore* (Step 3): everything
(any match), what it cannot begin or take (next match), other partitions'
events (partition contiguity) or nothing (strict contiguity); a negated
component between the steps kills on its events too.  The node's FILTER edge
is what *kills* or *moves* a run, so the engine looks at the instance, and
its STAY edge what it may ignore: a run both takes an event and stays, as any
match needs.  Every ∃-edge carries the window as ``DUR <= WITHIN + 1``, so the
engine drops a run when its window has passed.

A binding holds, per singleton variable ``v``, the attributes read later
(``v.x``); per Kleene variable ``a``, ``a[1].x``, ``a[a.LEN].x``, ``a.LEN``
and the running sum ``sum(a[].x)`` for averages and sums.  The binding
attribute names are the references' own keys, so ``cesar explain`` reads like
the pattern.

A node reads one stream.  Where a run must see several — a negation of
another stream, contiguity over several streams, a Kleene closure followed
by another stream, ANY — the pattern reads an internal union of its streams
(:func:`needs_union`), each event's stream in ``__type``; a condition on an
attribute the event's stream lacks is true there (SASE's rule for ANY), by
``__type`` of the event or of an earlier ANY component's, kept in the binding.
A Kleene closure over ANY keeps its first and last events' streams, and per
aggregated attribute how many of its events had it: an aggregate over none
of them is absent, and avg divides by that count.

Under a negation after the last component, a run that completes the last
step waits at a node of its own, killed by a negated event within the
window, and is published through a TIMEOUT edge when the clock passes the
window's end; the window is a constant of its binding, so runs of different
windows never share that node.

A negation between a Kleene closure and the next component does not kill a
run in the closure: its negated event replaces the run by one marked spoiled
in its binding (a REBIND that keeps the run's end: the event is not in the
match), which may take again — and is then fresh: the negated event is no
longer between — but not proceed.  Under a strategy that may not skip what it
can take, a run that takes an event into the closure in the epoch of the negated
one has no such copy (the edge is ``unless_taken``): the copy would have skipped
it.  Proceeding to the next component is a fork of its own, and does not count.

A negation a run cannot judge when its event comes (one before the first
component, or one whose condition names a later component) is judged when
the run completes, by an UNLESS edge per negated stream on each completing
edge (:mod:`cesar.automata.pattern.lookback`); the run keeps the times that
needs, set by DUR on the edges that take its events.

:class:`SeqBuilder` also keeps what every pattern automaton shares (bindings
and views of the references); :mod:`cesar.automata.pattern.join` builds AND
patterns on it, and both write their edges as drafts
(:mod:`cesar.automata.pattern.drafts`).
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.automaton import Automaton, EdgeKind, Node
from cesar.automata.pattern.ast import AGGREGATES, Index, Ref, Strategy
from cesar.automata.pattern.conditions import ZERO, Conditions
from cesar.automata.pattern.drafts import Binding, Draft, any_of, edges_of
from cesar.automata.pattern.lookback import ARRIVAL, DEPARTURE, UNION_TYPE, looking_back, unless
from cesar.automata.pattern.marks import Marks
from cesar.automata.pattern.placing import Negation, rewrite_term
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.pattern.views import DIVISOR, View, Views, counted, divisor
from cesar.automata.schema import AttrType, StreamSchema
from cesar.automata.terms import (
    FALSE,
    TRUE,
    Arith,
    Attr,
    Cmp,
    Const,
    Dur,
    Not,
    Or,
    Pred,
    Scope,
    Term,
    conjoin,
)
from cesar.automata.translate import Options

WINDOW = "WITHIN"
"""The binding attribute of a run waiting out a trailing negation: its window, a constant of
the edge's shape, so runs of different windows never share a node (its deadline is one)."""


class SeqBuilder:
    def __init__(
        self,
        pattern: Resolved,
        schemas: Mapping[str, StreamSchema],
        options: Options,
        union: str | None,
    ) -> None:
        self.p = pattern
        self.union = union
        """The union stream every edge reads, or None: each edge reads its component's."""
        self.schemas = schemas
        self.options = options
        self.drafts: list[Draft] = []
        self.attributes: dict[int, tuple[tuple[str, AttrType], ...]] = {0: ()}
        self.bound = (
            None
            if pattern.window is None
            else Cmp("<=", Dur(), Const(pattern.window + 1, AttrType.INT))
        )
        self.deferred = looking_back(pattern)
        """The negations judged against remembered events when a run completes."""
        self.needed: dict[str, set[tuple[Index, str | None, str | None]]] = {}
        for ref in pattern.refs.values():
            self.needed.setdefault(ref.var, set()).add((ref.index, ref.attr, ref.aggregate))
        self._stored: dict[int, list[tuple[Ref, AttrType]]] = {}
        self._carried: dict[int, Binding] = {}
        self.views = Views(pattern.refs)
        self.conditions = Conditions(pattern, schemas, union, self.views)
        self.marks = Marks(pattern)

    # ------------------------------------------------------------ bindings

    def stored(self, n: int) -> list[tuple[Ref, AttrType]]:
        """What a binding keeps of step ``n``: the references it stores, with their types
        (worked out once per step: every later step's binding carries it)."""
        known = self._stored.get(n)
        if known is None:
            known = self._stored[n] = self._store(n)
        return list(known)

    def _store(self, n: int) -> list[tuple[Ref, AttrType]]:
        step = self.p.steps[n]
        needed = self.needed.get(step.var, set())

        def attrs(*indices: Index, of: tuple[str | None, ...] = (None,)) -> list[str]:
            return sorted({a for i, a, g in needed if i in indices and g in of and a})

        def typ(attr: str) -> AttrType:
            found = {self.schemas[t].type_of(attr) for t in step.types} - {None}
            if len(found) > 1:  # int in one stream, float in another (resolve allows no more)
                return AttrType.FLOAT
            (only,) = found
            assert only is not None, f"{step.var}.{attr}"
            return only

        var = step.var
        anchors = [(Ref(var, Index.ONLY, a), AttrType.INT) for a in self.anchors(n)]
        if not step.kleene:
            kept = [(Ref(var, Index.ONLY, a), typ(a)) for a in attrs(Index.ONLY)]
            if self.union is not None and len(step.types) > 1:  # which stream, for absent values
                kept.insert(0, (Ref(var, Index.ONLY, UNION_TYPE), AttrType.STRING))
            return kept + anchors
        runs = (Index.ALL, Index.UPTO_PREVIOUS)
        out = [(Ref(var, Index.LEN, None), AttrType.INT)]
        out += [(Ref(var, Index.FIRST, a), typ(a)) for a in attrs(Index.FIRST)]
        out += [(Ref(var, Index.LAST, a), typ(a)) for a in attrs(Index.LAST, Index.PREVIOUS)]
        sums = attrs(*runs, of=("SUM", "AVG"))
        out += [(Ref(var, Index.ALL, a, "SUM"), AttrType.FLOAT) for a in sums]
        for extreme in ("MIN", "MAX"):
            out += [(Ref(var, Index.ALL, a, extreme), typ(a)) for a in attrs(*runs, of=(extreme,))]
        # Over ANY, an event may lack an attribute: which stream the first and last came from,
        # and per aggregated attribute how many events had it (and that count, at least 1).
        if any(self.conditions.lacking(var, a) for a in attrs(Index.FIRST)):
            out.append((Ref(var, Index.FIRST, UNION_TYPE), AttrType.STRING))
        if any(self.conditions.lacking(var, a) for a in attrs(Index.LAST, Index.PREVIOUS)):
            out.append((Ref(var, Index.LAST, UNION_TYPE), AttrType.STRING))
        for a in attrs(*runs, of=AGGREGATES):
            if self.conditions.lacking(var, a):
                out += [(counted(var, a), AttrType.INT), (divisor(var, a), AttrType.INT)]
        if n < len(self.p.steps) - 1 and self.after(n):
            out.append((_spoiled(var), AttrType.BOOL))
        return out + anchors

    def anchors(self, n: int) -> list[str]:
        """The times of step ``n``'s events a looking-back negation reads, relative to the run's
        start: :data:`ARRIVAL` (its first event's end), :data:`DEPARTURE` (its last event's end,
        for a closure; a singleton's is its arrival)."""
        out = []
        for g in self.deferred:
            if g.after + 1 == n:
                out.append(ARRIVAL)
            if g.after == n:
                out.append(DEPARTURE if self.p.steps[n].kleene else ARRIVAL)
        out += [anchor for step, anchor in self.marks.anchors() if step == n]
        return sorted(set(out))

    def carried(self, upto: int) -> Binding:
        """Steps ``0 .. upto - 1``'s stored references, copied from the instance."""
        known = self._carried.get(upto)
        if known is None:
            known = self._carried[upto] = {
                ref.key: (Attr(Scope.LEFT, ref.key), typ)
                for n in range(upto)
                for ref, typ in self.stored(n)
            }
        return dict(known)

    def opened(self, n: int) -> Binding:
        """Step ``n``'s stored references as the event that begins it sets them (a count of
        events having an attribute as if it had it: see :meth:`openings`)."""
        out: Binding = {}
        for ref, typ in self.stored(n):
            if ref.index is Index.LEN or ref.aggregate in ("COUNT", DIVISOR):
                out[ref.key] = (Const(1, AttrType.INT), typ)
            elif ref.attr in (ARRIVAL, DEPARTURE):
                out[ref.key] = (Dur(), typ)  # the event's end, relative to the run's start
            elif _is_spoiled(ref):
                out[ref.key] = (Const(False, AttrType.BOOL), typ)
            else:
                assert ref.attr is not None
                out[ref.key] = (Attr(Scope.EVENT, ref.attr), typ)
        return out

    def openings(self, n: int) -> list[tuple[Pred, Binding]]:
        """Step ``n``'s stored references as the event that begins it sets them, one (condition,
        binding) per combination of the attributes it lacks, the conditions exclusive."""
        variants: list[tuple[Pred, Binding]] = [(TRUE, self.opened(n))]
        var = self.p.steps[n].var
        for ref, typ in self.stored(n):
            if ref.aggregate != "COUNT":
                continue
            lacks = self.conditions.of_stream(self.conditions.lacking(var, ref.attr))
            variants = [
                (conjoin(pred, extra), {**binding, ref.key: (Const(count, AttrType.INT), typ)})
                for pred, binding in variants
                for extra, count in ((lacks, 0), (Not(lacks), 1))
            ]
        return variants

    def grown(self, n: int) -> list[tuple[Pred, Binding]]:
        """Kleene step ``n``'s stored references after it takes one more event.

        A running min or max keeps the old value or takes the event's: one
        (condition, binding) per combination, the conditions exclusive (events
        hold no NaN), so exactly one take edge fires.
        """
        variants: list[tuple[Pred, Binding]] = [(TRUE, {})]
        var = self.p.steps[n].var
        for ref, typ in self.stored(n):
            left: Term = Attr(Scope.LEFT, ref.key)
            options: list[tuple[Pred, Term]] = [(TRUE, left)]
            if ref.aggregate == DIVISOR:
                continue  # set with its count
            if ref.aggregate == "COUNT":
                assert ref.attr is not None
                lacks = self.conditions.of_stream(self.conditions.lacking(var, ref.attr))
                more = Arith("+", left, Const(1, AttrType.INT))
                shares = divisor(var, ref.attr).key
                variants = [
                    (conjoin(pred, extra), {**binding, ref.key: (count, typ), shares: (den, typ)})
                    for pred, binding in variants
                    for extra, count, den in (
                        (lacks, left, Attr(Scope.LEFT, shares)),
                        (Not(lacks), more, more),
                    )
                ]
                continue
            if ref.index is Index.LEN:
                options = [(TRUE, Arith("+", left, Const(1, AttrType.INT)))]
            elif ref.attr == DEPARTURE:
                options = [(TRUE, Dur())]
            elif _is_spoiled(ref):
                options = [(TRUE, Const(False, AttrType.BOOL))]  # its last event is after them
            elif ref.index is Index.LAST:
                assert ref.attr is not None
                options = [(TRUE, Attr(Scope.EVENT, ref.attr))]
            elif ref.aggregate == "SUM":
                assert ref.attr is not None
                options = [(TRUE, Arith("+", left, Attr(Scope.EVENT, ref.attr)))]
            elif ref.aggregate in ("MIN", "MAX"):
                assert ref.attr is not None
                event = Attr(Scope.EVENT, ref.attr)
                beats: Pred = Cmp("<" if ref.aggregate == "MIN" else ">", event, left)
                lacking = self.conditions.lacking(var, ref.attr)
                if lacking:  # the event must have it; the first that has it wins
                    lacks = self.conditions.of_stream(lacking)
                    none = Cmp("=", Attr(Scope.LEFT, counted(var, ref.attr).key), ZERO)
                    beats = conjoin(Not(lacks), Or((none, beats)))
                options = [(beats, event), (Not(beats), left)]
            variants = [
                (conjoin(pred, extra), {**binding, ref.key: (term, typ)})
                for pred, binding in variants
                for extra, term in options
            ]
        return variants

    # -------------------------------------------------------------- edges

    def add(
        self,
        kind: EdgeKind,
        source: int,
        target: int,
        stream: str,
        pred: Pred,
        binding: Binding | None = None,
        keeps_end: bool = False,
        unless_taken: bool = False,
    ) -> None:
        if kind not in (EdgeKind.FILTER, EdgeKind.STAY) and self.bound is not None:
            pred = conjoin(pred, self.bound)
        self.drafts.append(
            Draft(kind, source, target, stream, pred, binding or {}, keeps_end, False, unless_taken)
        )
        if binding is not None:
            self.attributes.setdefault(
                target, tuple((name, typ) for name, (_, typ) in binding.items())
            )

    def output(self, view: View, binding: Binding) -> Binding:
        """The match's attributes, read through ``view``, and what its after-match policy reads
        (:class:`~cesar.automata.pattern.marks.Marks`) from the run's ``binding`` on the
        completing edge."""
        types = dict(self.p.output.attributes)
        out = {name: (rewrite_term(term, view), types[name]) for name, term in self.p.returns}
        return {**out, **self.marks.hidden(view, binding)}

    def build(self) -> Automaton:
        steps = self.p.steps
        last = len(steps) - 1
        waiting: dict[int, int] = {0: 0}
        inside: dict[int, int] = {}
        for n, step in enumerate(steps):
            if n and not steps[n - 1].kleene:
                waiting[n] = len(waiting) + len(inside)
            if step.kleene:
                inside[n] = len(waiting) + len(inside)
        final = len(waiting) + len(inside)
        trailing = [g for g in self.p.negations if g.after == last]
        done_at = final  # where a run that completes the last step goes
        if trailing:
            final += 1  # a completed run waits out its window at done_at
        for n, step in enumerate(steps):
            stream = self.stream_of(step.types)
            sources: list[tuple[int, Pred]] = []
            if n in waiting:
                sources.append((waiting[n], TRUE))
            if n - 1 in inside:
                closed = self.conditions.closes(n - 1, self.views.of(self.carried(n)))
                if self.after(n - 1):  # no negated event since the closure's last take
                    fresh = Attr(Scope.LEFT, _spoiled(steps[n - 1].var).key)
                    closed = conjoin(closed, Cmp("=", fresh, Const(False, AttrType.BOOL)))
                sources.append((inside[n - 1], closed))
            for source, closed in sources:
                begin = conjoin(closed, self.conditions.begins(n, self.carried(n)))
                if step.kleene:
                    for variant, state in self.openings(n):
                        opening = {**self.carried(n), **state}
                        starts = conjoin(begin, variant)
                        self.add(EdgeKind.FORWARD, source, inside[n], stream, starts, opening)
                        if n == last:
                            after = self.views.of(opening)
                            done = conjoin(starts, self.conditions.closes(n, after))
                            self.complete(source, done_at, stream, done, opening, after, True)
                    continue
                opened = {**self.carried(n), **self.opened(n)}
                if n == last:
                    view = self.views.of(self.carried(n), step.var)
                    self.complete(source, done_at, stream, begin, opened, view, True)
                else:
                    self.add(EdgeKind.FORWARD, source, waiting[n + 1], stream, begin, opened)
        for n, node in inside.items():
            step = steps[n]
            stream = self.stream_of(step.types)
            take = self.conditions.takes(n, self.carried(n + 1))
            for variant, state in self.grown(n):
                grown = {**self.carried(n), **state}
                self.add(EdgeKind.REBIND, node, node, stream, conjoin(take, variant), grown)
                if n == last:
                    after = self.views.of(grown)
                    done = conjoin(take, variant, self.conditions.closes(n, after))
                    self.complete(node, done_at, stream, done, grown, after, False)
            if n < last and self.after(n):
                binding = self.carried(n + 1)
                negated = [self.conditions.negated(g, binding) for g in self.after(n)]
                seen = conjoin(self.conditions.ignore(n, binding, kleene=True), any_of(negated))
                mark = _spoiled(step.var).key
                spoilt = {**binding, mark: (Const(True, AttrType.BOOL), AttrType.BOOL)}
                # A run that may not skip what it takes has no spoiled copy that did not.
                skips = self.p.strategy is Strategy.ANY
                self.add(
                    EdgeKind.REBIND,
                    node,
                    node,
                    stream,
                    seen,
                    spoilt,
                    keeps_end=True,
                    unless_taken=not skips,
                )
        for n, node in waiting.items():
            if node:
                self.loops(n, node, kleene=False)
        for n, node in inside.items():
            self.loops(n, node, kleene=True)
        if trailing:
            self.wait_out(done_at, final, trailing)
        return self.assemble(final)

    def complete(
        self,
        source: int,
        target: int,
        stream: str,
        pred: Pred,
        binding: Binding,
        view: View,
        arriving: bool,
    ) -> None:
        """The edge of a run completing the last step: the match, or (with a trailing
        negation) the run waiting out its window at ``target``, the window in its binding.

        ``view`` reads the references on the edge; ``arriving``: the event
        begins the last step.  Each looking-back negation guards the edge with
        an UNLESS edge per negated stream.
        """
        for negation in self.deferred:
            for stream_type in negation.types:
                guard = unless(
                    self.p, self.conditions.absent_true, negation, stream_type, pred, view, arriving
                )
                self.drafts.append(Draft(EdgeKind.UNLESS, source, target, stream_type, guard, {}))
        if self.after(len(self.p.steps) - 1):
            assert self.p.window is not None
            waiting = {**binding, WINDOW: (Const(self.p.window, AttrType.INT), AttrType.INT)}
            self.add(EdgeKind.FORWARD, source, target, stream, pred, waiting)
        else:
            self.add(EdgeKind.FORWARD, source, target, stream, pred, self.output(view, binding))

    def wait_out(self, node: int, final: int, trailing: list[Negation]) -> None:
        """A completed run's node under a trailing negation: killed by a negated event in the
        window, published through TIMEOUT when the window has passed."""
        assert self.bound is not None
        binding = self.carried(len(self.p.steps))
        types = {g.types for g in trailing}
        stream = self.union or next(iter(types))[0]
        kills = [self.conditions.negated(g, binding) for g in trailing]
        watch = conjoin(kills[0] if len(kills) == 1 else Or(tuple(kills)), self.bound)
        self.add(EdgeKind.FILTER, node, node, stream, watch)
        self.drafts.append(
            Draft(
                EdgeKind.TIMEOUT,
                node,
                final,
                stream,
                self.bound,
                self.output(self.views.of(binding), binding),
            )
        )

    def after(self, n: int) -> list[Negation]:
        """The negations between step ``n`` and the next (or after the last step) that kill or
        mark a run when their event comes (the others look back: :func:`looking_back`)."""
        return [g for g in self.p.negations if g.after == n and g not in self.deferred]

    def loops(self, n: int, node: int, kleene: bool) -> None:
        """The node's FILTER (what kills or moves a run) and STAY (what it may ignore).

        A negated event a run must not skip past kills it before a waiting step;
        inside a closure it replaces the run by one marked spoiled (which may take
        again, and is then fresh, but not proceed), keeping the run's end.
        """
        strategy = self.p.strategy
        step = self.p.steps[n]
        binding = self.carried(n + 1 if kleene else n)
        last = len(self.p.steps) - 1
        inside = self.after(n) if n < last else []
        negations = inside if kleene else self.after(n - 1)
        ignore = self.conditions.ignore(n, binding, kleene)
        for negation in negations:
            ignore = conjoin(ignore, Not(self.conditions.negated(negation, binding)))
        moves = [d.pred for d in self.drafts if d.source == node and d.kind in _MOVES]
        watch: Pred = Or((Not(ignore), *moves))
        stream = self.stream_of(step.types)
        self.add(EdgeKind.FILTER, node, node, stream, watch)
        # Under next match a waiting run ignores exactly what it cannot begin: FILTER says it.
        plain = strategy is Strategy.NEXT and not kleene and not negations
        if ignore != FALSE and not plain:
            self.add(EdgeKind.STAY, node, node, stream, ignore)

    def stream_of(self, types: tuple[str, ...]) -> str:
        """The stream an edge for events of ``types`` reads: theirs, or the union."""
        return self.union or types[0]

    def assemble(self, final: int) -> Automaton:
        self.attributes[final] = self.p.output.attributes + self.marks.attributes()
        nodes = tuple(Node(n, self.attributes.get(n, ())) for n in range(final + 1))
        edges = edges_of(self.drafts, self.options)
        return Automaton(self.p.output, nodes, edges, final, skip=self.p.skip)


SPOILED = "@spoiled"
"""A Kleene closure's binding flag: a negated event came since its last take (no name has @)."""


_MOVES = (EdgeKind.FORWARD, EdgeKind.REBIND)
"""The kinds of edge that move a run (a FILTER edge lets in the events that fire them)."""


def _spoiled(var: str) -> Ref:
    """The reference naming ``var``'s :data:`SPOILED` flag in a binding."""
    return Ref(var, Index.ONLY, SPOILED)


def _is_spoiled(ref: Ref) -> bool:
    """``ref`` is its variable's :func:`_spoiled` (built only for a reference of its name)."""
    return ref.attr == SPOILED and ref == _spoiled(ref.var)
