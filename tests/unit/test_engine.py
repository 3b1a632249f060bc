"""The multi-query engine: late subscribers, collection of dead instances, limits, notices."""

import math

import pytest

from cesar.automata import algebra as alg
from cesar.automata.compiler import compile_query
from cesar.automata.construct import build_automata
from cesar.automata.schema import AttrType, Event, StreamSchema, parse_stream_spec
from cesar.automata.terms import Attr, Cmp, Const, Scope
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.workload import Workload

S = parse_stream_spec("S(k:string,v:int)")


def subscribe(engine, name, text):
    engine.subscribe(name, compile_query(text, {"S": S}, name).automata)


def s(t, k, v):
    return Event.of("S", t, t, {"k": k, "v": v})


PAIRS = "S NEXT{$1.k = $2.k} S"


def test_a_late_subscriber_sees_only_matches_rooted_after_it_joined():
    engine = Engine()
    subscribe(engine, "early", PAIRS)
    engine.process([s(1, "a", 1)])
    subscribe(engine, "late", PAIRS)
    assert engine.program.dag.nodes[1].refs == 2  # the late one shares the early one's nodes
    out = engine.process([s(2, "a", 2)])
    assert [e.stream for e in out] == ["early"]
    out = engine.process([s(3, "a", 3)])
    assert sorted(e.stream for e in out) == ["early", "late"]
    engine.check_valid()


def test_unsubscribe_leaves_the_other_subscriptions_instances_alone():
    engine = Engine()
    subscribe(engine, "a", PAIRS)
    subscribe(engine, "b", "FILTER{v > 2}(S NEXT{$1.k = $2.k} S)")
    engine.process([s(1, "a", 1)])
    live = len(engine.state.instances)
    engine.unsubscribe("b")
    assert len(engine.state.instances) == live
    assert [e.stream for e in engine.process([s(2, "a", 2)])] == ["a"]
    engine.unsubscribe("a")
    assert (
        not engine.state.instances and not engine.state.live and len(engine.program.dag.nodes) == 1
    )
    engine.check_valid()


def test_instances_past_an_upper_duration_bound_are_collected():
    engine = Engine()
    subscribe(engine, "q", "S NEXT{$1.k = $2.k AND DUR <= 3} S")
    engine.process([s(1, "a", 1)])
    engine.process([s(2, "b", 1)])
    assert len(engine.state.instances) == 2
    engine.process([s(3, "c", 1)])  # the instance from t = 1 could only fire with DUR >= 4
    assert engine.counters.collected == 1
    assert sorted(i.binding["k_1"] for i in engine.state.instances.values()) == ["b", "c"]
    engine.check_valid()


def test_a_subscription_over_its_limit_drops_its_oldest_and_is_told_once():
    engine = Engine(EngineOptions(max_instances_per_subscription=2))
    subscribe(engine, "q", PAIRS)
    subscribe(engine, "other", "FILTER{v > 100} S")
    for t, key in enumerate("abcd", 1):
        engine.process([s(t, key, 1)])
    assert sorted(i.binding["k_1"] for i in engine.state.instances.values()) == ["c", "d"]
    assert engine.counters.dropped == 2
    assert [n.subscription for n in engine.notices] == ["q"]  # once: the episode goes on
    assert "exceeded 2 live instances (max_instances_per_subscription)" in engine.notices[0].reason
    engine.check_valid()


def test_instances_are_counted_by_members_only_while_the_limit_may_bind():
    engine = Engine(EngineOptions(max_instances_per_subscription=4))
    subscribe(engine, "q", "FILTER{v > 0} S NEXT{$1.k = $2.k AND $2.v = 0} S")
    for t, key in enumerate("abc", 1):
        engine.process([s(t, key, 1)])
    assert len(engine.state.instances) == 3 and engine.state.memberships is None
    for t, key in enumerate("defg", 4):  # over the limit: counted, the oldest left
        engine.process([s(t, key, 1)])
        engine.check_valid()
    assert len(engine.state.instances) == 4 and engine.state.memberships is not None
    assert sum(engine.state.memberships.values()) == 4
    engine.process([s(8, "d", 0)])  # one completes: 3 are left, more than half, counted
    engine.check_valid()
    assert len(engine.state.instances) == 3 and engine.state.memberships is not None
    engine.process([s(9, "e", 0), s(9, "f", 0)])  # at most half the limit: not counted
    engine.check_valid()
    assert len(engine.state.instances) == 1 and engine.state.memberships is None
    assert engine.counters.dropped == 3


