"""Lazy and recomputing evaluation of one pattern (lazy chain automata §3–4, §7; recomputation §2).

:class:`LazyRun` runs a pattern under a :class:`~cesar.automata.pattern.plans.Plan`
other than eager, epoch by epoch, with the matches of the pattern oracle
(:mod:`cesar.automata.pattern.reference`, whose ``Judge`` it uses to judge
every condition, negation and output — through the engine's generated code where
that gives the same verdict, :mod:`cesar.automata.pattern.judging`):

* Every event that passes a component's own conditions (those naming no other
  component) waits in that component's *buffer* while it may still be part of
  a match (``clock - t0 < WITHIN``); under ``[k]`` the buffers are kept per key
  (:mod:`cesar.automata.pattern.buffers`).
  Events of negated components wait too, and a match is dropped if one lies
  where it must not (the lazy post-processing of negation, §4.4).
* CHAIN and TREE: a *partial match* binds some components.  Made, it searches
  the buffer of the next component (the chain's next, or for a tree the one
  with the fewest buffered events now) for every event that fits, and, if a
  later event may still fit, *waits* for that component.  An event meets the
  partial matches waiting for its components, then starts one if it is of the
  first component, then joins the buffers.  So every assignment is made once:
  an event older than a partial match is found in a buffer, a younger one
  meets it waiting.
* RECOMPUTE: nothing waits.  An event that may end a match (the last
  component's) triggers a depth-first search over the buffers in pattern order,
  Kleene closures enumerated event by event as the oracle's runs grow.

A match is emitted only if its *root* (the earliest ``t1`` of its events)
lies in ``(since, until]``: a plan started at a switch takes the matches made
only of later events, the plan it replaces the others (``until``), so none is
lost or doubled.  Costs are counted (:class:`LazyCounters`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence

from cesar.automata.evaluate import Faults
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.pattern.buffers import Buffer, BufferPool, Key, key_of
from cesar.automata.pattern.judging import EMPTY, Compiler, FastJudge, Fits
from cesar.automata.pattern.partials import Between, LazyCounters, Partial
from cesar.automata.pattern.placing import keys_of
from cesar.automata.pattern.plans import Plan, PlanKind, conjuncts, refusal
from cesar.automata.pattern.reference import Judge, Selection
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event
from cesar.automata.terms import Pred


class _Abandoned(Exception):
    """A recomputing search reached its epoch's budget."""


