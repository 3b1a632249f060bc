"""Clock groups against a model: the connected components of the joined stream sets."""

from hypothesis import given
from hypothesis import strategies as st

from cesar.server.engine.clocks import StreamGroups

NAMES = st.sampled_from("ABCDEFGH")


def components(sets: list[set[str]], streams: set[str]) -> dict[str, frozenset[str]]:
    """Each stream's group, the slow way: merge overlapping sets until none overlap."""
    groups = [{s} for s in streams]
    for joined in sets:
        touching = [g for g in groups if g & joined]
        merged = set(joined).union(*touching)
        groups = [g for g in groups if not g & joined] + [merged]
    return {s: frozenset(g) for g in groups for s in g}


@given(st.lists(st.sets(NAMES, max_size=3), max_size=12))
def test_groups_are_the_components_of_what_was_read_together(joins):
    groups = StreamGroups()
    streams = set("ABCDEFGH")
    for done, streams_read in enumerate(joins, 1):
        before = components(joins[: done - 1], streams)
        absorbed = groups.join(streams_read)
        groups.check_valid()
        model = components(joins[:done], streams)
        assert len({before[s] for s in streams_read}) == len(absorbed) + 1 or not absorbed
        assert bool(absorbed) == (model != before)
        assert all(groups.find(a) != a for a in absorbed)
        for a in streams:
            for b in streams:
                assert groups.same(a, b) == (b in model[a])
