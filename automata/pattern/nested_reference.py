"""The literal evaluator of nested patterns: brute force over the structure tree.

The oracle for OR and nesting (docs/patterns.md, "OR and nesting";
:mod:`cesar.automata.pattern.nesting`).  It shares no flattening with the
engine: it enumerates the matches of the structure as written, bottom up, and
judges each complete match with the resolved conditions of the alternative
whose variables it binds.  Under skip_till_any_match:

* a component matches each event of its streams; a Kleene closure each chain
  of them, every event starting after the one before it ends;
* ``SEQ`` takes a match of each part, each part's events starting after the
  previous part's events end;
* ``AND`` takes a match of each part, in any order and any epochs, no event
  twice; a negation in it watches the gap between the match's first event's end
  and its last event's arrival (an ``AND`` directly inside an ``AND`` is one
  conjunction with it, as the pattern's meaning splices it: its negations
  watch the whole conjunction's gap);
* ``OR`` takes a match of any part: a bag union, so a match two parts make is
  counted twice;
* a negation in a SEQ watches the gap between the parts around it (after the
  earlier part's last event ends, before the later part's first event
  arrives); at the start or the end of a SEQ it watches the gap its SEQ has in
  the SEQ around it, and at the ends of the whole match the window before the
  first event or after the last, as for a flat pattern
  (:mod:`cesar.automata.pattern.reference`);
* a complete match is kept within the window, every condition placed on its
  components holding (a condition on ``a[i]`` for each of ``a``'s events after
  the first), no negated event in its gap; one with a negation after its last
  event is published once an epoch at or after its window's end is seen, and
  ends at the window's end;
* under an after-match policy, the matches of every alternative are taken together, in
  order of their first event's arrival per partition (:func:`cesar.automata.skipping.select`,
  the flat oracle's rule), the input being over.

Exponential in the stream by design: exact is what counts.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.derived import enrich_all
from cesar.automata.evaluate import Env, Faults, eval_term, store
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.pattern.ast import Component, Group, Index, Ref
from cesar.automata.pattern.nesting import Nested, Part, distributed
from cesar.automata.pattern.placing import Negation, keys_of
from cesar.automata.pattern.reference import Judge, aggregate
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event, Value
from cesar.automata.skipping import bound_of, select
from cesar.automata.terms import TRUE, Pred, Scope, Term, conjoin, conjuncts_of


@dataclass(frozen=True, slots=True)
class _Match:
    """A match of a part: its events per positive variable and its negations' gaps.

    ``gaps``: (negated variable, low, high), its events must not start after
    ``low`` and end before ``high``; ``lead`` and ``trail``: negated variables at
    the part's start or end, whose gap the parts around it decide.  ``start``,
    ``end`` and ``arrival``: its events' least ``t0``, greatest ``t1`` and least ``t1``.
    """

    events: tuple[tuple[str, tuple[Event, ...]], ...]
    gaps: tuple[tuple[str, float, float], ...]
    lead: tuple[str, ...]
    trail: tuple[str, ...]
    start: int
    end: int
    arrival: int
    ids: frozenset[int]
    choice: int
    """Which of the part's alternatives it is of (0-based, in the order
    :func:`~cesar.automata.pattern.nesting.alternatives` lists them)."""


def _match(
    events: tuple[tuple[str, tuple[Event, ...]], ...],
    gaps: tuple[tuple[str, float, float], ...] = (),
    lead: tuple[str, ...] = (),
    trail: tuple[str, ...] = (),
    choice: int = 0,
) -> _Match:
    every = [e for _, chosen in events for e in chosen]
    return _Match(
        events,
        gaps,
        lead,
        trail,
        min(e.t0 for e in every),
        max(e.t1 for e in every),
        min(e.t1 for e in every),
        frozenset(id(e) for e in every),
        choice,
    )


def _conjuncts(group: Group) -> list[Part]:
    """An AND's parts, those of the ANDs directly inside it spliced in (module docstring)."""
    out: list[Part] = []
    for part in group.parts:
        if isinstance(part, Group) and part.operator == "AND":
            out.extend(_conjuncts(part))
        else:
            out.append(part)
    return out