class LazyRun:
    """One pattern under a lazy or recomputing plan, with its buffers and partial matches.

    :meth:`process` consumes one epoch (events of one ``t1``, later than the
    last) and returns the matches whose root lies in ``(since, until]``.
    """

    def __init__(
        self,
        pattern: Resolved,
        plan: Plan,
        since: float = -math.inf,
        until: float = math.inf,
        faults: Faults | None = None,
        functions: FunctionRegistry = DEFAULT_FUNCTIONS,
        compiler: Compiler | None = None,
        max_steps: int | None = None,
        pool: BufferPool | None = None,
        owner: str = "",
    ) -> None:
        reason = refusal(pattern, plan)
        if reason is not None or plan.kind is PlanKind.EAGER:
            raise ValueError(f"plan {plan.spell()} cannot run this pattern: {reason or 'eager'}")
        assert pattern.window is not None
        self.pattern, self.plan = pattern, plan
        self.since, self.until = since, until
        self.window = pattern.window
        faults = faults or Faults()
        self.judge = (
            Judge(pattern, faults, functions)
            if compiler is None
            else FastJudge(pattern, faults, functions, compiler)
        )
        self.counters = LazyCounters()
        self.max_steps = max_steps
        """Candidates and matches the recomputing searches of one epoch may look at (None: no
        bound); a search past it is abandoned (``counters.abandoned``)."""
        self._stop = math.inf
        self.clock = -math.inf
        self.next_prune = -math.inf
        steps = pattern.steps
        self.names = [s.var for s in steps]
        self.last = len(steps) - 1
        self.seq = pattern.operator == "SEQ"
        keyed = pattern.keyed
        self.owner = owner
        """The subscription it serves (the pool's waiting lists name it)."""
        self.fits = Fits(pattern, self.judge)
        self.pool = pool if pool is not None else BufferPool()
        """Where its components' event buffers live: its own, or shared with other runs."""
        self.partition = pattern.partition if keyed else None
        self.signatures = [self.fits.signature(n) for n in range(len(steps))]
        self.by_signature: dict[Hashable, list[int]] = {}
        for n, signature in enumerate(self.signatures):
            self.by_signature.setdefault(signature, []).append(n)
        self.buffers: list[Buffer[Event]] = [
            self.pool.take(signature, self.partition, self.window) for signature in self.signatures
        ]
        self.waiting: list[Buffer[Partial]] = [Buffer(keyed) for _ in steps]
        self.negated: Buffer[Event] = Buffer(False)
        self.shared = self._shared()
        self._epoch = -math.inf
        self._abandoned = 0
        if plan.kind is PlanKind.CHAIN:
            self.first = self.names.index(plan.order[0])
            self.chain = [self.names.index(v) for v in plan.order]
        else:
            self.first = self.names.index(plan.order[0]) if plan.order else 0
            self.chain = []

    def _shared(self) -> list[list[Between]]:
        """Per component, the conditions naming it and another component (single events
        only: the chain and tree plans)."""
        shared: list[list[Between]] = [[] for _ in self.names]
        judge = self.judge
        for names, pred in conjuncts(self.pattern):
            if len(names) > 1:
                keys = judge.keys[pred] = keys_of(pred)
                refs = [self.pattern.refs[key] for key in keys]
                reads = [
                    (key, self.names.index(ref.var), ref.attr or "")
                    for key, ref in zip(keys, refs, strict=True)
                ]
                test = judge.test(pred) if isinstance(judge, FastJudge) else None
                entry = Between(names, pred, reads, test, [0, 0])
                for var in names:
                    shared[self.names.index(var)].append(entry)
        return shared

    # ------------------------------------------------------------------ epochs

    @property
    def live(self) -> int:
        """Partial matches waiting (CHAIN and TREE)."""
        return sum(len(w) for w in self.waiting)

    @property
    def buffered(self) -> int:
        """Events held in its buffers, a shared buffer's divided among its readers."""
        held = len(self.negated)
        counted: set[int] = set()
        for signature, buffer in zip(self.signatures, self.buffers, strict=True):
            if id(buffer) not in counted:
                counted.add(id(buffer))
                mine = self.signatures.count(signature)
                held += len(buffer) * mine // max(self.pool.readers(signature), mine)
        return held

    def events(self) -> list[Event]:
        """Every buffered event its window still needs once, in arrival order (what a
        snapshot keeps)."""
        horizon = self.clock - self.window
        seen: dict[int, Event] = {}
        for buffer in (*self.buffers, self.negated):
            for event in buffer:
                if event.t0 > horizon:
                    seen.setdefault(id(event), event)
        return sorted(seen.values(), key=lambda e: e.t1)

    def process(
        self, epoch: Sequence[Event], fitting: Mapping[int, list[int]] | None = None
    ) -> list[Event]:
        """Consume one epoch; the matches it completes whose root is in ``(since, until]``.

        ``fitting`` gives, by ``id``, each event's :meth:`Fits.places` if the caller
        knows them already.  A run whose buffers are shared is not given epochs this way
        but event by event (:meth:`take`, then :meth:`keep` once every reader took it).
        """
        if not epoch:
            return []
        out: list[Event] = []
        for event in epoch:
            places = self.fits.places(event) if fitting is None else fitting[id(event)]
            key = self.take(event, places, out)
            self.keep(event, places, key)
        self.end(epoch[0].t1)
        return out

    def take(self, event: Event, places: list[int], out: list[Event]) -> Key:
        """``event``, which may be components ``places``, meets what waits for it (or triggers
        a recomputation); its matches go to ``out``.  Returns its partition key."""
        if event.t1 != self._epoch:
            self._epoch = event.t1
            if self.max_steps is not None:
                self._stop = self.counters.searched + self.max_steps
        key = self._key(event)
        if self.plan.kind is PlanKind.RECOMPUTE:
            if places and places[-1] == self.last:
                self.counters.triggers += 1
                try:
                    self._search(0, (), event, key, event.t1, out)
                except _Abandoned:
                    self.counters.abandoned += 1
                    self._abandoned += 1
        elif places and (self.first in places or any(self.waiting[n].size for n in places)):
            self._meet(event, key, places, out)
        return key

    def keep(self, event: Event, places: list[int], key: Key) -> None:
        """Buffer ``event`` for components ``places`` (a shared buffer takes it once)."""
        for n in places:
            self.buffers[n].add(key, event)
        if event.stream in self.fits.negated:
            self.negated.add(None, event)

    def end(self, now: int) -> int:
        """Close epoch ``now`` (pruning when due); how many searches it abandoned."""
        self.clock = now
        if now >= self.next_prune:
            self.prune()
        abandoned, self._abandoned = self._abandoned, 0
        return abandoned

    def prune(self) -> None:
        """Drop what no later event can complete: partial matches whose start is ``WITHIN``
        or more before the clock, and from the buffers what their longest window has passed.
        Called every quarter window (what is kept longer fails the window test), so a
        buffer holds 1.25 of its readers' longest window at most."""
        self.next_prune = self.clock + self.window // 4 + 1
        horizon = self.clock - self.window
        self.negated.prune(lambda e: e.t0 <= horizon)
        for waiting in self.waiting:
            waiting.prune(lambda p: p.t0 <= horizon)
        self.pool.prune(self.clock)

    def move(self, pool: BufferPool) -> None:
        """Keep its buffers in ``pool`` from now on, with what it buffered merged in (a run
        rebuilt from a snapshot joining the runs already there)."""
        merged: set[int] = set()
        buffers: list[Buffer[Event]] = []
        for signature, old in zip(self.signatures, self.buffers, strict=True):
            new = pool.take(signature, self.partition, self.window)
            if id(old) not in merged:
                merged.add(id(old))
                new.merge(old)
            self.pool.release(signature, self.window)
            buffers.append(new)
        self.pool, self.buffers = pool, buffers
        for n, waiting in enumerate(self.waiting):
            for key in waiting.buckets:
                pool.wait(self.signatures[n], key, self)

    def close(self) -> None:
        """Give its buffers back to the pool (the run is over)."""
        for signature in self.signatures:
            self.pool.release(signature, self.window)
        self.buffers = []
        self.waiting = [Buffer(self.pattern.keyed) for _ in self.waiting]

    def waits(self, signature: Hashable, key: Key) -> list[int]:
        """Its components of ``signature`` with partial matches waiting for an event of
        partition key ``key``."""
        return [n for n in self.by_signature.get(signature, ()) if key in self.waiting[n].buckets]

    def judged(self) -> dict[Pred, tuple[int, int]]:
        """Per condition between components: assignments judged, and let through."""
        out: dict[Pred, tuple[int, int]] = {}
        for conditions in self.shared:
            for condition in conditions:
                out[condition.pred] = (condition.judged[0], condition.judged[1])
        return out

    def seed(self, past: Iterable[Event]) -> None:
        """Give a run starting at a switch the negated events of earlier epochs a negation
        before the first component may still find."""
        for event in past:
            if event.stream in self.fits.negated:
                self.negated.add(None, event)

    def shed(self, limit: int) -> int:
        """Drop the oldest partial matches, then the oldest events of the buffers only it
        reads, then of the negated, until at most ``limit`` of them are held (a shared
        buffer counted as its share); then, if it reads a shared buffer with the longest
        window, the events only it still needs.  Another reader never loses an event to
        this run's budget.  How many went."""
        own: dict[int, Buffer[Event]] = {}
        shared: dict[int, tuple[Hashable, Buffer[Event]]] = {}
        for signature, buffer in zip(self.signatures, self.buffers, strict=True):
            if self.pool.readers(signature) == self.signatures.count(signature):
                own[id(buffer)] = buffer
            else:
                shared[id(buffer)] = (signature, buffer)
        dropped = 0
        helds: list[Buffer[Partial] | Buffer[Event]] = [*self.waiting, *own.values(), self.negated]
        for held in helds:
            excess = self.live + self.buffered - limit
            if excess <= 0:
                return dropped
            dropped += held.shed(excess)
        for signature, buffer in shared.values():
            excess = self.live + self.buffered - limit
            if excess <= 0:
                break
            share = self.pool.readers(signature) // self.signatures.count(signature)
            horizon = self.clock - self.pool.others(signature, self.window)
            dropped += buffer.shed(excess * share, horizon)
        return dropped

    def check_valid(self) -> None:
        """Assert every invariant of the buffers and the waiting partial matches."""
        for n, buffer in enumerate(self.buffers):
            buffer.check_valid()
            assert all(e.stream in self.pattern.steps[n].types for e in buffer)
        self.negated.check_valid()
        for n, waiting in enumerate(self.waiting):
            waiting.check_valid()
            for partial in waiting:
                events = [e for e in partial.bound if e is not None]
                assert partial.waits == n and partial.bound[n] is None and events
                assert partial.t0 == min(e.t0 for e in events)
                assert partial.t1 == max(e.t1 for e in events)
                assert partial.root == min(e.t1 for e in events)
                assert not self.seq or all(a.t1 < b.t0 for a, b in itertools.pairwise(events))

    def _key(self, event: Event) -> Key:
        return key_of(self.pattern, event)

    # -------------------------------------------------------- chain and tree

    def _meet(self, event: Event, key: Key, places: list[int], out: list[Event]) -> None:
        """An event of components ``places`` (its key ``key``): it meets the partial matches
        waiting for them, then starts one if it is of the first component."""
        made: list[Partial] = []
        for n in places:
            for partial in self.waiting[n].candidates(key):
                self.counters.searched += 1
                grown = self._bind(partial, n, event)
                if grown is not None:
                    self._expand(grown, made, out)
        if self.first in places:
            empty = Partial((None,) * len(self.names), 0, 0, 0, None)
            start = self._bind(empty, self.first, event)
            if start is not None:
                self._expand(start, made, out)
        for partial in made:
            self.waiting[partial.waits].add(partial.key, partial)
            self.pool.wait(self.signatures[partial.waits], partial.key, self)

    def _expand(self, partial: Partial, made: list[Partial], out: list[Event]) -> None:
        """A new partial match: complete it, or search the next component's buffer and wait."""
        self.counters.partials += 1
        unbound = [n for n, e in enumerate(partial.bound) if e is None]
        if not unbound:
            self._complete(partial, out)
            return
        if self.chain:
            n = self.chain[len(self.names) - len(unbound)]
        else:  # the tree's ad hoc order: the fewest buffered events now
            n = min(unbound, key=lambda m: (len(self.buffers[m]), m))
        for event in self.buffers[n].candidates(partial.key, partial.t1 - self.window):
            self.counters.searched += 1
            grown = self._bind(partial, n, event)
            if grown is not None:
                self._expand(grown, made, out)
        if not self.seq or all(e is None for e in partial.bound[n + 1 :]):
            partial.waits = n
            made.append(partial)

    def _bind(self, partial: Partial, n: int, event: Event) -> Partial | None:
        """``partial`` with ``event`` as component ``n``, if times, window and the conditions
        naming ``n`` and bound components allow it."""
        bound = partial.bound
        empty = all(e is None for e in bound)
        if self.seq:
            before = next((e for e in reversed(bound[:n]) if e is not None), None)
            after = next((e for e in bound[n + 1 :] if e is not None), None)
            if (before is not None and event.t0 <= before.t1) or (
                after is not None and after.t0 <= event.t1
            ):
                return None
        elif any(e is event for e in bound):
            return None
        t0 = event.t0 if empty else min(partial.t0, event.t0)
        t1 = event.t1 if empty else max(partial.t1, event.t1)
        if t1 - t0 > self.window:
            return None
        now = (*bound[:n], event, *bound[n + 1 :])
        names = {self.names[m] for m, e in enumerate(now) if e is not None}
        for condition in self.shared[n]:
            if not condition.names <= names:
                continue
            values = {}
            for name, m, attr in condition.reads:
                bound_event = now[m]
                assert bound_event is not None  # every component it names is bound
                value = bound_event.value(attr)
                if value is not None:
                    values[name] = value
            test = condition.test
            judged = condition.judged
            judged[0] += 1
            if test is not None and len(values) == len(condition.reads):
                if not test(EMPTY, values, 0, 0):
                    return None
            elif not self.judge.holds(condition.pred, values):
                return None
            judged[1] += 1
        root = event.t1 if empty else min(partial.root, event.t1)
        key = partial.key if partial.key is not None else self._key(event)
        return Partial(now, t0, t1, root, key)

    def _complete(self, partial: Partial, out: list[Event]) -> None:
        if not self.since < partial.root <= self.until:
            return
        selected: Selection = tuple((e,) for e in partial.bound if e is not None)
        for made in self.judge.emit(selected, list(self.negated)):
            if not self.seq:
                made = Event(made.stream, partial.t0, partial.t1, made.values)
            self.counters.matches += 1
            out.append(made)

    # -------------------------------------------------------------- recompute

    def _search(
        self, n: int, selected: Selection, trigger: Event, key: Key, root: int, out: list[Event]
    ) -> None:
        """Begin component ``n`` after ``selected`` (the earlier components' events) in a
        match whose last event is ``trigger`` (of partition key ``key``): RECOMPUTE's search,
        depth first in pattern order."""
        steps = self.pattern.steps
        step = steps[n]
        last = n == len(steps) - 1
        after = selected[-1][-1].t1 if selected else -math.inf
        horizon = trigger.t1 - self.window
        if last and not step.kleene:
            if trigger.t0 > after and self.judge.judge(step.begin, selected, trigger, n):
                self._matched((*selected, (trigger,)), min(root, trigger.t1), out)
            return
        if last and trigger.t0 > after and self.judge.judge(step.begin, selected, trigger, n):
            self._close((*selected, (trigger,)), root, out)
        for event in self.buffers[n].candidates(key, horizon):
            self._step()
            if event.t0 <= after or event.t1 >= trigger.t0 or (not selected and event.t0 < horizon):
                continue
            if self.judge.judge(step.begin, selected, event, n):
                grown = (*selected, (event,))
                if step.kleene:
                    self._grow(n, grown, trigger, key, min(root, event.t1), out)
                else:
                    self._search(n + 1, grown, trigger, key, min(root, event.t1), out)

    def _grow(
        self, n: int, selected: Selection, trigger: Event, key: Key, root: int, out: list[Event]
    ) -> None:
        """Component ``n``'s closure, open in ``selected``: proceed, or take one more event."""
        step = self.pattern.steps[n]
        last = n == len(self.pattern.steps) - 1
        end = selected[-1][-1].t1
        horizon = trigger.t1 - self.window
        if last:
            if trigger.t0 > end and self.judge.judge(step.take, selected, trigger, n):
                self._close((*selected[:-1], (*selected[-1], trigger)), root, out)
        elif self.judge.judge(step.close, selected, None, n):
            self._search(n + 1, selected, trigger, key, root, out)
        for event in self.buffers[n].candidates(key, horizon):
            self._step()
            if event.t0 <= end or event.t1 >= trigger.t0:
                continue
            if self.judge.judge(step.take, selected, event, n):
                grown = (*selected[:-1], (*selected[-1], event))
                self._grow(n, grown, trigger, key, min(root, event.t1), out)

    def _step(self) -> None:
        """Count a candidate looked at; past the epoch's budget, abandon the search."""
        self.counters.searched += 1
        if self.counters.searched > self._stop:
            raise _Abandoned

    def _close(self, selected: Selection, root: int, out: list[Event]) -> None:
        """A last Kleene closure ending with the trigger: a match if it may close."""
        self._step()
        n = len(self.pattern.steps) - 1
        if self.judge.judge(self.pattern.steps[n].close, selected, None, n):
            self._matched(selected, root, out)

    def _matched(self, selected: Selection, root: int, out: list[Event]) -> None:
        self._step()
        if selected[-1][-1].t1 - selected[0][0].t0 > self.window:
            return
        if not self.since < root <= self.until:
            return
        for made in self.judge.emit(selected, list(self.negated)):
            self.counters.matches += 1
            out.append(made)
