"""A shard's state (``server/shard/state.py``): its lanes' snapshots load only where their
lanes are this server's."""

from pathlib import Path

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.schema import parse_stream_spec
from cesar.server.engine.options import EngineOptions
from cesar.server.host.snapshots import SnapshotError
from cesar.server.shard.state import ShardState
from cesar.server.wire.source import install_request

STOCK = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")
KEYED = "FILTER{Price > 10} Stock NEXT{$1.Name = $2.Name} Stock"


def saved(directory: Path, lane: str, place: tuple[int, int]) -> None:
    """A snapshot at position 5 of a shard at ``place`` running KEYED in ``lane``."""
    directory.mkdir(parents=True, exist_ok=True)
    state = ShardState(EngineOptions(), directory=directory)
    state.load(0, place)
    query = compile_query(KEYED, {"Stock": STOCK}, "Pairs")
    state.install(install_request(query, lane, "s1", {"Stock": STOCK}))
    state.snapshot(5, set())


def test_a_snapshot_loads_where_its_lanes_are_the_server_s(tmp_path: Path) -> None:
    for lane, place in (("whole", (0, 1)), ("key:Name", (1, 2))):
        saved(tmp_path / lane, lane, place)
        state = ShardState(EngineOptions(), directory=tmp_path / lane)
        state.load(5, place)
        assert state.loaded is not None and list(state.loaded) == [lane]


@pytest.mark.parametrize(
    ("lane", "place"), [("key:Name", (0, 1)), ("global", (0, 1)), ("whole", (0, 2))]
)
def test_a_snapshot_of_lanes_another_server_layout_runs_is_refused(
    tmp_path: Path, lane: str, place: tuple[int, int]
) -> None:
    """One shard runs the one lane ``whole``; a snapshot of an older cesar, which ran a lane
    per key and a global one there, is refused (the start replays the log instead)."""
    saved(tmp_path, lane, place)
    state = ShardState(EngineOptions(), directory=tmp_path)
    with pytest.raises(SnapshotError, match=rf"its lanes \['{lane}'\] are not those of a server"):
        state.load(5, place)
    assert state.loaded is None and not state.lanes