def test_a_runaway_sharing_a_node_leaves_only_its_own_room():
    engine = Engine(EngineOptions(max_instances_per_subscription=3))
    subscribe(engine, "calm", "FILTER{v > 5} S NEXT{$1.k = $2.k AND $2.v = 0} S")
    subscribe(engine, "runaway", "FILTER{v > 0} S NEXT{$1.k = $2.k AND $2.v = 0} S")
    calm, runaway = (1 << engine.program.placement(n, 0)[1] for n in ("calm", "runaway"))
    engine.process([s(1, "a", 9), s(1, "b", 9)])  # two partial matches both hold, shared
    assert len(engine.state.instances) == 2 and not engine.notices
    for t in range(2, 5):  # three more of the runaway's alone: five, over its limit
        engine.process([s(t, f"r{t}", 1)])
    members = [i.members for i in engine.state.instances.values()]
    assert members == [calm, calm, runaway, runaway, runaway]  # it left the shared ones
    assert [n.subscription for n in engine.notices] == ["runaway"]
    assert engine.counters.dropped == 0  # calm still holds them
    assert [e.stream for e in engine.process([s(5, "a", 0)])] == ["calm"]
    engine.check_valid()


def test_an_engine_limit_bounds_all_instances():
    engine = Engine(EngineOptions(max_instances=3))
    subscribe(engine, "q", PAIRS)
    subscribe(engine, "r", "S NEXT{$1.v < $2.v} S")
    for t in range(1, 5):
        engine.process([s(t, f"k{t}", 0)])
    assert len(engine.state.instances) == 3
    assert engine.counters.dropped == 5
    engine.check_valid()


def test_subscription_names_and_epoch_order_are_checked():
    engine = Engine()
    subscribe(engine, "q", PAIRS)
    with pytest.raises(ValueError, match="exists"):
        subscribe(engine, "q", PAIRS)
    engine.process([s(2, "a", 1)])
    with pytest.raises(ValueError, match="epoch"):
        engine.process([s(2, "a", 1)])


def test_the_worked_example_of_docs_engine():
    stock = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)")
    first = "FILTER{Volume > 5000} Stock NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock"
    engine = Engine()
    for name, text in (("A", first), ("B", f"FILTER{{Price > 100}}({first})")):
        engine.subscribe(name, compile_query(text, {"Stock": stock}, name).automata)
    node = 1
    assert (
        engine.program.dag.nodes[node].refs == 2
        and len(engine.program.dag.nodes[node].leaving) == 2
    )

    def quote(t, name, price, volume):
        return Event.of("Stock", t, t, {"Name": name, "Price": price, "Volume": volume})

    assert engine.process([quote(1, "IBM", 90.0, 8000)]) == []
    assert node in engine.state.live and [
        i.binding["Name_1"] for i in engine.state.instances.values()
    ] == ["IBM"]
    assert engine.process([quote(2, "MSFT", 30.0, 100)]) == []
    assert engine.counters.nodes_touched == 0  # no instance holds MSFT: the node is not reached
    out = engine.process([quote(3, "IBM", 120.0, 100)])
    assert sorted(e.stream for e in out) == ["A", "B"]
    assert node not in engine.state.live and not engine.state.instances
    counters = engine.counters
    assert (counters.fr_hits, counters.nodes_touched, counters.instances_touched) == (1, 1, 1)
    engine.check_valid()


def test_an_event_looks_only_at_the_instances_of_the_filter_group_it_hits():
    """Subscriptions that differ in the key of a NEXT without an instance-event atom share
    one node; an event of one key touches that key's instance, not the other keys'."""
    engine = Engine()
    keys = [f"k{n}" for n in range(20)]
    for key in keys:
        subscribe(engine, key, f"FILTER{{k = '{key}'}} S NEXT{{$2.k = '{key}' AND $2.v > 5}} S")
    engine.process([s(1, key, 1) for key in keys])
    assert len(engine.state.instances) == 20 and len(engine.state.live) == 1
    engine.check_valid()
    out = engine.process([s(2, "k3", 9)])
    assert [e.stream for e in out] == ["k3"]
    assert engine.counters.instances_touched == 1
    starts = sorted((i.binding["k_1"], i.t0) for i in engine.state.instances.values())
    assert ("k3", 1) not in starts and ("k3", 2) in starts and len(starts) == 20
    engine.check_valid()


