"""The front's routed pieces: lanes in Arrow as the registry routes each event, rows in order."""

import pyarrow as pa

from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.front.pieces import destinations, lane_table, rows_of
from cesar.server.front.registry import Registry
from cesar.server.wire.arrowevents import check, column, events_of
from tests.unit.test_registry import GLOBAL, KEYED, STOCK, register
from tests.unit.test_registry import registry as registry


def stock_table(events: list[Event]) -> pa.Table:
    columns = {name: [getattr(e, name) for e in events] for name in ("stream", "t0", "t1")}
    for name in ("Name", "Price", "Volume"):
        columns[column("Stock", name)] = [e.attrs()[name] for e in events]
    return pa.table(columns)


def test_lanes_of_a_piece_hold_the_registry_s_for_each_event(registry: Registry) -> None:
    """Key lanes exactly; the global lane of a shard running global subscriptions gets every
    row the feed routed there (the feed filtered by interest; what no conjunct admits is
    harmless), so it holds at least what the registry's interest index gives."""
    register(registry, "s1", KEYED)
    register(registry, "s2", GLOBAL)
    register(registry, "s3", GLOBAL, owner="bob")
    events = [
        Event.of("Stock", t, t, {"Name": name, "Price": price, "Volume": volume})
        for t, (name, price, volume) in enumerate(
            [("IBM", 20.0, 5), ("AAPL", 600.0, 5000), ("MSFT", 5.0, 1), ("IBM", 700.0, 10)]
        )
    ]
    table = check(stock_table(events), registry.schemas).table
    for shard in (0, 1):
        lanes = destinations(table, registry.routing, shard)
        for pairs, event in zip(lanes, events, strict=True):
            exact = registry.destinations(event, shard)
            assert [p for p in pairs if p[1] != "global"] == [p for p in exact if p[1] != "global"]
            assert set(exact) <= set(pairs) and (shard, "global") in pairs


def test_a_lane_table_takes_rows_of_several_pieces_in_the_order_given() -> None:
    first = [Event.of("Stock", t, t, {"Name": "A", "Price": 1.0, "Volume": t}) for t in (1, 3)]
    second = [Event.of("Stock", 2, 2, {"Name": "B", "Price": 2.0, "Volume": 2})]
    schemas = {"Stock": parse_stream_spec(STOCK)}
    a = rows_of(check(stock_table(first), schemas).table)
    b = rows_of(check(stock_table(second), schemas).table)
    assert events_of(lane_table([a[0], b[0], a[1]])) == [first[0], second[0], first[1]]
    assert [row.event() for row in (*a, *b)] == [*first, *second]
