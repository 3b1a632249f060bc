"""Placement is sound: a query key-partitioned on K means the same on each K-partition.

For every key :func:`automata.partition.partition_keys` reports, the reference
evaluator (the oracle) run on each partition of the input by the key's value,
then unioned, must equal it run on the whole input — which is exactly what
running the query on every shard with events routed by hash(K) relies on.
Random algebra covers the general shapes; CEL templates with key joins, pinned
constants, FOLD and resubscription cover the interesting positives, and the
same templates without the join must not be reported as keyed.
"""

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.compiler import compile_query
from cesar.automata.construct import build_automata
from cesar.automata.evaluate import Env, Faults, holds
from cesar.automata.partition import partition_keys, pinned_key, static_interest
from cesar.automata.reference import evaluate
from cesar.automata.schema import StreamSchema
from cesar.automata.terms import Scope
from tests.algebra_strategies import SCHEMAS, expressions, input_streams

STREAMS = {name: StreamSchema(name, columns) for name, columns in SCHEMAS.items()}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


def _partitioned_equals_whole(expr, automata, streams) -> None:  # type: ignore[no-untyped-def]
    """Each key's partitions give the whole output; a query pinned to a key value gets it
    all from that value's partition (it runs on that value's shard alone)."""
    whole = Counter(evaluate(expr, streams))
    for key in partition_keys(automata, STREAMS):
        pin = pinned_key(automata, key)
        values = {dict(e.values).get(key) for events in streams.values() for e in events}
        parts: Counter = Counter()
        for value in values:
            part = {
                name: [e for e in events if dict(e.values).get(key) == value]
                for name, events in streams.items()
            }
            out = evaluate(expr, part)
            assert pin is None or value == pin or not out, f"pinned to {pin!r}, not {value!r}"
            parts.update(out)
        assert parts == whole, f"not partitionable on {key}"


@settings(max_examples=600, **SETTINGS)
@given(expressions(), input_streams())
def test_random_algebra_keyed_placement_is_sound(expr, streams):
    automata = build_automata(expr, StreamSchema("out", expr.attributes))
    _partitioned_equals_whole(expr, automata, streams)


TEMPLATES = [
    "S NEXT{{$1.k = $2.k{extra}}} T",
    "FILTER{{k = 'a'}} S NEXT{{$2.k = 'a'{extra}}} T",
    "FILTER{{k = 'a'}} (S NEXT{{$1.k = $2.k{extra}}} T)",
    "(SELECT *, 1 AS n FROM S) FOLD{{$2.k = $.k{extra}, $2.v > $.v, $.n + 1 AS n}} T",
    "SELECT k_1, w FROM S NEXT{{$1.k = $2.k{extra}}} (FILTER{{w > 1}} U)",
    "S NEXT{{$1.k = $2.k{extra}}} (SELECT k AS k, v AS x FROM T NEXT{{$1.k = $2.k}} S)",
    "(S NEXT{{$1.k = $2.k{extra}}} T) UNION (T NEXT{{$1.k = $2.k}} S)",
]
EXTRAS = ["", " AND DUR <= 4", " AND $2.k != 'b'", " OR DUR = 9"]


@settings(max_examples=300, **SETTINGS)
@given(st.sampled_from(TEMPLATES), st.sampled_from(EXTRAS), input_streams())
def test_key_joins_are_found_and_sound(template, extra, streams):
    query = compile_query(template.format(extra=extra), STREAMS, "q")
    keys = partition_keys(query.automata, STREAMS)
    assert ("k" in keys) == ("OR" not in extra)
    _partitioned_equals_whole(query.algebra, query.automata, streams)
    pin = pinned_key(query.automata, "k") if "k" in keys else None
    assert pin == ("a" if "'a'" in template and "k" in keys else None)
    unjoined = template.replace("$1.k = $2.k", "$1.v >= 0").replace("$2.k = $.k", "$.n >= 0")
    if unjoined != template:
        query = compile_query(unjoined.format(extra=""), STREAMS, "q")
        assert "k" not in partition_keys(query.automata, STREAMS) or "'a'" in template


UNKEYED = [
    # the FOLD's first component decides which events end a run: without the key, any stock's
    # event may end it, so the runs of one key depend on the others
    "(SELECT *, 1 AS n FROM S) FOLD{$2.v >= 1, $2.k = $.k, $.n + 1 AS n} T",
    "S NEXT{$1.k = $2.k OR $2.v = 0} T",
    "FILTER{k = 'a'} S NEXT{$2.v > $1.v} T",
]


@settings(max_examples=300, **SETTINGS)
@given(st.sampled_from(UNKEYED), input_streams())
def test_steps_that_mix_keys_are_not_keyed(text, streams):
    query = compile_query(text, STREAMS, "q")
    keys = partition_keys(query.automata, STREAMS)
    assert "k" not in keys
    _partitioned_equals_whole(query.algebra, query.automata, streams)


def _satisfies(conjunct, event) -> bool:  # type: ignore[no-untyped-def]
    env = Env({Scope.EVENT: dict(event.values)}, event.duration)
    return holds(conjunct.pred(), env, Faults())


@settings(max_examples=600, **SETTINGS)
@given(expressions(), input_streams())
def test_events_outside_the_static_interest_change_nothing(expr, streams):
    automata = build_automata(expr, StreamSchema("out", expr.attributes))
    interest = static_interest(automata)
    kept = {
        name: [e for e in events if any(_satisfies(c, e) for c in interest.get(name, ()))]
        for name, events in streams.items()
    }
    assert Counter(evaluate(expr, kept)) == Counter(evaluate(expr, streams))


INTEREST = [
    *(t.format(extra=e) for t in TEMPLATES for e in EXTRAS),
    *UNKEYED,
    # events with v = 1 or 2 end a run (first component) without extending it (second)
    "(SELECT *, 1 AS n FROM S) FOLD{$2.v >= 1, $2.v >= 3, $.n + 1 AS n} T",
    "FILTER{v > 2} S NEXT{$2.k = 'a' AND $2.v < 2} T",
]


@settings(max_examples=600, **SETTINGS)
@given(st.sampled_from(INTEREST), input_streams())
def test_queries_see_the_same_through_their_static_interest(text, streams):
    query = compile_query(text, STREAMS, "q")
    interest = static_interest(query.automata)
    kept = {
        name: [e for e in events if any(_satisfies(c, e) for c in interest.get(name, ()))]
        for name, events in streams.items()
    }
    assert Counter(evaluate(query.algebra, kept)) == Counter(evaluate(query.algebra, streams))