def test_a_waiting_instance_is_reached_only_by_the_events_that_complete_it():
    """Subscriptions that differ in a factor (``$2.v > f * $1.v``) share one node; once
    probed, each start waits there per factor under the threshold f × v: a later event
    touches only the (instance, factor) pairs whose threshold it passes (a pair whose slot
    has left goes the first time it is met)."""
    engine = Engine()
    for f in range(2, 12):
        text = f"FILTER{{k = 'a'}} S NEXT{{$2.k = 'b' AND $2.v > {f} * $1.v}} S"
        subscribe(engine, f"x{f}", text)
    engine.process([s(1, "a", 10), s(1, "a", 20)])  # 2 instances, 10 factors each
    engine.process([s(2, "b", 0)])  # the first probe files both under their 20 thresholds
    engine.check_valid()
    assert engine.counters.instances_touched == 2
    out = engine.process([s(3, "b", 35)])  # passes 2 × 10 and 3 × 10
    assert sorted(e.stream for e in out) == ["x2", "x3"]
    assert engine.counters.instances_touched == 2 + 2
    engine.check_valid()
    out = engine.process([s(4, "b", 45)])  # 4 × 10 now; 2 × 20 no longer waits for x2
    assert sorted(e.stream for e in out) == ["x2", "x4"]
    assert engine.counters.instances_touched == 4 + 4  # x2 and x3 of the first were met
    engine.check_valid()
    out = engine.process([s(5, "b", 8)])
    assert out == [] and engine.counters.instances_touched == 4 + 4
    engine.check_valid()


DROP = "S NEXT{$1.k = $2.k AND $2.v < 0.97 * $1.v} S"


@pytest.mark.parametrize("waiting", [True, False])
def test_runs_of_a_key_wait_by_threshold_so_an_event_reaches_only_those_it_completes(waiting):
    """``$1.k = $2.k AND $2.v < 0.97 * $1.v`` (a 3 % drop of the same key, no window): the
    runs wait per key value under the threshold 0.97 × v; an event of key ``a`` reaches
    only the runs of ``a`` that it completes, however many others wait (without waiting
    by threshold, every run of its key is visited)."""
    engine = Engine(EngineOptions(waiting=waiting))
    subscribe(engine, "drop", DROP)
    for t in range(1, 11):
        engine.process([s(t, key, 100 + t) for key in "abc"])
    engine.process([s(11, "z", 0)])  # a key with no runs
    engine.check_valid()
    assert len(engine.state.instances) == 31
    before = engine.counters.instances_touched
    out = engine.process([s(12, "a", 105)])  # 105 < 0.97 × v for v = 109, 110
    assert sorted(e.attrs()["v"] for e in out) == [105, 105]
    assert sorted(e.t0 for e in out) == [9, 10]
    # Waiting: the two it completes (a run waits under its key from its start, so no event of
    # another key ever met one: before == 0).  Without: the ten runs of a.
    assert engine.counters.instances_touched - before == (2 if waiting else 10)
    assert before == (0 if waiting else 3 * sum(range(10)))  # each quote met its key's runs
    engine.check_valid()
    out = engine.process([s(13, "a", 1)])  # the other eight of a, and the one from t = 12
    assert sorted(e.t0 for e in out) == [*range(1, 9), 12]
    engine.check_valid()


def test_a_match_shared_by_a_family_is_one_reference_until_it_is_copied():
    """A thousand subscriptions of one template matching together: process_matches gives one
    Match naming their slots (no event per subscription); process copies it per subscription.
    A match of one subscription is a Match too."""
    engine = Engine()
    for n in range(1000):
        subscribe(engine, f"f{n}", f"FILTER{{k = 'a' AND v > {n % 7}}} S")
    matches = engine.process_matches([s(1, "a", 9)])
    assert [type(m).__name__ for m in matches] == ["Match"] and len(matches[0]) == 1000
    assert engine.counters.matches == 1000
    assert sorted(e.stream for e in engine.process([s(2, "a", 3)])) == sorted(
        f"f{n}" for n in range(1000) if n % 7 < 3
    )
    subscribe(engine, "late", PAIRS)
    engine.process_matches([s(3, "b", 1)])
    (match,) = engine.process_matches([s(4, "b", 1)])
    assert match.streams() == ["late"] and len(match) == 1


def test_a_match_keeps_the_names_of_its_epoch_when_its_slots_change_later():
    """A Match names its subscriptions by slot: a subscription that leaves (or switches plan)
    after the match was made, and another that takes its slot, do not rename it."""
    engine = Engine()
    subscribe(engine, "first", "FILTER{k = 'a' AND v > 0} S")
    subscribe(engine, "second", "FILTER{k = 'a' AND v > 1} S")
    (match,) = engine.process_matches([s(1, "a", 9)])
    engine.unsubscribe("first")
    subscribe(engine, "third", "FILTER{k = 'a' AND v > 2} S")  # takes first's slot
    (later,) = engine.process_matches([s(2, "a", 9)])
    assert sorted(match.streams()) == ["first", "second"]
    assert sorted(later.streams()) == ["second", "third"]


RUN = "(SELECT *, 1 AS n FROM S) FOLD{$2.k = $.k, $2.v > $.v, $.n + 1 AS n} S"