def evaluate_nested(
    nested: Nested,
    streams: Mapping[str, Sequence[Event]],
    faults: Faults | None = None,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
) -> list[Event]:
    """The multiset of events the nested pattern publishes over ``streams``."""
    if nested.windows:
        streams = enrich_all(streams, nested.windows)
    return _Tree(nested, streams, faults or Faults(), functions).run()


class _Tree:
    def __init__(
        self,
        nested: Nested,
        streams: Mapping[str, Sequence[Event]],
        faults: Faults,
        functions: FunctionRegistry,
    ) -> None:
        self.nested = nested
        self.functions = functions
        self.faults = faults
        self.events = sorted(
            (e for name in sorted(nested.reads) for e in streams.get(name, ())),
            key=lambda e: (e.t1, e.t0),
        )
        self.window = nested.window
        self.alternatives = [Judge(r, faults, functions) for r in nested.resolved]
        """Per alternative, the judge of its conditions and its output."""
        self.judges: dict[frozenset[str], tuple[Resolved, Judge]] = {}
        for resolved in nested.resolved:
            names = frozenset(s.var for s in resolved.steps) | {n.var for n in resolved.negations}
            self.judges.setdefault(names, (resolved, Judge(resolved, faults, functions)))
        self.early: list[tuple[frozenset[str], Pred, Judge]] = []
        """Every condition on whole events with the variables it names: one that holds for a
        part's match whichever alternative completes it (each alternative binding its
        variables keeps it), so judged as soon as they are bound."""
        seen: set[Pred] = set()
        for resolved, judge in self.judges.values():
            for step in resolved.steps:
                for pred in (step.begin, step.close):
                    for c in conjuncts_of(pred):
                        if c not in seen and c != TRUE:
                            seen.add(c)
                            names = frozenset(resolved.refs[key].var for key in keys_of(c))
                            self.early.append((names, c, judge))

    def run(self) -> list[Event]:
        assert self.nested.pattern.nested is not None
        clock = max((e.t1 for e in self.events), default=None)
        out: list[Event] = []
        taken: list[tuple[int, int, tuple[Value | None, ...], Event]] = []
        skip = self.nested.pattern.skip
        for match in self.matches(self.nested.pattern.nested):
            events = self.judge(match, clock)
            if skip is None:
                out.extend(events)
            else:
                chosen = dict(match.events).__getitem__
                bound = bound_of(skip, match.arrival, match.end, chosen)
                taken.extend((match.arrival, bound, self.key(match), e) for e in events)
        return out if skip is None else select(taken)

    def key(self, match: _Match) -> tuple[Value | None, ...]:
        """The partition of ``match``: its first event's values of the equivalence tests (every
        alternative is keyed alike, or none is)."""
        resolved = self.nested.resolved[0]
        if not resolved.keyed:
            return ()
        first = min((e for _, chosen in match.events for e in chosen), key=lambda e: e.t1)
        return tuple(first.value(a) for a in resolved.partition)

    # ------------------------------------------------------------- matching

    def matches(self, part: Part) -> list[_Match]:
        """Every match of ``part`` within the window, before conditions."""
        if isinstance(part, Component):
            assert part.var is not None and not part.negated
            if part.kleene:
                return [_match(((part.var, chain),)) for chain in self.chains(part.types)]
            admits = self.admits(part.var)
            return [
                _match(((part.var, (e,)),))
                for e in self.events
                if e.stream in part.types and admits(e)
            ]
        if part.operator == "OR":  # the alternatives of the parts before come first
            out: list[_Match] = []
            offset = 0
            for p in part.parts:
                out.extend(replace(m, choice=offset + m.choice) for m in self.matches(p))
                offset += distributed(p)
            return out
        if part.operator == "AND":
            return self.conjunction(part)
        return self.sequence(part)

    def admits(self, var: str) -> Callable[[Event], bool]:
        """The test of a singleton's event by the conditions that name it alone: the same in
        every alternative binding it (each keeps every condition whose variables it binds)."""
        for resolved, judge in self.judges.values():
            for step in resolved.steps:
                if step.var == var:
                    alone = conjoin(
                        *(
                            c
                            for c in conjuncts_of(step.begin)
                            if {resolved.refs[key].var for key in keys_of(c)} == {var}
                        )
                    )
                    return lambda e: self.holds(judge, alone, {var: (e,)}, None)
        raise AssertionError(f"no alternative binds {var}")

    def decided(self, joined: _Match, left: _Match, right: _Match) -> bool:
        """True unless a condition the join of ``left`` and ``right`` binds the variables of
        (and neither did alone) fails."""
        bound = frozenset(var for var, _ in joined.events)
        mine, theirs = {v for v, _ in left.events}, {v for v, _ in right.events}
        events = dict(joined.events)
        for names, pred, judge in self.early:
            fresh = names <= bound and not names <= mine and not names <= theirs
            if fresh and not self.holds(judge, pred, events, None):
                return False
        return True

    def within(self, start: int, end: int) -> bool:
        return self.window is None or end - start <= self.window

    def chains(self, types: tuple[str, ...]) -> list[tuple[Event, ...]]:
        """Every chain of events of ``types``, each starting after the one before ends, within
        the window."""
        mine = [e for e in self.events if e.stream in types]
        out: list[tuple[Event, ...]] = []
        todo: list[tuple[Event, ...]] = [(e,) for e in mine]
        while todo:
            chain = todo.pop()
            out.append(chain)
            for e in mine:
                if e.t0 > chain[-1].t1 and self.within(chain[0].t0, e.t1):
                    todo.append((*chain, e))
        return out

    def conjunction(self, group: Group) -> list[_Match]:
        spliced = _conjuncts(group)
        negated = [p.var for p in spliced if isinstance(p, Component) and p.negated]
        parts = [p for p in spliced if not (isinstance(p, Component) and p.negated)]
        combos = self.matches(parts[0])
        for part in parts[1:]:
            radix = distributed(part)  # each part's choice a digit, the first most significant
            found = sorted(self.matches(part), key=lambda m: m.start)
            starts = [n.start for n in found]
            grown: list[_Match] = []
            for m in combos:
                low, high = 0, len(found)
                if self.window is not None:  # n.start in [m.end - w, m.start + w]
                    low = bisect.bisect_left(starts, m.end - self.window)
                    high = bisect.bisect_right(starts, m.start + self.window)
                grown.extend(
                    joined
                    for n in found[low:high]
                    if not m.ids & n.ids and self.within(min(m.start, n.start), max(m.end, n.end))
                    if self.decided(
                        joined := _match(
                            m.events + n.events,
                            m.gaps + n.gaps,
                            choice=m.choice * radix + n.choice,
                        ),
                        m,
                        n,
                    )
                )
            combos = grown
        if not negated:
            return combos
        return [  # a negation between the first event's end and the last's arrival
            _match(
                m.events,
                m.gaps + tuple((v, m.arrival, m.end) for v in negated if v),
                choice=m.choice,
            )
            for m in combos
        ]

    def sequence(self, group: Group) -> list[_Match]:
        states: list[_Match | None] = [None]
        pending: list[str] = []
        for part in group.parts:
            if isinstance(part, Component) and part.negated:
                assert part.var is not None
                pending.append(part.var)
                continue
            radix = distributed(part)
            found = sorted(self.matches(part), key=lambda m: m.start)
            starts = [m.start for m in found]
            grown: list[_Match | None] = []
            for state in states:
                if state is None:
                    grown.extend(
                        _match(m.events, m.gaps, (*pending, *m.lead), m.trail, m.choice)
                        for m in found
                    )
                    continue
                between = (*state.trail, *pending)
                for m in found[bisect.bisect_right(starts, state.end) :]:
                    if self.window is not None and m.start > state.start + self.window:
                        break
                    if not self.within(state.start, m.end):
                        continue
                    gaps = tuple((var, state.end, m.arrival) for var in (*between, *m.lead))
                    joined = _match(
                        state.events + m.events,
                        state.gaps + m.gaps + gaps,
                        state.lead,
                        m.trail,
                        state.choice * radix + m.choice,
                    )
                    if self.decided(joined, state, m):
                        grown.append(joined)
            states = grown
            pending = []
        return [
            _match(s.events, s.gaps, s.lead, (*s.trail, *pending), s.choice)
            for s in states
            if s is not None
        ]

    # ------------------------------------------------------------- judging

    def judge(self, match: _Match, clock: int | None) -> list[Event]:
        """The output of a complete match, or none (see the module docstring)."""
        window = self.window
        start, end = match.start, match.end
        if not self.within(start, end):
            return []
        resolved = self.nested.resolved[match.choice]
        judge = self.alternatives[match.choice]
        events = dict(match.events)
        for step in resolved.steps:
            for pred in (step.begin, step.close):
                if not self.holds(judge, pred, events, None):
                    return []
            if step.take != TRUE:
                for i in range(1, len(events[step.var])):
                    if not self.holds(judge, step.take, events, (step.var, i)):
                        return []
        gaps = list(match.gaps)
        if match.lead:
            assert window is not None
            gaps.extend((var, end - window - 1, match.arrival) for var in match.lead)
        if match.trail:
            assert window is not None
            if clock is None or clock < start + window:
                return []
            gaps.extend((var, end, start + window + 1) for var in match.trail)
        negations = {n.var: n for n in resolved.negations}
        for var, low, high in gaps:
            if self.seen(judge, negations[var], events, low, high):
                return []
        t1 = start + window if match.trail and window is not None else end
        return self.output(judge, events, start, t1)

    def holds(
        self,
        judge: Judge,
        pred: Pred,
        events: Mapping[str, tuple[Event, ...]],
        at: tuple[str, int] | None,
        negated: tuple[str, Event] | None = None,
    ) -> bool:
        if pred == TRUE:
            return True
        values = _values(pred, judge.p.refs, events, at, negated)
        return judge.holds(pred, values)

    def seen(
        self,
        judge: Judge,
        negation: Negation,
        events: Mapping[str, tuple[Event, ...]],
        low: float,
        high: float,
    ) -> bool:
        """True if an event of the negated component lies in (low, high), meeting its test."""
        for event in self.events:
            inside = event.stream in negation.types and low < event.t0 and event.t1 < high
            if inside and self.holds(judge, negation.pred, events, None, (negation.var, event)):
                return True
        return False

    def output(
        self, judge: Judge, events: Mapping[str, tuple[Event, ...]], t0: int, t1: int
    ) -> list[Event]:
        output = self.nested.output
        terms = dict(judge.p.returns)
        row: dict[str, Value] = {}
        for name, typ in output.attributes:
            term: Term = terms[name]
            env = Env({Scope.EVENT: _values(term, judge.p.refs, events, None, None)}, 0)
            try:
                row[name] = store(eval_term(term, env, self.functions), typ)
            except ArithmeticFault:
                self.faults.arithmetic += 1
                return []
        return [Event.of(output.name, t0, t1, row)]


