"""Plans as data and their cost model (automata/pattern/plans.py), and the engine's switch rules
(server/engine/plans.py) on hand-checked streams."""

from collections import Counter

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelSemanticError
from cesar.automata.pattern.plans import (
    EAGER,
    Plan,
    PlanKind,
    choose,
    plan_line,
    refusal,
)
from cesar.automata.schema import Event, parse_stream_spec
from cesar.automata.terms import to_cel
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.workload import Workload

SCHEMAS = {n: parse_stream_spec(f"{n}(k:string,x:int)") for n in "ABC"}
SEQ3 = (
    "PATTERN SEQ(A a, B b, C c) WHERE skip_till_any_match(a, b, c) {{ b.x > a.x }} "
    "WITHIN 9 {} PUBLISH P"
)


def pattern(text):
    return compile_query(text, SCHEMAS).pattern


def test_plans_parse_and_spell():
    assert Plan.parse("chain(c, a, b)") == Plan(PlanKind.CHAIN, ("c", "a", "b"))
    assert Plan.parse("RECOMPUTE") == Plan(PlanKind.RECOMPUTE)
    assert Plan.parse("auto") is None
    with pytest.raises(ValueError, match="expected a plan: auto, eager, chain, tree, recompute"):
        Plan.parse("fast")
    with pytest.raises(ValueError, match="expected '\\)'"):
        Plan.parse("chain(a, b")


def test_what_a_lazy_plan_refuses():
    next_match = pattern(SEQ3.format("").replace("any_match", "next_match"))
    assert "only skip_till_any_match" in refusal(next_match, Plan(PlanKind.TREE))
    plain = pattern(SEQ3.format(""))
    assert (
        refusal(plain, Plan(PlanKind.CHAIN, ("a", "b")))
        == "a chain orders every component once: a, b, c"
    )
    assert refusal(plain, Plan(PlanKind.RECOMPUTE)) is None
    unbounded = pattern(SEQ3.format("").replace("WITHIN 9 ", ""))
    assert (
        refusal(unbounded, Plan(PlanKind.RECOMPUTE)) == "without WITHIN the buffers would never end"
    )
    assert refusal(unbounded, EAGER) is None


def test_a_pinned_plan_that_cannot_run_is_a_semantic_error_with_its_position():
    with pytest.raises(CelSemanticError, match="line 1, column 1: PLAN chain\\(a, b\\) cannot run"):
        compile_query(SEQ3.format("PLAN chain(a, b)"), SCHEMAS)
    assert compile_query(SEQ3.format("PLAN chain(c, b, a)"), SCHEMAS).pattern.pattern.plan == (
        "chain(c, b, a)"
    )


def test_the_cost_model_takes_the_rarest_first():
    plain = pattern(SEQ3.format(""))
    best, _ = choose(plain, {"a": 1.0, "b": 1.0, "c": 0.01})
    assert best.kind in (PlanKind.CHAIN, PlanKind.RECOMPUTE)
    assert best.kind is PlanKind.RECOMPUTE or best.order[0] == "c"
    assert choose(plain, {"a": 0.01, "b": 1.0, "c": 1.0})[0] == EAGER


A_THEN_B = (
    "PATTERN SEQ(A a, B b) WHERE skip_till_any_match(a, b) { b.x > a.x } WITHIN 3 "
    "PLAN eager PUBLISH P"
)


def planned(text):
    """An engine planning ``text``, subscribed as ``P``."""
    compiled = compile_query(text, SCHEMAS)
    engine = Engine(EngineOptions(plans=True))
    engine.subscribe("P", compiled.automata, None, compiled.pattern)
    return engine


def test_the_old_plan_finishes_a_match_rooted_at_the_switch_that_ends_a_window_later():
    engine = planned(A_THEN_B)
    assert "P" in engine.program
    engine.process([Event.of("A", 5, 5, {"k": "w", "x": 1})])
    assert engine.replan("P", Plan(PlanKind.RECOMPUTE))
    chain = Plan(PlanKind.CHAIN, ("b", "a"))
    subscription = engine.planner.planned["P"]
    subscription.pinned = False  # as if the planner chose: it waits for the eager one
    steps = []
    assert subscription.retiring and not engine.planner.switch("P", chain, 5, steps)
    assert steps == []
    assert engine.process([Event.of("B", 8, 8, {"k": "w", "x": 2})]) == [
        Event.of("P", 5, 8, {"a_k": "w", "a_x": 1, "b_k": "w", "b_x": 2})
    ]
    assert "P" not in engine.program and not subscription.retiring  # gone after its window
    assert engine.planner.switch("P", chain, 8, steps) and steps == []  # lazy to lazy
    engine.check_valid()


