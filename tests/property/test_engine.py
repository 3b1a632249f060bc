"""The multi-query engine against the reference evaluator: many subscriptions, churn, all modes.

* Differential: several subscriptions that share prefixes (the same expression
  twice, extensions of one another, unions of an expression with itself) run in
  one engine; each subscription's output multiset equals the reference's for
  its own expression — with merging and indices, without merging, and in the
  naive mode (FR only).
* Stateful: a RuleBasedStateMachine interleaves subscribe, unsubscribe and
  epochs against a model that keeps, per live subscription, the events
  published since it was added; after every step the engine's cumulative
  output for each subscription equals the reference over those events, and
  every ``check_valid()`` passes.
* Restart: the machine may capture the run state at any step and rebuild the
  engine from its subscriptions (subscribed again in any order, some gone),
  restoring it; every live subscription's output stays the reference's.
* Clock groups: streams no subscription reads together keep their own event
  time.  Each group's events are shifted by its own offset and the groups'
  epochs interleaved in any order (one group far ahead of another); each
  subscription still gets the reference's output over its own streams.
"""

import pickle
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cesar.automata import algebra as alg
from cesar.automata.construct import build_automata
from cesar.automata.reference import evaluate
from cesar.automata.schema import Event, StreamSchema, epochs
from cesar.automata.terms import Scope
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from tests.algebra_strategies import SCHEMAS, SOURCES, expressions, input_streams, predicate

MODES = {
    "full": EngineOptions(),
    "nomerge": EngineOptions(merge=False),
    "naive": EngineOptions(merge=False, indices=False),
}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


@st.composite
def related_subscriptions(draw):
    """Expressions that share prefixes with each other (so the DAG merges them)."""
    pool = [draw(expressions(2)) for _ in range(draw(st.integers(1, 3)))]
    out = []
    for _ in range(draw(st.integers(1, 6))):
        base = draw(st.sampled_from(pool))
        kind = draw(st.sampled_from(["same", "select", "next", "union"]))
        if kind == "select":
            base = alg.Select(base, predicate(draw, {Scope.EVENT: base.attributes}))
        elif kind == "next":
            right = draw(st.sampled_from(SOURCES))
            scopes = {Scope.LEFT: base.attributes, Scope.RIGHT: right.attributes}
            base = alg.Seq(base, right, predicate(draw, scopes))
        elif kind == "union":
            base = alg.Union(base, base)
        out.append(base)
    return out


def subscribe(engine, name, expr):
    engine.subscribe(name, build_automata(expr, StreamSchema(name, expr.attributes)))


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=400, **SETTINGS)
@given(exprs=related_subscriptions(), streams=input_streams())
def test_each_subscription_gets_exactly_its_reference_output(mode, exprs, streams):
    engine = Engine(MODES[mode])
    for number, expr in enumerate(exprs):
        subscribe(engine, f"q{number}", expr)
    engine.check_valid()
    events = [e for stream in streams.values() for e in stream]
    got = Counter(engine.run(events))
    engine.check_valid()
    expected = Counter()
    for number, expr in enumerate(exprs):
        expected.update(evaluate(expr, streams, name=f"q{number}"))
    assert got == expected


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=300, **SETTINGS)
@given(exprs=related_subscriptions(), streams=input_streams(), data=st.data())
def test_a_restored_run_state_continues_as_if_never_stopped(mode, exprs, streams, data):
    """Capture between two epochs, rebuild from the subscriptions (any order, some gone),
    restore and go on: each remaining subscription's later output equals an engine's that
    never stopped.  The snapshot is read back as saved, or as snapshots were saved before
    shared instances kept their member masks (each member spelled out)."""
    names = [f"q{number}" for number in range(len(exprs))]
    steady, stopped = Engine(MODES[mode]), Engine(MODES[mode])
    for name, expr in zip(names, exprs, strict=True):
        subscribe(steady, name, expr)
        subscribe(stopped, name, expr)
    parts = epochs([e for stream in streams.values() for e in stream])
    cut = data.draw(st.integers(0, len(parts)))
    for epoch in parts[:cut]:
        steady.process(epoch)
        stopped.process(epoch)
    saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(capture(stopped).to_data())))
    if data.draw(st.booleans()):
        saved = saved.spelled_out()
    gone = data.draw(st.sets(st.sampled_from(names)))
    order = data.draw(st.permutations([n for n in names if n not in gone]))
    restarted = Engine(MODES[mode])
    prepare(restarted, saved)
    for name in order:
        expr = exprs[names.index(name)]
        automata = build_automata(expr, StreamSchema(name, expr.attributes))
        restarted.subscribe(name, automata, since=saved.since[name])
    restore(restarted, saved)
    restarted.check_valid()
    expected, got = Counter(), Counter()
    for epoch in parts[cut:]:
        expected.update(e for e in steady.process(epoch) if e.stream not in gone)
        got.update(restarted.process(epoch))
    restarted.check_valid()
    assert got == expected


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=200, **SETTINGS)
@given(
    exprs=related_subscriptions(),
    streams=input_streams(),
    offsets=st.dictionaries(st.sampled_from(sorted(SCHEMAS)), st.integers(-40, 40)),
    data=st.data(),
)
def test_independent_streams_keep_their_own_clocks(mode, exprs, streams, offsets, data):
    engine = Engine(MODES[mode])
    for number, expr in enumerate(exprs):
        subscribe(engine, f"q{number}", expr)
    groups = engine.program.groups
    shifted = {
        name: [
            Event(
                e.stream,
                e.t0 + offsets.get(groups.find(name), 0),
                e.t1 + offsets.get(groups.find(name), 0),
                e.values,
            )
            for e in events
        ]
        for name, events in streams.items()
    }
    queues = {}
    for name, events in shifted.items():
        queues.setdefault(groups.find(name), []).extend(events)
    queues = {root: epochs(events) for root, events in queues.items() if events}
    got = Counter()
    while queues:
        root = data.draw(st.sampled_from(sorted(queues)))
        got.update(engine.process(queues[root].pop(0)))
        if not queues[root]:
            del queues[root]
    engine.check_valid()
    expected = Counter()
    for number, expr in enumerate(exprs):
        expected.update(evaluate(expr, shifted, name=f"q{number}"))
    assert got == expected


