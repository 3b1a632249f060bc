"""The pattern language's literal evaluator: NFAb runs over a finite stream (SASE+ §3.1).

This module is the oracle for patterns, as :mod:`cesar.automata.reference` is
for CEL.  It follows the papers' definitions with no sharing and no indices,
epoch by epoch (events of one ``t1`` are simultaneous):

* A *run* holds the events it selected and the step it is at.  Every event
  that satisfies the first step's ``begin`` starts a run.  A run sees only
  the events that start after its last selected event ends (so successive
  components lie in strictly later epochs, as CEL's NEXT).
* At a step, a run *begins* the step with each event that satisfies its
  ``begin`` (a singleton step is then done; a Kleene step goes on).  In a
  Kleene step a run *takes* each event that satisfies ``take`` (``a[i]``) and
  *proceeds* with each event that, the closure's ``close`` holding, begins
  the next step.  Every move forks a new run; the run itself *stays* only if
  it may ignore every event it sees in the epoch — strict contiguity never
  ignores, partition contiguity ignores other partitions' events, skip till
  next match ignores what it cannot begin (or take), skip till any match
  ignores everything (SASE+ §3.2, Step 3).
* A run that completes its last step (a Kleene last step: after each event
  it selects) is a match, if within the window (``last.t1 - first.t0 <=
  WITHIN``).  Negation is the nested query of SASE (§2.2.2): a match is
  dropped if a negated component's event, satisfying its conditions with the
  match, lies between the steps around it (it starts after the earlier step's
  event ends and arrives in an epoch before the later step's event: strictly
  between, for point events), in the window before the first step, or after
  the last step up to the window's end; a match with a
  trailing negation is known, and emitted, once an epoch at or after its
  window's end has been processed (its output ends at the window's end).
* AND: one event per component, distinct, in any order and any epochs
  (simultaneous ones included), within the window, the whole WHERE holding; a
  negation in it drops a match if a negated event meeting its conditions starts
  after the match's first event ends and arrives in an epoch before its last.

A condition naming an attribute the matched event's stream lacks (possible
under ``ANY``) is true, as SASE defines.  Arithmetic faults make a condition
false and are counted.  Exponential in the worst case by design: exact is
what counts.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cesar.automata.arithmetic import ArithmeticFault, arith
from cesar.automata.derived import enrich_all
from cesar.automata.evaluate import Env, Faults, eval_term, holds, negate, store
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.pattern.ast import Index, Ref, Strategy
from cesar.automata.pattern.placing import BETWEEN_ENDS, Negation, Step, keys_of
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event, Value, epochs
from cesar.automata.skipping import bound_of, select
from cesar.automata.terms import TRUE, And, Cmp, Not, Or, Pred, Scope, Term

Selection = tuple[tuple[Event, ...], ...]
"""The events a run selected, per positive step."""


@dataclass(frozen=True, slots=True)
class _Run:
    """A run: its selections for steps ``0 .. at`` (the last maybe a growing Kleene closure)."""

    at: int
    selected: Selection

    @property
    def t0(self) -> int:
        return self.selected[0][0].t0

    @property
    def t1(self) -> int:
        return self.selected[-1][-1].t1


def evaluate(
    pattern: Resolved,
    streams: Mapping[str, Sequence[Event]],
    faults: Faults | None = None,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
) -> list[Event]:
    """The multiset of events ``pattern`` publishes over ``streams`` (stream name → events);
    its window aggregates are computed from the whole streams first."""
    if pattern.windows:
        streams = enrich_all(streams, pattern.windows)
    return _Evaluator(pattern, streams, faults or Faults(), functions).run()


class Judge:
    """How ``pattern`` judges selections: predicates, negations and the output event.

    The literal evaluator's runs use it, and so do the lazy and recomputing plans
    (:mod:`cesar.automata.pattern.lazy`), which choose their events in another order
    but must judge them as the oracle does.
    """

    def __init__(self, pattern: Resolved, faults: Faults, functions: FunctionRegistry) -> None:
        self.p = pattern
        self.faults = faults
        self.functions = functions
        self.vars = {step.var: n for n, step in enumerate(pattern.steps)}
        self.trailing = any(n.after == len(pattern.steps) - 1 for n in pattern.negations)
        self.keys: dict[Term | Pred, list[str]] = {}
        """The reference keys each judged term or predicate reads, found once."""
        self.plain: dict[Pred, bool] = {}
        """Whether each judged predicate holds no NOT, found once."""

    # ------------------------------------------------------------ judgement

    def judge(self, pred: Pred, selected: Selection, event: Event | None, at: int) -> bool:
        """``pred`` for the events ``selected`` with ``event`` as step ``at``'s current event."""
        if pred == TRUE:
            return True
        return self.holds(pred, self.values(pred, selected, event, at))

    def values(
        self,
        node: Term | Pred,
        selected: Selection,
        event: Event | None = None,
        at: int = -1,
        negated: tuple[str, Event] | None = None,
    ) -> dict[str, Value]:
        """The value of each reference ``node`` reads; absent attributes are left out.

        ``event`` is step ``at``'s current event (the one begun or taken);
        ``negated`` a negated variable's candidate event.
        """
        out: dict[str, Value] = {}
        keys = self.keys.get(node)
        if keys is None:
            keys = self.keys[node] = keys_of(node)
        for key in keys:
            value = self.value(self.p.refs[key], selected, event, at, negated)
            if value is not None:
                out[key] = value
        return out

    def value(
        self,
        ref: Ref,
        selected: Selection,
        event: Event | None,
        at: int,
        negated: tuple[str, Event] | None,
    ) -> Value | None:
        n = self.vars.get(ref.var)
        if n is None:
            assert negated is not None and negated[0] == ref.var
            return _attr(negated[1], ref.attr)
        beginning = len(selected) == at
        if n == at and (
            ref.index in (Index.ONLY, Index.CURRENT) or (ref.index is Index.FIRST and beginning)
        ):
            assert event is not None
            return _attr(event, ref.attr)
        events = selected[n]
        if ref.index is Index.LEN:
            return len(events)
        if ref.index in (Index.ONLY, Index.FIRST):
            return _attr(events[0], ref.attr)
        if ref.index in (Index.PREVIOUS, Index.LAST):
            return _attr(events[-1], ref.attr)
        assert ref.aggregate is not None and ref.attr is not None
        found = [v for e in events if (v := _attr(e, ref.attr)) is not None]
        return aggregate(ref.aggregate, found)

    def holds(self, pred: Pred, values: Mapping[str, Value]) -> bool:
        """``pred`` over ``values`` (its references' values, as :meth:`values` gives them)."""
        env = Env({Scope.EVENT: values}, 0)
        keys = self.keys.get(pred)
        plain = self.plain.get(pred)
        if plain is None:
            plain = self.plain[pred] = without_not(pred)
        if keys is None or len(keys) != len(values) or not plain:
            pred = _absent_true(pred, values)  # some value is absent, or NOT is to push down
        return holds(pred, env, self.faults, self.functions)

    # -------------------------------------------------------------- matches

    def emit(self, selected: Selection, around: Sequence[Event]) -> list[Event]:
        """The output event of a completed selection, or none if a negation (an event of
        ``around`` where it must not be) or a fault drops it."""
        if any(self.violated(negation, selected, around) for negation in self.p.negations):
            return []
        t0, t1 = selected[0][0].t0, selected[-1][-1].t1
        if self.p.window is not None and self.trailing:
            t1 = t0 + self.p.window
        row: dict[str, Value] = {}
        types = dict(self.p.output.attributes)
        for name, term in self.p.returns:
            env = Env({Scope.EVENT: self.values(term, selected)}, 0)
            try:
                row[name] = store(eval_term(term, env, self.functions), types[name])
            except ArithmeticFault:
                self.faults.arithmetic += 1
                return []
        return [Event.of(self.p.output.name, t0, t1, row)]

    def violated(self, negation: Negation, selected: Selection, around: Sequence[Event]) -> bool:
        """True if an event of ``around`` of the negated component lies where it must not,
        meeting its test."""
        low, high = self.gap(negation.after, selected)
        for event in around:
            if event.stream in negation.types and low < event.t0 and event.t1 < high:
                values = self.values(negation.pred, selected, negated=(negation.var, event))
                if self.holds(negation.pred, values):
                    return True
        return False

    def gap(self, after: int, selected: Selection) -> tuple[float, float]:
        """(low, high): a negated event watched after step ``after`` starts after low and ends
        before high — after the previous step's event ends and in an epoch before the next
        step's event arrives (for point events: strictly between them)."""
        window = self.p.window
        if after == BETWEEN_ENDS:  # an AND's: after its first event ends, arriving before its last
            arrivals = [events[0].t1 for events in selected]
            return min(arrivals), max(arrivals)
        if after == -1:
            assert window is not None
            return selected[-1][-1].t1 - window - 1, selected[0][0].t1
        if after == len(self.p.steps) - 1:
            assert window is not None
            return selected[-1][-1].t1, selected[0][0].t0 + window + 1
        return selected[after][-1].t1, selected[after + 1][0].t1