@pytest.mark.parametrize("back", ["eager", "recompute"])
def test_switching_back_while_the_old_plan_finishes_loses_and_doubles_nothing(back):
    """eager → chain → (eager: the DAG, still finishing, takes all again; or recompute)
    within one window: the match straddling both switches comes once."""
    engine = planned(A_THEN_B)
    got = engine.process([Event.of("A", 5, 5, {"k": "w", "x": 1})])
    assert engine.replan("P", Plan(PlanKind.CHAIN, ("b", "a")))
    got += engine.process([Event.of("A", 6, 6, {"k": "w", "x": 1})])
    assert engine.replan("P", Plan.parse(back))
    engine.check_valid()
    got += engine.process([Event.of("B", 8, 8, {"k": "w", "x": 2})])
    assert sorted(got, key=lambda e: e.t0) == [
        Event.of("P", 5, 8, {"a_k": "w", "a_x": 1, "b_k": "w", "b_x": 2}),
        Event.of("P", 6, 8, {"a_k": "w", "a_x": 1, "b_k": "w", "b_x": 2}),
    ]
    engine.check_valid()


def test_a_subscription_starts_eager_unwatched_and_explain_says_so():
    """On the DAG a subscription costs only its share of what the indices already pay; it is
    not watched (no test per event) until the DAG holds HEAVY partial matches for it."""
    engine = planned(SEQ3.format(""))
    assert engine.planner.describe("P") == (
        "plan eager: eager: weighed once the DAG holds 64 partial matches for it"
    )
    assert "P" in engine.program and engine.subscriptions == ["P"]
    assert not len(engine.planner.reaching.fitting)
    pattern = engine.planner.planned["P"].pattern
    assert plan_line(pattern).startswith("eager on the shared DAG until it holds many")


def rare_c(engine, ticks=600):
    """A and B every tick, C every 50th; returns the plans of the engine's subscriptions."""
    for t in range(1, ticks):
        epoch = [
            Event.of("A", t, t, {"k": "w", "x": t * 7 % 10}),
            Event.of("B", t, t, {"k": "w", "x": t * 3 % 10}),
        ]
        if t % 50 == 0:
            epoch.append(Event.of("C", t, t, {"k": "w", "x": 1}))
        engine.process(epoch)
    engine.check_valid()
    return {name: p.plan.kind for name, p in engine.planner.planned.items()}


def copies(count, window=30):
    """An engine with ``count`` subscriptions of one template (constants of their own)."""
    engine = Engine(EngineOptions(plans=True))
    for n in range(count):
        text = (
            SEQ3.format("")
            .replace("WITHIN 9", f"WITHIN {window}")
            .replace("PUBLISH P", f"PUBLISH P{n}")
            .replace("b.x > a.x", f"b.x > a.x AND a.x >= {n % 3}")
        )
        compiled = compile_query(text, SCHEMAS)
        engine.subscribe(f"P{n}", compiled.automata, None, compiled.pattern)
    return engine


def test_eager_shared_on_the_dag_costs_each_subscription_its_share():
    """A and B every tick wait for a rare C: alone, the DAG holds hundreds of partial matches
    for the subscription, which is watched and goes lazy (C first); five of one template
    share the DAG's nodes, each holds a fifth, and all stay eager and unwatched."""
    assert set(rare_c(copies(1)).values()) == {PlanKind.CHAIN}
    engine = copies(5)
    assert set(rare_c(engine).values()) == {PlanKind.EAGER}
    assert not any(p.watched for p in engine.planner.planned.values())


def test_a_lazy_plan_that_measures_worse_than_its_promise_goes_back_and_is_barred():
    """Two windows after a switch from eager the lazy run's measured work is held against
    the eager cost it was chosen for: over it by HYSTERESIS, back to eager, barred."""
    engine = copies(1, window=10)
    planner = engine.planner
    subscription = planner.planned["P0"]
    subscription.watched = True
    assert engine.replan("P0", Plan(PlanKind.CHAIN, ("a", "b", "c")))
    subscription.promise = (0.01, 0, 0)  # as if eager had been rated almost free
    rare_c(engine, ticks=120)
    assert subscription.plan == EAGER and subscription.promise is None
    assert subscription.barred_until > 100
    assert "lazy plans barred until" in subscription.why


