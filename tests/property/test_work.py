"""The work budget's spreads: charges wait while no budget can be passed, and every check cuts
exactly whom spreading every charge at every check (as the budget did before) would cut."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.server.engine.work import Work

SLOTS = 6
OWNERS = {(0, slot): f"s{slot}" for slot in range(SLOTS)}
CLIENT = {f"s{slot}": "alice" if slot < 3 else "bob" for slot in range(SLOTS)}
charges = st.lists(st.tuples(st.integers(1, 2**SLOTS - 1), st.integers(1, 9)), max_size=12)


@settings(max_examples=400, deadline=None)
@given(
    limit=st.none() | st.integers(1, 60),
    budget=st.none() | st.integers(1, 80),
    lane=st.none() | st.integers(1, 200),
    epochs=st.lists(st.lists(charges, max_size=8), min_size=1, max_size=3),
)
def test_each_check_cuts_whom_spreading_every_charge_would(
    limit: int | None,
    budget: int | None,
    lane: int | None,
    epochs: list[list[list[tuple[int, int]]]],
) -> None:
    """After every check the same subscriptions are cut, for the same reasons, and each epoch
    ends with the same notices; a spread the waiting budget makes leaves the same totals, and
    each epoch's steps per subscription are the same."""
    works = [Work(limit, lambda: OWNERS, lane), Work(limit, lambda: OWNERS, lane)]
    if budget is not None:
        for work in works:
            for subscription, client in CLIENT.items():
                work.join(subscription, client, budget)
    for epoch in epochs:
        for work in works:
            work.begin()
        for batch in epoch:
            waiting, spreading = works
            for work in works:
                for members, steps in batch:
                    work.charge(0, members, steps)
            waiting.check()
            if spreading.charging and spreading.pending:  # as every check did before
                spreading.spread()
            spreading.pending.clear()
            spreading.unchecked = 0
            assert waiting.cut_now == spreading.cut_now
            assert waiting.cut == spreading.cut
            if not waiting.pending:
                assert waiting.spent == spreading.spent
        assert works[0].finish() == works[1].finish()
        for subscription in CLIENT:  # what the epoch charged each, spread or not
            assert works[0].steps_of(subscription) == works[1].last_spent[subscription]
        for work in works:
            work.check_valid(set(CLIENT))
