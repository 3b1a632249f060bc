"""The front's routed pieces: lanes in Arrow as the registry routes each event, rows in blocks
of one stream and one t1, in order."""

import numpy as np
import pyarrow as pa

from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.front import pieces
from cesar.server.front import registry as registry_module
from cesar.server.front.pieces import Rows, blocks, destinations, front_destinations, lane_table
from cesar.server.front.registry import Registry
from cesar.server.wire.arrowevents import check, column, events_of
from tests.unit.test_registry import GLOBAL, KEYED, STOCK, register
from tests.unit.test_registry import registry as registry


def stock_table(events: list[Event]) -> pa.Table:
    columns = {name: [getattr(e, name) for e in events] for name in ("stream", "t0", "t1")}
    for name in ("Name", "Price", "Volume"):
        columns[column("Stock", name)] = [e.attrs()[name] for e in events]
    return pa.table(columns)


def quotes(rows: list[tuple[int, str, float, int]]) -> list[Event]:
    return [
        Event.of("Stock", t, t, {"Name": name, "Price": price, "Volume": volume})
        for t, name, price, volume in rows
    ]


EVENTS = quotes([(0, "IBM", 20.0, 5), (1, "AAPL", 600.0, 5000), (2, "MSFT", 5.0, 1)])
EVENTS += quotes([(3, "IBM", 700.0, 10), (3, "AAPL", 900.0, 2000), (3, "HP", 1.0, 1)])


def pairs_of(routes: pieces.Routes, row: int) -> set[tuple[int, str]]:
    return {destination for destination, positions in routes.items() if row in positions}


def test_lanes_of_a_piece_hold_the_registry_s_for_each_event(registry: Registry) -> None:
    """Key lanes exactly; the global lane of a shard running global subscriptions gets every
    row the feed routed there (the feed filtered by interest; what no conjunct admits is
    harmless), so it holds at least what the registry's interest index gives."""
    register(registry, "s1", KEYED)
    register(registry, "s2", GLOBAL)
    register(registry, "s3", GLOBAL, owner="bob")
    table = check(stock_table(EVENTS), registry.schemas).table
    for shard in (0, 1):
        routes = destinations(table, registry.routing, shard)
        for row, event in enumerate(EVENTS):
            pairs = pairs_of(routes, row)
            exact = set(registry.destinations(event, shard))
            assert {p for p in pairs if p[1] != "global"} == {p for p in exact if p[1] != "global"}
            assert exact <= pairs and (shard, "global") in pairs


def test_the_front_routes_each_row_of_a_table_as_the_registry_routes_its_event(
    registry: Registry,
) -> None:
    """Key lanes on the key's shard and global lanes where the static interest admits the
    row: for every row exactly the registry's pairs for its event."""
    register(registry, "s1", KEYED)
    register(registry, "s2", GLOBAL)
    register(registry, "s3", GLOBAL, owner="bob")
    table = check(stock_table(EVENTS), registry.schemas).table
    routes = front_destinations(table, registry)
    assert registry.interest_masks("Stock") is not None  # in Arrow
    for row, event in enumerate(EVENTS):
        assert pairs_of(routes, row) == set(registry.destinations(event, None))
    assert all(list(p) == sorted(p) for p in routes.values())


def test_global_interest_in_arrow_or_row_by_row_routes_as_the_registry(
    registry: Registry,
) -> None:
    """Equalities of Name with strings in one ``is_in`` (six subscriptions, two shards),
    then past ``ARROW_INTEREST_FILTERS`` filters a shard (row by row): each row goes to the
    global lanes the registry's interest index names, in both; a subscription that comes
    or goes changes the compiled interest."""
    names = ["IBM", "AAPL", "MSFT", "HP", "IBM", "GOOG"]
    for n, name in enumerate(names):
        other = names[n - 1]
        text = (
            f"FILTER{{Name = '{name}'}} Stock NEXT{{$2.Name = '{other}' AND $2.Volume > 1}} Stock"
        )
        register(registry, f"s{n}", text)
    table = check(stock_table(EVENTS), registry.schemas).table

    def same_as_registry() -> None:
        routes = front_destinations(table, registry)
        for row, event in enumerate(EVENTS):
            assert pairs_of(routes, row) == set(registry.destinations(event, None)), row

    assert registry.interest_masks("Stock") is not None
    same_as_registry()
    registry.unregister(registry.live["s1"])  # AAPL's: its rows go nowhere now
    same_as_registry()
    for n in range(2 * registry_module.ARROW_INTEREST_FILTERS + 1):
        register(registry, f"p{n}", f"FILTER{{Price > {n}.5}} Stock NEXT{{$2.Volume > {n}}} Stock")
    assert registry.interest_masks("Stock") is None  # row by row
    same_as_registry()