class _Evaluator(Judge):
    def __init__(
        self,
        pattern: Resolved,
        streams: Mapping[str, Sequence[Event]],
        faults: Faults,
        functions: FunctionRegistry,
    ) -> None:
        super().__init__(pattern, faults, functions)
        self.events = [e for name in sorted(pattern.reads) for e in streams.get(name, ())]

    def run(self) -> list[Event]:
        if self.p.operator == "AND":
            return self.conjunction()
        runs: list[_Run] = []
        pending: list[Selection] = []
        out: list[tuple[Selection, Event]] = []
        window = self.p.window if self.p.window is not None else 0
        t1 = 0
        for epoch in epochs(self.events):
            t1 = epoch[0].t1
            matches: list[Selection] = []
            runs = self.advance(runs, epoch, matches)
            if not self.trailing:
                out.extend((m, e) for m in matches for e in self.emit(m, self.events))
                continue
            pending.extend(matches)
            out.extend(
                (m, e)
                for m in pending
                if m[0][0].t0 + window <= t1
                for e in self.emit(m, self.events)
            )
            pending = [m for m in pending if m[0][0].t0 + window > t1]
        if self.p.skip is not None:
            return self.skipped(out)
        return [e for _, e in out]

    def skipped(self, matches: list[tuple[Selection, Event]]) -> list[Event]:
        """The matches an after-match policy publishes from the whole input (it has ended: no
        run can complete any more, as when Flink's final watermark passes): taken in order of
        (start, end, t0, values, bound) per partition, each kept if it starts after the
        bound the last kept one set (:mod:`cesar.automata.skipping`)."""
        skip = self.p.skip
        assert skip is not None
        variables = [step.var for step in self.p.steps]
        taken = []
        for selected, event in matches:
            start = selected[0][0].t1
            events_of = dict(zip(variables, selected, strict=True)).__getitem__
            bound = bound_of(skip, start, selected[-1][-1].t1, events_of)
            first = selected[0][0]
            key = tuple(first.value(a) for a in self.p.partition) if self.p.keyed else ()
            taken.append((start, bound, key, event))
        return select(taken)

    # ------------------------------------------------------------- the runs

    def advance(self, runs: list[_Run], epoch: list[Event], matches: list[Selection]) -> list[_Run]:
        """Every run after ``epoch``; completed selections go to ``matches``."""
        out: list[_Run] = []
        for run in runs:
            visible = [e for e in epoch if e.t0 > run.t1]
            if not visible:
                out.append(run)
                continue
            if all(self.ignores(run, e) for e in visible):
                out.append(run)
            for event in visible:
                self.moves(run, event, out, matches)
        for event in epoch:
            self.select(None, 0, event, out, matches)
        window = self.p.window
        if window is None:
            return out
        t1 = epoch[0].t1
        return [run for run in out if t1 - run.t0 < window]

    def growing(self, run: _Run) -> bool:
        """True if the run is inside a Kleene step (it has begun it and may take more)."""
        return len(run.selected) == run.at + 1

    def moves(self, run: _Run, event: Event, out: list[_Run], matches: list[Selection]) -> None:
        """Every move ``run`` makes on ``event``: begin, take, or proceed; each forks a run."""
        if not self.growing(run):
            self.select(run, run.at, event, out, matches)
            return
        step = self.p.steps[run.at]
        if event.stream in step.types and self.judge(step.take, run.selected, event, run.at):
            grown = (*run.selected[:-1], run.selected[-1] + (event,))
            self.place(_Run(run.at, grown), out, matches)
        if run.at + 1 < len(self.p.steps) and self.judge(step.close, run.selected, None, run.at):
            self.select(run, run.at + 1, event, out, matches)

    def select(
        self,
        run: _Run | None,
        at: int,
        event: Event,
        out: list[_Run],
        matches: list[Selection],
    ) -> None:
        """Begin step ``at`` with ``event`` if it may."""
        step = self.p.steps[at]
        if event.stream not in step.types:
            return
        base = _Run(at, ()) if run is None else _Run(at, run.selected)
        if not self.judge(step.begin, base.selected, event, at):
            return
        self.place(_Run(at, (*base.selected, (event,))), out, matches)

    def place(self, run: _Run, out: list[_Run], matches: list[Selection]) -> None:
        """Keep a run that selected an event; report it if it completes the pattern."""
        window = self.p.window
        if window is not None and run.t1 - run.t0 > window:
            return
        steps = self.p.steps
        last = run.at == len(steps) - 1
        if not steps[run.at].kleene:
            if last:
                matches.append(run.selected)
            else:
                out.append(_Run(run.at + 1, run.selected))
            return
        out.append(run)
        if last and self.judge(steps[run.at].close, run.selected, None, run.at):
            matches.append(run.selected)

    def ignores(self, run: _Run, event: Event) -> bool:
        """True if the run may skip ``event`` under the pattern's strategy."""
        strategy = self.p.strategy
        if strategy is Strategy.ANY:
            return True
        if strategy is Strategy.STRICT:
            return False
        if strategy is Strategy.PARTITION:
            anchor = run.selected[0][0].attrs()
            values = event.attrs()
            return not all(
                attr in values and values[attr] == anchor[attr] for attr in self.p.partition
            )
        step = self.p.steps[run.at]
        if event.stream not in step.types:
            return True
        if self.growing(run):
            return not self.judge(step.take, run.selected, event, run.at)
        return not self.judge(step.begin, run.selected, event, run.at)

    def conjunction(self) -> list[Event]:
        """AND: every assignment of distinct events to the components, in any order."""
        steps: Sequence[Step] = self.p.steps
        window = self.p.window
        out: list[Event] = []
        choices = [[e for e in self.events if e.stream in s.types] for s in steps]
        for combo in itertools.product(*choices):
            if len({id(e) for e in combo}) < len(combo):
                continue
            t0, t1 = min(e.t0 for e in combo), max(e.t1 for e in combo)
            if window is not None and t1 - t0 > window:
                continue
            selected: Selection = tuple((e,) for e in combo)
            values = self.values(self.p.conjuncts, selected)
            if not self.holds(self.p.conjuncts, values):
                continue
            for event in self.emit(selected, self.events):
                out.append(Event(event.stream, t0, t1, event.values))
        return out


