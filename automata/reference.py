"""The reference evaluator: a literal reading of the CESAR algebra (Section 2).

This module is the project's oracle for meaning.  It evaluates an algebra
expression over a *finite* list of events by following each definition as
written, with no indices, no incremental state and no cleverness:

* σ, π, ρ, α map or filter events one by one;
* ∪ is the multiset union;
* E1 ;θ E2 pairs each left event e1 with every right event e2 such that e2
  starts strictly after e1 ends, e1ˆe2 ⊨ θ, and no right event e' with
  e'.END < e2.END does the same (so all such e2 of the earliest end time);
* μ computes S[0] = E1 and S[n+1] = step(S[n]) until it is empty, and
  outputs ∪_{n≥1} S[n], where one step extends a run by its earliest-ending
  right events that start after it and satisfy the step predicate, keeping
  those that also satisfy the keep predicate.

Outputs are multisets (lists).  Quadratic and slow by design; exact is what
counts.

>>> from cesar.automata.schema import AttrType as T, Event
>>> s = Source("S", (("x", T.INT),))
>>> events = {"S": [Event.of("S", t, t, {"x": t}) for t in (1, 2, 3)]}
>>> [(e.t0, e.t1) for e in evaluate(Seq(Rename(s, (("x", "x_1"),)), s), events)]
[(1, 2), (2, 3)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from cesar.automata.algebra import (
    Expr,
    Fold,
    Introduce,
    Project,
    Rename,
    Select,
    Seq,
    Source,
    Union,
    first_name,
)
from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.evaluate import Env, Faults, eval_term, holds, store
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.schema import Event, Value
from cesar.automata.terms import Pred, Scope


@dataclass(frozen=True, slots=True)
class Row:
    """An intermediate event: attribute values and its interval."""

    values: Mapping[str, Value]
    t0: int
    t1: int


def evaluate(
    expr: Expr,
    streams: Mapping[str, Sequence[Event]],
    faults: Faults | None = None,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
    name: str = "out",
) -> list[Event]:
    """The multiset of events ``expr`` denotes over ``streams`` (stream name → its events).

    Output events are named ``name``.  Arithmetic faults make atoms false and
    are counted in ``faults``.
    """
    evaluator = _Evaluator(streams, faults if faults is not None else Faults(), functions)
    return [Event.of(name, row.t0, row.t1, row.values) for row in evaluator.rows(expr)]


class _Evaluator:
    def __init__(
        self,
        streams: Mapping[str, Sequence[Event]],
        faults: Faults,
        functions: FunctionRegistry,
    ) -> None:
        self.streams = streams
        self.faults = faults
        self.functions = functions

    def holds(self, pred: Pred, env: Env) -> bool:
        return holds(pred, env, self.faults, self.functions)

    def rows(self, expr: Expr) -> list[Row]:
        if isinstance(expr, Source):
            return [Row(e.attrs(), e.t0, e.t1) for e in self.streams.get(expr.name, ())]
        if isinstance(expr, Select):
            return [r for r in self.rows(expr.input) if self.holds(expr.pred, _single(r))]
        if isinstance(expr, Project):
            return [
                Row({k: r.values[k] for k in expr.keep}, r.t0, r.t1) for r in self.rows(expr.input)
            ]
        if isinstance(expr, Rename):
            table = dict(expr.mapping)
            return [
                Row({table.get(k, k): v for k, v in r.values.items()}, r.t0, r.t1)
                for r in self.rows(expr.input)
            ]
        if isinstance(expr, Introduce):
            return self.introduce(expr)
        if isinstance(expr, Union):
            return self.rows(expr.left) + self.rows(expr.right)
        if isinstance(expr, Seq):
            return self.seq(expr)
        return self.fold(expr)

    def introduce(self, expr: Introduce) -> list[Row]:
        out = []
        for row in self.rows(expr.input):
            env = _single(row)
            try:
                added = {
                    a.name: store(eval_term(a.term, env, self.functions), a.type)
                    for a in expr.assignments
                }
            except ArithmeticFault:
                self.faults.arithmetic += 1
                continue
            out.append(Row({**row.values, **added}, row.t0, row.t1))
        return out

    def seq(self, expr: Seq) -> list[Row]:
        rights = self.rows(expr.right)
        out = []
        for left in self.rows(expr.left):

            def satisfies(right: Row, left: Row = left) -> bool:
                return self.holds(expr.pred, _pair(left, right))

            for right in _earliest(left, rights, satisfies):
                out.append(Row({**left.values, **right.values}, left.t0, right.t1))
        return out

    def fold(self, expr: Fold) -> list[Row]:
        rights = self.rows(expr.right)
        right_names = expr.right.names
        runs = [_Run(row.values, row.values, row.t0, row.t1) for row in self.rows(expr.left)]
        out: list[Row] = []
        while runs:
            stepped: list[_Run] = []
            for run in runs:

                def satisfies(right: Row, run: _Run = run) -> bool:
                    return self.holds(expr.step, run.env(right))

                for right in _earliest(Row(run.state, run.t0, run.t1), rights, satisfies):
                    env = run.env(right)
                    if not self.holds(expr.keep, env):
                        continue
                    try:
                        aggregates = {
                            a.name: store(eval_term(a.term, env, self.functions), a.type)
                            for a in expr.aggregates
                        }
                    except ArithmeticFault:
                        self.faults.arithmetic += 1
                        continue
                    state = dict(run.state)
                    state.update({name: right.values[name] for name in right_names})
                    state.update(aggregates)
                    stepped.append(_Run(run.first, state, run.t0, right.t1))
            for run in stepped:
                firsts = {first_name(name): run.first[name] for name in right_names}
                out.append(Row({**firsts, **run.state}, run.t0, run.t1))
            runs = stepped
        return out


@dataclass(frozen=True, slots=True)
class _Run:
    """A μ run: the left event as it entered, the current state, and its interval."""

    first: Mapping[str, Value]
    state: Mapping[str, Value]
    t0: int
    t1: int

    def env(self, right: Row) -> Env:
        scopes = {Scope.LEFT: self.first, Scope.STATE: self.state, Scope.RIGHT: right.values}
        return Env(scopes, right.t1 - self.t0 + 1)


def _single(row: Row) -> Env:
    return Env({Scope.EVENT: row.values}, row.t1 - row.t0 + 1)


def _pair(left: Row, right: Row) -> Env:
    return Env({Scope.LEFT: left.values, Scope.RIGHT: right.values}, right.t1 - left.t0 + 1)


def _earliest(left: Row, rights: Iterable[Row], satisfies: Callable[[Row], bool]) -> list[Row]:
    """The right rows that start after ``left`` ends, satisfy, and end earliest among those."""
    candidates = [r for r in rights if r.t0 > left.t1 and satisfies(r)]
    if not candidates:
        return []
    end = min(r.t1 for r in candidates)
    return [r for r in candidates if r.t1 == end]
