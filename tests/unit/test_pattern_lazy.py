"""Lazy runs (automata/pattern/lazy.py) on hand-made streams: the recomputing search's budget."""

import random
from collections import Counter

from cesar.automata.compiler import compile_query
from cesar.automata.pattern.lazy import LazyRun
from cesar.automata.pattern.plans import Plan, PlanKind
from cesar.automata.pattern.reference import evaluate
from cesar.automata.schema import Event, parse_stream_spec

STOCK = parse_stream_spec("Stock(Name:string,Volume:int)")
RUNAWAY = (
    "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_any_match(a[], b) "
    "{ [Name] AND b.Volume > 999 } WITHIN 12 PUBLISH R"
)


def quotes(count: int) -> list[Event]:
    rng = random.Random(3)
    return [
        Event.of("Stock", t, t, {"Name": "IBM", "Volume": rng.choice([10, 2000])})
        for t in range(1, count + 1)
    ]


def run(max_steps: int | None) -> tuple[LazyRun, Counter[Event]]:
    pattern = compile_query(RUNAWAY, {"Stock": STOCK}).pattern
    assert pattern is not None
    lazy = LazyRun(pattern, Plan(PlanKind.RECOMPUTE), max_steps=max_steps)
    made: Counter[Event] = Counter()
    for event in quotes(40):
        made.update(lazy.process([event]))
    return lazy, made


def test_a_search_past_its_budget_is_abandoned_and_finds_only_true_matches() -> None:
    pattern = compile_query(RUNAWAY, {"Stock": STOCK}).pattern
    assert pattern is not None
    oracle = Counter(evaluate(pattern, {"Stock": quotes(40)}))
    unbounded, everything = run(None)
    assert everything == oracle and unbounded.counters.abandoned == 0
    bounded, some = run(500)
    assert bounded.counters.abandoned > 0
    assert not some - oracle and sum(some.values()) < sum(oracle.values())
    per_epoch = bounded.counters.searched / 40
    assert per_epoch <= 501
