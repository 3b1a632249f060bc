"""Judging a pattern's conditions fast: own conditions (a buffer's filter) and generated code.

A lazy plan judges every condition as the pattern oracle does
(:class:`~cesar.automata.pattern.reference.Judge`).  :class:`FastJudge` runs the
engine's generated code instead wherever that gives the same verdict, and
:class:`Fits` says which components an event may be by their own conditions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Protocol

from cesar.automata.algebra import Assign
from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.evaluate import Faults
from cesar.automata.functions import FunctionRegistry
from cesar.automata.normal import canonical
from cesar.automata.pattern.ast import Index, Ref
from cesar.automata.pattern.placing import keys_of
from cesar.automata.pattern.plans import conjuncts
from cesar.automata.pattern.reference import Judge, Selection
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event, Value
from cesar.automata.terms import TRUE, Attr, Cmp, Leaf, Pred, Term, conjoin, conjuncts_of, map_pred

_OWN = (Index.ONLY, Index.FIRST)
EMPTY: Mapping[str, Value] = {}
"""The empty binding generated code is called with (pattern conditions read no binding)."""

Test = Callable[[Mapping[str, Value], Mapping[str, Value], int, int], bool]
Build = Callable[[Mapping[str, Value], Mapping[str, Value], int, int], dict[str, Value]]


class Compiler(Protocol):
    """Generated code for predicates and attribute maps (the engine's ``Codegen``): functions
    of ``(binding, event attributes, DUR, own DUR)`` with :mod:`cesar.automata.evaluate`'s
    semantics."""

    def conjunct(self, atoms: tuple[Cmp, ...]) -> Test:
        """Every atom holds (one that faults is false, and counted)."""

    def build(self, assigns: Sequence[Assign]) -> Build:
        """The map's values; raises ArithmeticFault."""


class FastJudge(Judge):
    """The oracle's :class:`Judge` running generated code where it may: a condition made of
    comparisons with every value present (an absent one makes its atom true: the oracle's
    rule, interpreted), and the output row.  Same verdicts, a fraction of the time."""

    def __init__(
        self,
        pattern: Resolved,
        faults: Faults,
        functions: FunctionRegistry,
        compiler: Compiler,
    ) -> None:
        super().__init__(pattern, faults, functions)
        self.compiler = compiler
        self.tests: dict[Pred, Test | None] = {}
        types = dict(pattern.output.attributes)
        assigns = tuple(Assign(name, term, types[name]) for name, term in pattern.returns)
        self.row = compiler.build(assigns)
        self.row_refs = [
            (key, pattern.refs[key])
            for key in dict.fromkeys(key for _, term in pattern.returns for key in keys_of(term))
        ]

    def test(self, pred: Pred) -> Test | None:
        """``pred`` as generated code if it is made of comparisons (None: it is not)."""
        if pred not in self.tests:
            atoms = conjuncts_of(pred)
            cmps = tuple(a for a in atoms if isinstance(a, Cmp))
            self.tests[pred] = self.compiler.conjunct(cmps) if len(cmps) == len(atoms) else None
        return self.tests[pred]

    def holds(self, pred: Pred, values: Mapping[str, Value]) -> bool:
        test = self.test(pred)
        keys = self.keys.get(pred)
        if test is not None and keys is not None and len(keys) == len(values):
            return test(EMPTY, values, 0, 0)
        return super().holds(pred, values)

    def emit(self, selected: Selection, around: Sequence[Event]) -> list[Event]:
        if self.p.negations or self.trailing:
            return super().emit(selected, around)
        values = {}
        for key, ref in self.row_refs:
            value = self.value(ref, selected, None, -1, None)
            if value is None:
                return super().emit(selected, around)
            values[key] = value
        try:
            row = self.row(EMPTY, values, 0, 0)
        except ArithmeticFault:
            self.faults.arithmetic += 1
            return []
        return [Event.of(self.p.output.name, selected[0][0].t0, selected[-1][-1].t1, row)]


class Fits:
    """Which components an event may be by their own conditions (those naming no other
    component; a Kleene closure's first or later event): the buffers' filter, and what
    the planner counts for its rates."""

    def __init__(self, pattern: Resolved, judge: Judge) -> None:
        self.pattern, self.judge = pattern, judge
        self.own: list[Pred] = []
        self.take_own: list[Pred] = []
        between = conjuncts(pattern)
        for step in pattern.steps:
            own, take_own = [], []
            for names, pred in between:
                if names != {step.var} and (names or step is not pattern.steps[0]):
                    continue
                indices = {pattern.refs[key].index for key in keys_of(pred)}
                if indices <= set(_OWN) and pred in conjuncts_of(step.begin):
                    own.append(pred)
                elif indices == {Index.CURRENT}:
                    take_own.append(pred)
            self.own.append(conjoin(*own))
            self.take_own.append(conjoin(*take_own))
        self.signatures: dict[int, Hashable] = {}
        """Each component's :meth:`signature`, once worked out."""
        self.negated = frozenset(t for n in pattern.negations for t in n.types)
        """The streams of negated components."""
        self.by_stream: dict[str, list[tuple[int, bool]]] = {}
        """Per stream, the components of that type and whether they take any such event."""
        for n, step in enumerate(pattern.steps):
            free = self.own[n] == TRUE or (step.kleene and self.take_own[n] == TRUE)
            for name in step.types:
                self.by_stream.setdefault(name, []).append((n, free))

    def signature(self, n: int) -> Hashable:
        """What decides the events component ``n`` may take: its streams, its own condition
        with its variable's name left out (canonical), and the partition.  Components of any
        patterns with equal signatures take the same events (a buffer pool's key).  Worked
        out once per component."""
        known = self.signatures.get(n)
        if known is not None:
            return known
        step = self.pattern.steps[n]
        refs = self.pattern.refs

        def anonymous(leaf: Leaf) -> Term:
            if isinstance(leaf, Attr) and leaf.name in refs:
                ref = refs[leaf.name]
                return Attr(leaf.scope, Ref("", ref.index, ref.attr, ref.aggregate).key)
            return leaf

        functions = self.judge.functions
        own = canonical(map_pred(self.own[n], anonymous), functions)
        take = canonical(map_pred(self.take_own[n], anonymous), functions) if step.kleene else None
        partition = self.pattern.partition if self.pattern.keyed else None
        signature = self.signatures[n] = (frozenset(step.types), own, take, partition)
        return signature

    def places(self, event: Event) -> list[int]:
        """The components ``event`` may be, in pattern order."""
        out = []
        for n, free in self.by_stream.get(event.stream, ()):
            if free or self.fits(n, event):
                out.append(n)
        return out

    def fits(self, n: int, event: Event) -> bool:
        """True if ``event`` may be component ``n`` by its own conditions."""
        step = self.pattern.steps[n]
        if event.stream not in step.types:
            return False
        if self._own(self.own[n], event):
            return True
        return step.kleene and self._own(self.take_own[n], event)

    def _own(self, pred: Pred, event: Event) -> bool:
        """``pred``, naming one component's current event only, for ``event``."""
        keys = self.judge.keys.get(pred)
        if keys is None:
            keys = self.judge.keys[pred] = keys_of(pred)
        refs = self.pattern.refs
        values = {}
        for key in keys:
            value = event.value(refs[key].attr or "")
            if value is not None:
                values[key] = value
        return self.judge.holds(pred, values)
