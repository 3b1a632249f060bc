"""ValueMasks (index/masks.py) against a model: slots and constants, probed with every operator.

A Hypothesis state machine adds and removes slots with constants (ints and
floats mixed, NaN included, many equal) and probes with random values; every
answer must equal the model's slot-by-slot comparison (Python's operators), and ``check_valid()``
runs after every step.  Enough distinct constants occur for the prefix unions
to have several blocks.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from cesar.index.masks import ValueMasks, slots_of
from tests.strategies import OPS

NUMBERS = st.one_of(
    st.integers(-30, 30),
    st.sampled_from([0.5, -2.5, 7.0, math.nan, math.inf, -math.inf]),
    st.floats(-30, 30, allow_nan=False),
)


class MasksMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.masks = ValueMasks()
        self.model: dict[int, float] = {}

    @rule(slot=st.integers(0, 200), constant=NUMBERS)
    def add(self, slot, constant):
        if slot not in self.model:
            self.masks.add(slot, constant)
            self.model[slot] = constant

    @rule(data=st.data())
    def remove(self, data):
        if self.model:
            slot = data.draw(st.sampled_from(sorted(self.model)))
            self.masks.remove(slot)
            del self.model[slot]

    @rule(op=st.sampled_from(sorted(OPS)), value=NUMBERS)
    def probe(self, op, value):
        expected = {s for s, c in self.model.items() if OPS[op](value, c)}
        assert set(slots_of(self.masks.satisfying(op, value))) == expected

    @rule(op=st.sampled_from([">", ">=", "<", "<="]))
    def loosest(self, op):
        ordered = [c for c in self.model.values() if not math.isnan(c)]
        bound = self.masks.loosest(op)
        if not ordered:
            assert bound is None
        else:
            assert bound == (min(ordered) if op in (">", ">=") else max(ordered))

    @invariant()
    def valid(self):
        self.masks.check_valid()
        assert len(self.masks) == len(self.model)


TestMasksMachine = MasksMachine.TestCase
TestMasksMachine.settings = settings(max_examples=100, stateful_step_count=60, deadline=None)


def test_a_probe_after_many_distinct_constants_uses_the_prefix_blocks():
    masks = ValueMasks()
    for slot in range(300):
        masks.add(slot, float(slot % 150))
    assert set(slots_of(masks.satisfying(">", 100.5))) == {s for s in range(300) if s % 150 <= 100}
    assert set(slots_of(masks.satisfying("<=", 40.0))) == {s for s in range(300) if s % 150 >= 40}
    masks.check_valid()


@given(
    st.sets(st.integers(0, 2_100), max_size=40)
    | st.sets(st.integers(0, 20_000), min_size=100, max_size=160)
)
def test_slots_of_lists_every_set_bit_in_order_at_every_width(slots):
    """Each of slots_of's paths (a table below 256, one slot, bytes up to 1,024 bits, the
    sparse and the dense ones wider, a wide mask of more slots than the sparse path takes)
    gives the set bits, lowest first."""
    mask = sum(1 << slot for slot in slots)
    assert slots_of(mask) == tuple(sorted(slots))
    dense = (1 << max(slots, default=0) + 1) - 1
    assert slots_of(dense) == tuple(range(dense.bit_length()))
