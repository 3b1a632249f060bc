"""The keyed items (add, remove, probe) against a list of holders, None and NaN values included."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.index.keyed import KeyedItems

NAN = math.nan  # one object: a holder bound to it is found by that very object only
VALUES = st.one_of(st.none(), st.just(NAN), st.integers(0, 3), st.sampled_from(["a", "b"]))
PLACES = st.tuples(st.sampled_from("ST"), st.sampled_from(["x", "y"]), VALUES, st.integers(0, 4))


@settings(max_examples=300)
@given(st.lists(st.tuples(st.booleans(), PLACES), max_size=40), st.lists(VALUES, min_size=1))
def test_probe_finds_exactly_the_items_holding_the_events_value(ops, probes):
    index: KeyedItems[int] = KeyedItems()
    holders: list[tuple[str, str, object, int]] = []
    for add, place in ops:
        if add:
            index.add(*place)
            holders.append(place)
        elif place in holders:
            index.remove(*place)
            holders.remove(place)
        index.check_valid()
    for stream in "ST":
        for value in probes:
            attrs = {"x": value, "y": value}
            found = list(index.probe(stream, attrs))
            expected = {
                (attr, item)
                for s, attr, v, item in holders
                if s == stream and (v is value or v == value)
            }
            assert sorted(found) == sorted(item for _, item in expected)