class EngineMachine(RuleBasedStateMachine):
    """Subscribe, unsubscribe and publish epochs in any order, against a reference model."""

    options = MODES["full"]

    @initialize()
    def start(self):
        self.engine = Engine(self.options)
        self.live = {}  # id → (expression, index of the first event it sees)
        self.events = []
        self.got = {}
        self.time = 0
        self.count = 0
        self.history = []

    @rule(expr=expressions(2))
    def subscribe(self, expr):
        name = f"q{self.count}"
        self.count += 1
        subscribe(self.engine, name, expr)
        self.live[name] = (expr, len(self.events))
        self.got[name] = Counter()
        self.history.append(expr)

    @rule(data=st.data())
    def subscribe_again(self, data):
        """A late subscriber to an expression others hold: it shares their nodes and instances."""
        if self.history:
            self.subscribe(data.draw(st.sampled_from(self.history)))

    @rule(data=st.data())
    def unsubscribe(self, data):
        if not self.live:
            return
        name = data.draw(st.sampled_from(sorted(self.live)))
        self.engine.unsubscribe(name)
        del self.live[name]
        del self.got[name]

    @rule(data=st.data())
    def restart(self, data):
        """Capture the run state, rebuild the engine from its subscriptions (in any order, some
        gone meanwhile) and restore: nothing a live subscription will receive changes."""
        saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(capture(self.engine).to_data())))
        names = sorted(self.live)
        gone = data.draw(st.sets(st.sampled_from(names))) if names else set()
        order = data.draw(st.permutations([n for n in names if n not in gone]))
        self.engine = Engine(self.options)
        prepare(self.engine, saved)
        for name in order:
            expr = self.live[name][0]
            automata = build_automata(expr, StreamSchema(name, expr.attributes))
            self.engine.subscribe(name, automata, since=saved.since[name])
        restore(self.engine, saved)
        for name in gone:
            del self.live[name]
            del self.got[name]

    @rule(
        gap=st.integers(1, 2),
        parts=st.lists(
            st.tuples(
                st.sampled_from(sorted(SCHEMAS)),
                st.sampled_from([0, 0, 1, 3]),
                st.sampled_from(["a", "b"]),
                st.integers(0, 4),
            ),
            min_size=1,
            max_size=3,
        ),
    )
    def publish(self, gap, parts):
        self.time += gap
        epoch = []
        for stream, length, key, number in parts:
            values = {"k": key, "w": float(number)} if stream == "U" else {"k": key, "v": number}
            epoch.append(Event.of(stream, self.time - length, self.time, values))
        self.events.extend(epoch)
        for event in self.engine.process(epoch):
            self.got[event.stream][event] += 1

    @invariant()
    def indices_are_valid(self):
        self.engine.check_valid()

    @invariant()
    def every_subscription_matches_its_reference(self):
        for name, (expr, first) in self.live.items():
            streams = {stream: [] for stream in SCHEMAS}
            for event in self.events[first:]:
                streams[event.stream].append(event)
            assert self.got[name] == Counter(evaluate(expr, streams, name=name))


class NaiveEngineMachine(EngineMachine):
    options = MODES["naive"]


TestEngineMachine = EngineMachine.TestCase
TestEngineMachine.settings = settings(max_examples=150, stateful_step_count=25, **SETTINGS)
TestNaiveEngineMachine = NaiveEngineMachine.TestCase
TestNaiveEngineMachine.settings = settings(max_examples=50, stateful_step_count=25, **SETTINGS)
