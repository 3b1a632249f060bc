"""The front's registry and placement policy, without processes: tallies, routes, lanes."""

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event
from cesar.server.front.auth import Client, Limits
from cesar.server.front.catalog import StreamRow, SubscriptionRow
from cesar.server.front.errors import FailedPrecondition
from cesar.server.front.placement import place
from cesar.server.front.registry import Live, Registry
from cesar.server.front.subscribing import SubscribeItem, named_streams
from cesar.v1 import cesar_pb2 as pb

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


def test_a_query_is_compiled_against_the_inputs_and_the_streams_it_names(registry):
    """What a Subscribe sends its compile process: every input stream, and those of the
    client's streams its text names (a pattern's SHELF-READING reads SHELF_READING; an
    algebra's StreamRefs), not every stream the client owns (it was all of them, pickled
    for each Subscribe: 10,000 subscriptions of 50 clients went at 31 a second)."""
    alice = Client("alice", Limits(10, 10_000, 2, 10))
    for n in range(30):
        register(registry, f"s{n}", f"FILTER{{Price > {n}}} Stock PUBLISH Mine_{n}")
    register(registry, "s99", "FILTER{Price > 1} Stock PUBLISH SHELF_READING")
    seen = registry.readable(alice)
    texts = ["FILTER{Price_1 > 2} Mine_7 NEXT{TRUE} Nowhere", "EVENT SEQ(SHELF-READING x)"]
    assert sorted(seen.named(named_streams(texts))) == ["Mine_7", "SHELF_READING", "Stock"]
    algebra = pb.Algebra(select=pb.SelectOp(input=pb.Algebra(stream=pb.StreamRef(name="Mine_3"))))
    item = SubscribeItem("", "", algebra)
    assert sorted(seen.named(named_streams([item]))) == ["Mine_3", "Stock"]
    bob = Client("bob", Limits(10, 10_000, 2, 10))
    assert sorted(registry.readable(bob).named(named_streams(texts))) == ["Stock"]