def test_a_run_that_extends_keeps_its_instance_and_forks_on_simultaneous_events():
    engine = Engine()
    subscribe(engine, "q", RUN)
    engine.process([s(1, "a", 1)])
    (started,) = engine.state.instances.values()
    engine.process([s(2, "a", 2)])
    # The run from t = 1 took its successor's binding in place; t = 2 started its own.
    assert engine.state.instances[started.id] is started
    assert (started.binding["v"], started.binding["n"], started.t1) == (2, 2, 2)
    assert engine.counters.rebound == 1
    out = engine.process([s(3, "a", 5), s(3, "a", 6)])
    # Two simultaneous extensions fork the run: one in place, one new instance from t = 1.
    assert engine.counters.rebound == 3  # the runs from t = 1 and t = 2, once each
    assert sorted(i.binding["v"] for i in engine.state.instances.values() if i.t0 == 1) == [5, 6]
    assert sorted((e.t0, e.attrs()["n"]) for e in out) == [(1, 3), (1, 3), (2, 2), (2, 2)]
    engine.check_valid()


def test_an_equality_with_a_nan_constant_never_holds_even_for_the_same_nan_object():
    # F NEXT{$2.x = NaN} F: the second step's group is keyed on NaN; an event carrying that very
    # NaN object finds it in the group dictionary, and must still not satisfy the equality.
    source = alg.Source("F", (("x", AttrType.FLOAT),))
    right = alg.Rename(source, (("x", "y"),))
    pred = Cmp("=", Attr(Scope.RIGHT, "y"), Const(math.nan, AttrType.FLOAT))
    expr = alg.Seq(source, right, pred)
    for options in (EngineOptions(), EngineOptions(merge=False, indices=False)):
        engine = Engine(options)
        engine.subscribe("q", build_automata(expr, StreamSchema("q", expr.attributes)))
        out = engine.run([Event.of("F", 1, 1, {"x": 1.0}), Event.of("F", 2, 2, {"x": math.nan})])
        assert out == [] and engine.state.instances  # the instance from t = 1 waits on
        engine.check_valid()


@pytest.mark.parametrize("mode", ["automaton", "engine", "nomerge", "naive"])
def test_a_query_reading_a_timed_out_match_sees_it_before_the_epoch_that_reveals_it(mode):
    """A's pair with no S within 3 ticks is known at the epoch at 20 (no epoch came at its
    window's end, 4): it is published at 4, its subscriber gets it, and the query reading it
    pairs it with S at 20 — the next S after it — as the reference evaluator does."""
    pattern = "PATTERN SEQ(S a, S b, !(S n)) WHERE b.v > a.v AND n.v > b.v WITHIN 3 PUBLISH P"
    workload = Workload.build([S], [("P", pattern), ("R", "P NEXT{} S PUBLISH R")])
    events = [s(1, "a", 0), s(2, "a", 1), s(20, "b", 0)]
    got = sorted((e.stream, e.t0, e.t1) for e in workload.run(events, engine=mode))
    assert got == [("P", 1, 4), ("R", 1, 20)]
    assert sorted((e.stream, e.t0, e.t1) for e in workload.run(events)) == got


def test_remembered_events_count_against_the_instance_limit_with_one_notice():
    """A negation looking back over a long window would remember every event of its stream:
    over ``max_instances`` the oldest are forgotten, the subscription asking is told once, and
    the one that does not ask is not."""
    engine = Engine(EngineOptions(max_instances=3))
    subscribe(engine, "quiet", "PATTERN SEQ(!(S n), S a) WHERE n.v > 5 WITHIN 1000 PUBLISH Q")
    subscribe(engine, "plain", "FILTER{v > 100} S")
    for t in range(1, 8):
        engine.process([s(t, "a", 9)])
        assert len(list(engine.state.memory.events("S"))) <= 3
        engine.check_valid()
    assert [e.t1 for e in engine.state.memory.events("S")] == [5, 6, 7]
    notices = engine.notices
    assert [n.subscription for n in notices] == ["quiet"]
    assert "remembered events of S" in notices[0].reason
    assert engine.counters.dropped == 4


def test_a_workload_subscribed_runs_as_its_run_and_names_engine_modes_only():
    workload = Workload.build([S], [("P", PAIRS), ("R", "P NEXT{} S PUBLISH R")])
    events = [s(t, "a", t) for t in range(1, 6)]
    engine = workload.subscribed("nomerge")
    assert not engine.options.merge
    assert sorted(engine.subscriptions) == ["P", "R"]
    ran = engine.run(events) + engine.finish()
    assert sorted(map(repr, ran)) == sorted(map(repr, workload.run(events, engine="nomerge")))
    assert {e.stream for e in ran} == {"P", "R"}
    with pytest.raises(ValueError, match="'automaton' is not a multi-query engine mode"):
        workload.subscribed("automaton")