@pytest.mark.parametrize(
    "plans",
    [
        ["recompute", "chain(a)"],  # lazy to lazy: the new run gets the old one's
        ["eager", "recompute"],  # eager to lazy: the planner's history
        ["recompute", "eager"],  # lazy to eager: remembered by the DAG
    ],
)
def test_a_negation_before_the_first_component_looks_back_across_a_switch(plans):
    """``A`` at 10 forbids a match of ``A`` at 11 (within 1 before it, of the same ``x``)
    though another plan saw it."""
    text = (
        "PATTERN SEQ(!(A y), A a) WHERE skip_till_any_match(a) { y.x = a.x } WITHIN 1 "
        f"PLAN {plans[0]} PUBLISH P"
    )
    engine = planned(text)
    first = engine.process([Event.of("A", 10, 10, {"k": "w", "x": 5})])
    assert engine.replan("P", Plan.parse(plans[1]))
    assert engine.process([Event.of("A", 11, 11, {"k": "w", "x": 5})]) == []
    assert engine.process([Event.of("A", 13, 13, {"k": "w", "x": 5})]) == [
        Event.of("P", 13, 13, {"a_k": "w", "a_x": 5})
    ]
    assert first == [Event.of("P", 10, 10, {"a_k": "w", "a_x": 5})]
    engine.check_valid()


def test_the_planner_measures_selectivities_in_its_lazy_runs():
    """Watched and gone lazy (``rare_c``), its lazy runs judge b.x > a.x; the planner keeps
    the share let through and shows it."""
    engine = copies(1)
    rare_c(engine)
    subscription = engine.planner.planned["P0"]
    ((pred, share),) = subscription.selectivity.items()
    assert to_cel(pred) == "b.x > a.x" and 0.2 < share < 0.8
    assert f"b.x > a.x passes {share:.2g}" in subscription.why


def test_a_query_reading_a_planned_pattern_makes_it_eager_and_gets_its_matches():
    """Lazy matches are published, not fed to readers: a reader pins its producer eager (on
    the DAG, which feeds it), and every query gives what the reference gives."""
    workload = Workload.build(
        SCHEMAS.values(),
        [
            ("P", SEQ3.format("")),
            ("Q", "FILTER{b_x > 3} P PUBLISH Q"),
        ],
    )
    events = [
        Event.of(s, t, t, {"k": "w", "x": (t * 7 + n) % 10})
        for t in range(1, 60)
        for n, s in enumerate("ABC")
    ]
    got = workload.run(events, engine="planned")
    assert Counter(got) == Counter(workload.run(events)) and any(e.stream == "Q" for e in got)
    engine = Engine(EngineOptions(plans=True))
    for query in workload.queries:
        engine.subscribe(query.name, query.automata, None, query.pattern)
    assert engine.planner.describe("P") == (
        "plan eager: eager: another subscription reads its output"
    )


def test_lazy_runs_share_the_instance_limit_and_the_largest_sheds_first():
    """Two lazy subscriptions under max_instances = 200: a window of years buffers every
    event, a short one little; every 64 epochs the lazy runs are held to 200 together, the
    large one shedding, and only it is told (once).  Their own conditions differ, so they
    share no buffer."""
    engine = Engine(EngineOptions(plans=True, max_instances=200))
    for name, window in (("Long", 100_000), ("Short", 3)):
        text = SEQ3.format("PLAN chain(c, b, a)").replace("WITHIN 9", f"WITHIN {window}")
        if name == "Short":
            text = text.replace("b.x > a.x", "b.x > a.x AND a.x < 99 AND b.x < 99")
        compiled = compile_query(text.replace("PUBLISH P", f"PUBLISH {name}"), SCHEMAS)
        engine.subscribe(name, compiled.automata, None, compiled.pattern)
    for t in range(1, 257):
        engine.process([Event.of(s, t, t, {"k": "w", "x": t % 10}) for s in "AB"])
        held = dict(
            (name, live + buffered) for name, live, buffered in engine.planner.lazy_holdings()
        )
        if t % 64 == 0:  # one run's limit, and all together, every budget period
            assert held["Long"] <= 200 and sum(held.values()) <= 200
    assert [n.subscription for n in engine.notices] == ["Long"]
    assert engine.counters.dropped > 0
    engine.check_valid()