def _attr(event: Event, attr: str | None) -> Value | None:
    assert attr is not None
    return event.value(attr)


def aggregate(function: str, values: list[Value]) -> Value | None:
    """``function`` (AVG, SUM, MIN, MAX, COUNT) of a Kleene variable's ``values``, summed in
    order; None for an empty list but COUNT's."""
    if function == "COUNT":
        return len(values)
    if not values:
        return None
    if function == "MIN":
        return min(values)
    if function == "MAX":
        return max(values)
    total: Value = float(values[0])
    for value in values[1:]:
        total = arith("+", total, value)
    return arith("/", total, len(values)) if function == "AVG" else total


def without_not(pred: Pred) -> bool:
    """True if ``pred`` holds no NOT (then :func:`_absent_true` leaves it as it is when no
    value is absent)."""
    if isinstance(pred, Not):
        return False
    if isinstance(pred, (And, Or)):
        return all(without_not(item) for item in pred.items)
    return True


def _absent_true(pred: Pred, values: Mapping[str, Value]) -> Pred:
    """``pred`` with NOT pushed to the atoms and every atom reading an absent value made TRUE."""
    if isinstance(pred, Not):
        return _absent_true(negate(pred.item), values)
    if isinstance(pred, And):
        return And(tuple(_absent_true(item, values) for item in pred.items))
    if isinstance(pred, Or):
        return Or(tuple(_absent_true(item, values) for item in pred.items))
    if isinstance(pred, Cmp) and any(key not in values for key in keys_of(pred)):
        return TRUE
    return pred
