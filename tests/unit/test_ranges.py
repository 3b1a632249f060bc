"""RangeList: plain lists while small, a sorted container beyond, the same answers in both."""

import random

import pytest

from cesar.index.ranges import RANGE_OPS, SHRINK, SMALL, RangeList, compare
from tests.strategies import OPS


def _expected(model, op, value):
    ops = {"<": lambda k: k < value, "<=": lambda k: k <= value,
           ">": lambda k: k > value, ">=": lambda k: k >= value}  # fmt: skip
    return [item for item in sorted(model, key=lambda i: i[0]) if ops[op](item[0])]


@pytest.mark.parametrize("seed", [1, 2])
def test_growing_past_small_and_shrinking_below_shrink_keeps_every_answer(seed):
    rng = random.Random(seed)
    ranges = RangeList(key=lambda item: item[0])
    model = []
    sizes = []
    for number in range(SMALL + 300):  # equal keys often: 50 distinct values
        item = (rng.randrange(50) / 2, number)
        ranges.add(item)
        model.append(item)
    sizes.append(len(ranges))
    ranges.check_valid()
    rng.shuffle(model)
    while len(model) > SHRINK // 2:
        ranges.remove(model.pop())
        if len(model) % 500 == 0 or len(model) in (SHRINK, SHRINK - 1):
            ranges.check_valid()
            sizes.append(len(ranges))
            value = rng.randrange(52) / 2 - 0.5
            for op in RANGE_OPS:
                got = list(ranges.satisfying(op, value))
                # Equal keys may come in any order between the two forms: compare as sets of
                # items, and the keys in order.
                want = _expected(model, op, value)
                assert sorted(got) == sorted(want) and [k for k, _ in got] == [k for k, _ in want]
    assert sizes[0] > SMALL and len(ranges) < SHRINK
    with pytest.raises(ValueError):
        ranges.remove((100.0, -1))
    assert list(ranges.satisfying(">", float("nan"))) == []


@pytest.mark.parametrize("op", ["=", "!=", "<", "<=", ">", ">="])
def test_compare_is_each_operators_model_on_numbers_strings_and_nan(op):
    values = [0, 1, 1.0, -2.5, 1e300, float("nan"), float("inf")]
    pairs = [(a, b) for a in values for b in values] + [("a", "b"), ("b", "a"), ("a", "a")]
    assert [compare(op, a, b) for a, b in pairs] == [OPS[op](a, b) for a, b in pairs]


def test_compare_refuses_what_is_not_an_operator():
    with pytest.raises(AssertionError, match="not an operator"):
        compare("<>", 1, 2)