def test_blocks_hold_one_stream_and_one_t1_each_in_the_table_s_order() -> None:
    """Rows of a destination split where t1 or the stream changes; the blocks come in the
    order of their first rows; rows no destination takes come in blocks with none."""
    table = pa.table(
        {
            "stream": ["S", "S", "T", "S", "S", "S"],
            "t0": [1, 1, 1, 1, 2, 2],
            "t1": [1, 1, 1, 1, 2, 2],
            "S/k": ["a", "b", None, "d", "e", "f"],
        }
    )
    routes = {(0, "global"): np.array([0, 1, 2, 3, 5]), (1, "k"): np.array([1, 4])}
    got = [(r.stream, r.t1, r.positions.tolist(), pairs) for r, pairs in blocks(table, routes)]
    assert got == [
        ("S", 1, [0, 1], [(0, "global")]),
        ("S", 1, [1], [(1, "k")]),
        ("T", 1, [2], [(0, "global")]),
        ("S", 1, [3], [(0, "global")]),
        ("S", 2, [4], [(1, "k")]),
        ("S", 2, [5], [(0, "global")]),
    ]
    nowhere = blocks(table, {(0, "global"): np.array([0])})
    assert [(r.positions.tolist(), pairs) for r, pairs in nowhere] == [
        ([0], [(0, "global")]),
        ([1], []),
        ([2], []),
        ([3], []),
        ([4, 5], []),
    ]
    assert blocks(table.slice(0, 0), {}) == []


def test_destinations_taking_the_same_rows_share_their_blocks() -> None:
    """A shard's key lane and global lane taking every row get one block each run of rows, with
    both pairs (the front encodes it once for the shard, which decodes it once); a destination
    taking other rows keeps blocks of its own."""
    table = pa.table(
        {"stream": ["S"] * 4, "t0": [1, 1, 2, 2], "t1": [1, 1, 2, 2], "S/k": ["a", "b", "c", "d"]}
    )
    every = np.arange(4)
    routes = {(0, "k"): every, (1, "k"): np.array([1, 2]), (0, "global"): every.copy()}
    got = [(r.positions.tolist(), pairs) for r, pairs in blocks(table, routes)]
    assert got == [
        ([0, 1], [(0, "k"), (0, "global")]),
        ([1], [(1, "k")]),
        ([2, 3], [(0, "k"), (0, "global")]),
        ([2], [(1, "k")]),
    ]


def test_an_epoch_bigger_than_a_block_passes_in_several(monkeypatch) -> None:
    """A block holds about BLOCK_BYTES of rows at most, so an epoch's rows can still be cut
    into requests; the blocks keep the rows' order."""
    events = quotes([(1, f"N{i}", 1.0, i) for i in range(10)] + [(2, "N0", 1.0, 0)])
    table = check(stock_table(events), {"Stock": parse_stream_spec(STOCK)}).table
    monkeypatch.setattr(pieces, "BLOCK_BYTES", -(-4 * table.nbytes // table.num_rows))
    found = blocks(table, {(0, "global"): np.arange(11)})
    sizes = [len(rows.positions) for rows, _ in found]
    assert sizes == [4, 4, 2, 1] and [rows.t1 for rows, _ in found] == [1, 1, 1, 2]
    assert events_of(lane_table([rows for rows, _ in found])) == events


def test_a_lane_table_takes_rows_of_several_pieces_in_the_order_given() -> None:
    first = quotes([(1, "A", 1.0, 1), (3, "A", 1.0, 3)])
    second = quotes([(2, "B", 2.0, 2)])
    schemas = {"Stock": parse_stream_spec(STOCK)}
    a = check(stock_table(first), schemas).table
    b = check(stock_table(second), schemas).table
    one = Rows("Stock", 1, a, np.array([0]))
    two = Rows("Stock", 2, b, np.array([0]))
    three = Rows("Stock", 3, a, np.array([1]))
    assert events_of(lane_table([one, two, three])) == [first[0], second[0], first[1]]
    assert [e for r in (one, three, two) for e in r.events()] == [*first, *second]
