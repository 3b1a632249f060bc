"""The threshold index (add, remove, probe) against brute force, NaN and loose items included."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.index.ranges import RANGE_OPS
from cesar.index.thresholds import Thresholds
from tests.strategies import OPS

THRESHOLDS = st.one_of(
    st.none(), st.just(math.nan), st.integers(-3, 3), st.sampled_from([-1.5, 0.0, 0.5, 2.0])
)


@settings(max_examples=300)
@given(
    st.sampled_from(RANGE_OPS),
    st.lists(st.tuples(st.booleans(), st.integers(0, 10), THRESHOLDS), max_size=40),
    st.lists(st.one_of(st.integers(-4, 4), st.just(math.nan), st.just(0.5)), min_size=1),
)
def test_probe_yields_the_loose_items_and_exactly_those_the_value_passes(op, ops, probes):
    index: Thresholds[int] = Thresholds(op)
    model: dict[int, float | int | None] = {}
    for add, item, threshold in ops:
        if add and item not in model:
            model[item] = threshold
            index.add(item, threshold)
        elif not add and item in model:
            index.remove(item, model.pop(item))
        index.check_valid()
        assert len(index) == sum(t is None or t == t for t in model.values())
    for value in probes:
        found = list(index.probe(value))
        assert len(found) == len(set(found))
        expected = {i for i, t in model.items() if t is None or OPS[op](value, t)}
        assert set(found) == expected
        ranked = [model[i] for i in found if model[i] is not None]
        assert ranked == sorted(ranked)  # type: ignore[type-var]