def test_lazy_runs_with_equal_own_conditions_share_their_buffers():
    """Two lazy subscriptions whose components take the same events (the variables named
    apart, windows 3 and 100,000) keep one buffer per component: the engine holds each
    event once, the long window decides what is kept, and each finds the matches it
    would alone.  Past ``max_instances``, the long one sheds what only it needs: the short
    one loses nothing and is told nothing."""
    texts = {
        "Long": SEQ3.format("PLAN chain(c, b, a)").replace("WITHIN 9", "WITHIN 100000"),
        "Short": "PATTERN SEQ(A u, B v, C w) WHERE skip_till_any_match(u, v, w) { v.x > u.x } "
        "WITHIN 3 PLAN chain(w, v, u) PUBLISH P",
    }
    events = [
        [Event.of(s, t, t, {"k": "w", "x": (t * 7 + n) % 10}) for n, s in enumerate("ABC")]
        for t in range(1, 101)
    ]
    engine = Engine(EngineOptions(plans=True, max_instances=60))
    alone = {}
    for name, text in texts.items():
        compiled = compile_query(text.replace("PUBLISH P", f"PUBLISH {name}"), SCHEMAS)
        engine.subscribe(name, compiled.automata, None, compiled.pattern)
        one = Engine(EngineOptions(plans=True))
        one.subscribe(name, compiled.automata, None, compiled.pattern)
        alone[name] = Counter(e for epoch in events for e in one.process(epoch))
    got: Counter[Event] = Counter()
    for t, epoch in enumerate(events, 1):
        got.update(engine.process(epoch))
        figures = engine.planner.figures()
        assert figures["lazy_buffers"] == 3
        if t == 20:  # nothing shed yet: each event once, in its component's buffer
            assert figures["lazy_buffered"] == 3 * 20
        engine.check_valid()
    assert Counter(e for e in got.elements() if e.stream == "Short") == alone["Short"]
    assert alone["Short"] and [n.subscription for n in engine.notices] == ["Long"]


def test_a_planned_pattern_joins_the_clock_groups_it_reads():
    """A and B kept apart, each with its clock; the planned SEQ(A, B) joins them, and the
    joined group keeps the later clock (a subscription after it starts there)."""
    engine = Engine(EngineOptions(plans=True))
    for name in "AB":
        compiled = compile_query(f"FILTER{{x > 0}} {name} PUBLISH F{name}", SCHEMAS)
        engine.subscribe(f"F{name}", compiled.automata)
    engine.process([Event.of("A", 5, 5, {"k": "w", "x": 1})])
    engine.process([Event.of("B", 3, 3, {"k": "w", "x": 1})])
    compiled = compile_query(A_THEN_B.replace("PLAN eager", "PLAN tree"), SCHEMAS)
    engine.subscribe("P", compiled.automata, None, compiled.pattern)
    engine.check_valid()
    assert engine.planner.planned["P"].runs[-1].since == 5
    assert engine.state.group_clock[engine.program.groups.find("B")] == 5


def test_eager_subscriptions_crowding_a_template_are_not_measured():
    """Ten subscriptions of one template stay eager beside each other on the DAG, unwatched
    however much it holds (no test per event); when fewer than CROWD are left and the DAG
    holds enough for each, the sweep watches them."""
    engine = copies(10, window=60)
    rare_c(engine, ticks=300)
    assert not len(engine.planner.reaching.fitting)
    for n in range(3, 10):
        engine.unsubscribe(f"P{n}")
    for t in range(300, 600):
        engine.process([Event.of(s, t, t, {"k": "w", "x": t % 10}) for s in "AB"])
    assert set(engine.planner.reaching.fitting.fits) == {"P0", "P1", "P2"}
    engine.check_valid()
    for n in range(3):
        engine.unsubscribe(f"P{n}")
    assert not engine.planner.templates and not len(engine.planner.reaching.fitting)  # nothing kept


def test_a_pin_is_refused_by_an_engine_without_plans_and_honoured_by_one_with():
    compiled = compile_query(SEQ3.format("PLAN chain(c, b, a)"), SCHEMAS)
    with pytest.raises(ValueError, match=r"PLAN chain\(c, b, a\) cannot be honoured"):
        Engine().subscribe("P", compiled.automata, None, compiled.pattern)
    eager = compile_query(SEQ3.format("PLAN eager"), SCHEMAS)
    Engine().subscribe("P", eager.automata, None, eager.pattern)  # eager: every engine runs it
    engine = Engine(EngineOptions(plans=True))
    engine.subscribe("P", compiled.automata, None, compiled.pattern)
    assert engine.planner.describe("P") == "plan chain(c, b, a): pinned by the pattern's PLAN"