def _values(
    node: Term | Pred,
    refs: Mapping[str, Ref],
    events: Mapping[str, tuple[Event, ...]],
    at: tuple[str, int] | None,
    negated: tuple[str, Event] | None,
) -> dict[str, Value]:
    """The value of each reference ``node`` reads; absent attributes are left out.

    ``at`` is (Kleene variable, index of the event it is taking); ``negated`` a negated
    variable's candidate event."""
    out: dict[str, Value] = {}
    for key in keys_of(node):
        value = _value(refs[key], events, at, negated)
        if value is not None:
            out[key] = value
    return out


def _value(
    ref: Ref,
    events: Mapping[str, tuple[Event, ...]],
    at: tuple[str, int] | None,
    negated: tuple[str, Event] | None,
) -> Value | None:
    if negated is not None and ref.var == negated[0]:
        assert ref.attr is not None
        return negated[1].value(ref.attr)
    chosen = events[ref.var]
    i = at[1] if at is not None and at[0] == ref.var else len(chosen)
    index = ref.index
    if index is Index.LEN:
        return len(chosen)
    if index in (Index.UPTO_PREVIOUS, Index.ALL):
        assert ref.aggregate is not None and ref.attr is not None
        upto = chosen[:i] if index is Index.UPTO_PREVIOUS else chosen
        found = [v for e in upto if (v := e.value(ref.attr)) is not None]
        return aggregate(ref.aggregate, found)
    event = {
        Index.ONLY: chosen[0],
        Index.FIRST: chosen[0],
        Index.LAST: chosen[-1],
        Index.CURRENT: chosen[min(i, len(chosen) - 1)],
        Index.PREVIOUS: chosen[i - 1],
    }[index]
    assert ref.attr is not None
    return event.value(ref.attr)
