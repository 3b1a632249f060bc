"""The front's registry and placement policy, without processes: tallies, routes, lanes."""

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event
from cesar.server.front.auth import Client, Limits
from cesar.server.front.catalog import StreamRow, SubscriptionRow
from cesar.server.front.errors import FailedPrecondition
from cesar.server.front.placement import place
from cesar.server.front.registry import Live, Registry

STOCK = "Stock(Name:string,Price:float,Volume:int)[min]"
KEYED = "FILTER{Price > 10} Stock NEXT{$1.Name = $2.Name} Stock"
GLOBAL = "FILTER{Price > 500} Stock NEXT{$2.Volume > 1000 AND $2.Price > $1.Price} Stock"


def register(registry: Registry, sub_id: str, text: str, owner: str = "alice") -> Live:
    query = compile_query(text, registry.schemas, sub_id)
    key, shard = place(query, registry)
    row = SubscriptionRow(
        id=sub_id, owner=owner, query=text, name=sub_id, stream=query.name,
        output_spec=query.output.spec(), key_attribute=key or "", shard=shard,
        created_ms=0, position=0, last_seq=0, algebra=b"",
    )  # fmt: skip
    live = Live(row, query.reads)
    registry.register(live, query)
    registry.check_valid()
    return live


@pytest.fixture
def registry() -> Registry:
    registry = Registry(shards=2)
    registry.add_stream(StreamRow("Stock", STOCK.removesuffix("[min]") + "[min]", "admin", ""))
    return registry


def test_key_partitioned_and_global_subscriptions_are_placed_and_routed(registry):
    keyed = register(registry, "s1", KEYED)
    assert keyed.key == "Name" and keyed.lane.startswith("key:")
    first = register(registry, "s2", GLOBAL)
    second = register(registry, "s3", GLOBAL, owner="bob")
    assert first.key is None and {first.row.shard, second.row.shard} == {0, 1}
    assert registry.owned == {"alice": 2, "bob": 1}
    cheap = Event.of("Stock", 1, 1, {"Name": "IBM", "Price": 20.0, "Volume": 5})
    dear = Event.of("Stock", 1, 1, {"Name": "IBM", "Price": 600.0, "Volume": 5})
    assert [lane for _, lane in registry.destinations(cheap, None)] == [keyed.lane]
    assert sorted(k for k, lane in registry.destinations(dear, None) if lane == "global") == [0, 1]
    assert registry.destinations(dear, 1) == [
        d for d in registry.destinations(dear, None) if d[0] == 1
    ]
    assert set(registry.interest("Stock")) == {0, 1}


def test_readers_pin_their_producer_and_unregister_undoes_everything(registry):
    producer = register(registry, "s1", KEYED + " PUBLISH Pairs")
    reader = register(registry, "s2", "FILTER{Price_1 > 20} Pairs")
    assert reader.key == producer.key  # it runs in its producer's lane
    assert registry.readers_of("Pairs") == ["s2"]
    with pytest.raises(FailedPrecondition, match="must run where the streams it reads"):
        place(compile_query("Pairs NEXT{TRUE} Stock", registry.schemas, "x"), registry)
    registry.unregister(reader)
    registry.unregister(producer)
    registry.check_valid()
    assert not registry.live and set(registry.streams) == {"Stock"} and not +registry.owned


def test_readable_is_a_snapshot_of_what_a_client_may_read(registry):
    limits = Limits(10, 10_000, 2, 10)
    alice, bob = Client("alice", limits), Client("bob", limits)
    admin = Client("root", limits, frozenset({"admin"}))
    register(registry, "s1", KEYED + " PUBLISH Pairs")
    registry.shares["Pairs"] = {"carol"}
    seen = registry.readable(bob)
    assert "Stock" in seen and "Pairs" not in seen and sorted(seen) == ["Stock"]
    with pytest.raises(KeyError):
        seen["Pairs"]
    assert sorted(registry.readable(alice)) == ["Pairs", "Stock"]
    assert registry.readable(admin)["Pairs"] is registry.schemas["Pairs"]
    registry.shares["Pairs"].add("bob")
    register(registry, "s2", GLOBAL + " PUBLISH Later")
    assert "Pairs" not in seen and "Later" not in seen and len(seen) == 1  # taken before
    assert sorted(registry.readable(bob)) == ["Pairs", "Stock"]
