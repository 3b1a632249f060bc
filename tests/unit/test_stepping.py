"""Shared μ steps (server/engine/stepping.py): which nodes step, and that runs take their steps
once per group, with the reference's output."""

from __future__ import annotations

from collections import Counter

from cesar.automata import algebra as alg
from cesar.automata.construct import build_automata
from cesar.automata.reference import evaluate
from cesar.automata.schema import AttrType, Event, StreamSchema
from cesar.automata.terms import TRUE, And, Arith, Attr, Cmp, Const, Dur, Scope
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore

INT, STRING = AttrType.INT, AttrType.STRING
S = alg.Source("S", (("k", STRING), ("v", INT)))


def fold(
    bound: int, reads_run: bool = False, sums: bool = False, divides: bool = False
) -> alg.Expr:
    """Runs from each ``k = 'a'``, stepping on ``k = 'b'`` within ``bound``; output ``v >= 3``.

    ``reads_run``: the step also compares the event with the run (``$2.v > $.v``);
    ``sums``: the run keeps ``total``, the sum of the step events' ``v``; ``divides``: it
    keeps ``total`` divided by each step's ``v`` instead (a step with ``v = 0`` faults)."""
    atoms = [
        Cmp("<=", Dur(), Const(bound, INT)),
        Cmp("=", Attr(Scope.RIGHT, "k"), Const("b", STRING)),
    ]
    if reads_run:
        atoms.append(Cmp(">", Attr(Scope.RIGHT, "v"), Attr(Scope.STATE, "v")))
    first: alg.Expr = alg.Select(S, Cmp("=", Attr(Scope.EVENT, "k"), Const("a", STRING)))
    aggregates: tuple[alg.Assign, ...] = ()
    if sums or divides:
        first = alg.Introduce(first, (alg.Assign("total", Const(60, INT), INT),))
        op = "/" if divides else "+"
        added = Arith(op, Attr(Scope.STATE, "total"), Attr(Scope.RIGHT, "v"))
        aggregates = (alg.Assign("total", added, INT),)
    step = alg.Fold(first, S, And(tuple(atoms)), TRUE, aggregates)
    return alg.Select(step, Cmp(">=", Attr(Scope.EVENT, "v"), Const(3, INT)))


def subscribe(engine: Engine, name: str, expr: alg.Expr) -> None:
    engine.subscribe(name, build_automata(expr, StreamSchema(name, expr.attributes)))


def quotes() -> list[Event]:
    """Three runs start (t 1-3); five steps that output nothing (4-8); one that outputs (9)."""
    starts = [Event.of("S", t, t, {"k": "a", "v": 0}) for t in (1, 2, 3)]
    steps = [Event.of("S", t, t, {"k": "b", "v": 1}) for t in range(4, 9)]
    return [*starts, *steps, Event.of("S", 9, 9, {"k": "b", "v": 5})]


def run(options: EngineOptions, exprs: dict[str, alg.Expr]) -> tuple[Engine, Counter[Event]]:
    engine = Engine(options)
    for name, expr in exprs.items():
        subscribe(engine, name, expr)
    out = Counter(engine.run(quotes()))
    engine.check_valid()
    return engine, out


def reference(exprs: dict[str, alg.Expr]) -> Counter[Event]:
    expected: Counter[Event] = Counter()
    for name, expr in exprs.items():
        expected.update(evaluate(expr, {"S": quotes()}, name=name))
    return expected


def test_runs_of_a_group_take_a_step_once():
    exprs = {"q0": fold(20), "q1": fold(20)}
    shared, got = run(EngineOptions(), exprs)
    alone, baseline = run(EngineOptions(steps=False), exprs)
    assert got == baseline == reference(exprs)
    assert sum(got.values()) == 6  # three runs, two subscriptions
    assert shared.counters.steps_shared == 5  # the five steps that output nothing, once each
    assert alone.counters.steps_shared == 0
    # Eagerly each step moves each of the three runs; lazily only the step that outputs does.
    assert alone.counters.instances_touched == 3 * 6
    assert shared.counters.instances_touched == 3
    assert shared.counters.settled == 3


def test_runs_that_aggregate_replay_the_steps_they_owe():
    exprs = {"q0": fold(20, sums=True)}
    shared, got = run(EngineOptions(), exprs)
    assert got == reference(exprs)
    assert sorted(dict(e.values)["total"] for e in got) == [70, 70, 70]  # 60, five 1s, then 5
    assert shared.counters.steps_shared == 5
    assert shared.counters.instances_touched == 3


def test_a_run_whose_replay_faults_ends_there():
    """Runs that divide by each step's ``v``: a step with ``v = 0`` ends them (as eagerly),
    found when the run is read, so the fault is counted then."""
    exprs = {"q0": fold(20, divides=True)}
    events = quotes()
    events[4] = Event.of("S", 5, 5, {"k": "b", "v": 0})  # the second step
    engine = Engine()
    subscribe(engine, "q0", exprs["q0"])
    got = Counter(engine.run(events))
    engine.check_valid()
    assert got == Counter(evaluate(exprs["q0"], {"S": events}, name="q0")) == Counter()
    assert engine.counters.steps_shared == 5
    assert engine.faults.arithmetic == 3  # each run, when the step at 9 read it
    assert not engine.state.instances


def test_a_step_that_reads_the_run_does_not_step_lazily():
    exprs = {"q0": fold(20, reads_run=True)}
    shared, got = run(EngineOptions(), exprs)
    assert got == reference(exprs)
    assert shared.counters.steps_shared == 0
    assert not shared.steppers.rebind_of(next(iter(shared.program.dag.nodes)) + 1)


def test_a_group_whose_slots_bound_dur_differently_steps_eagerly():
    exprs = {"q0": fold(20), "q1": fold(5)}
    shared, got = run(EngineOptions(), exprs)
    assert got == reference(exprs)
    assert shared.counters.steps_shared == 0


def test_a_subscription_that_changes_the_bound_settles_the_runs_first():
    engine = Engine()
    subscribe(engine, "q0", fold(20))
    events = quotes()
    got: Counter[Event] = Counter(engine.run(events[:6]))
    assert engine.state.stepped and engine.counters.steps_shared == 3
    subscribe(engine, "q1", fold(40))  # the node's DUR bound becomes 40: q0's runs step eagerly
    assert not engine.state.stepped
    engine.check_valid()
    got.update(engine.run(events[6:]))
    expected = Counter(e for e in reference({"q0": fold(20)}).elements())
    assert got == expected


def test_a_snapshot_settles_the_steps_runs_owe_so_a_restored_engine_sums_them():
    """Three runs owe two shared steps when the snapshot is taken; the restored engine has no
    history to replay them from, so capture settles them first (totals 70, not 67)."""
    expr = fold(20, sums=True)
    events = quotes()
    engine = Engine()
    subscribe(engine, "q", expr)
    whole = Counter(engine.run(events))
    first = Engine()
    subscribe(first, "q", expr)
    before = first.run(events[:6])
    assert first.counters.steps_shared == 3
    saved = RunSnapshot.from_data(capture(first).to_data())
    restored = Engine()
    prepare(restored, saved)
    restored.subscribe(
        "q", build_automata(expr, StreamSchema("q", expr.attributes)), since=saved.since["q"]
    )
    restore(restored, saved)
    after = restored.run(events[6:])
    restored.check_valid()
    assert Counter(before + after) == whole
    assert {e.value("total") for e in whole} == {70}
