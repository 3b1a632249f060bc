"""Run state as data (server/engine/snapshot.py): shared partial matches saved once, restored
into a program whose slots are numbered differently."""

import pickle
from collections import Counter

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.engine.engine import Engine
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore

SCHEMAS = {"S": parse_stream_spec("S(v:int)")}
QUERIES = {
    "s1": "FILTER{v > 1} S NEXT{$1.v = $2.v} S",
    "s2": "FILTER{v > 2} S NEXT{$1.v = $2.v} S",
    "s3": "FILTER{v > 3} S NEXT{$1.v = $2.v} S",
}


def engine_of(order: list[str], saved: RunSnapshot | None = None) -> Engine:
    engine = Engine()
    if saved is not None:
        prepare(engine, saved)
    for name in order:
        automata = compile_query(QUERIES[name], SCHEMAS, name).automata
        engine.subscribe(name, automata, since=None if saved is None else saved.since[name])
    if saved is not None:
        restore(engine, saved)
    return engine


def test_a_shared_partial_match_is_saved_once_and_finds_its_members_in_new_slots() -> None:
    first = engine_of(["s1", "s2", "s3"])
    first.process([Event.of("S", 1, 1, {"v": 5})])
    saved = capture(first)
    assert len(saved.instances) == 1  # one instance for the three subscriptions
    (table,) = saved.nodes.values()
    assert sorted(member[0] for member in table.values()) == ["s1", "s2", "s3"]
    saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(saved.to_data())))
    again = engine_of(["s3", "s1"], saved)  # s2 gone, s3 and s1 on other slots
    slots = {name: again.program.placement(name, 0)[1] for name in ("s1", "s3")}  # type: ignore[index]
    before = {name: first.program.placement(name, 0)[1] for name in ("s1", "s3")}  # type: ignore[index]
    assert slots != before
    again.check_valid()
    out = again.process([Event.of("S", 2, 2, {"v": 5})])
    assert Counter(event.stream for event in out) == {"s1": 1, "s3": 1}


def test_the_events_a_negation_looks_back_at_survive_a_restart() -> None:
    """A busy quote at 1 spoils the rise from 2 to 3 (no busy quote of the stock may come in
    the three ticks before its end), not the one from 3 to 6; an engine restored from a
    snapshot taken at 1 remembers it too (without it the rise at 3 is published)."""
    stock = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)")
    text = (
        "PATTERN SEQ(!(Stock n), Stock a, Stock b) WHERE skip_till_next_match(a, b) { "
        "[Name] AND n.Volume > 100 AND b.Price > a.Price } WITHIN 3 PUBLISH Quiet"
    )
    automata = compile_query(text, {"Stock": stock}, "q").automata

    def quote(t: int, price: float, volume: int) -> Event:
        return Event.of("Stock", t, t, {"Name": "A", "Price": price, "Volume": volume})

    engine = Engine()
    engine.subscribe("q", automata)
    assert engine.process([quote(1, 9.0, 500)]) == []
    saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(capture(engine).to_data())))
    assert [t1 for _, t1, _ in saved.remembered["Stock"]] == [1]
    restarted = Engine()
    prepare(restarted, saved)
    restarted.subscribe("q", automata, since=saved.since["q"])
    restore(restarted, saved)
    restarted.check_valid()
    for running in (engine, restarted):
        assert running.process([quote(2, 1.0, 1)]) == []
        assert running.process([quote(3, 2.0, 1)]) == []  # spoiled by the quote at 1
        assert [e.t1 for e in running.process([quote(6, 3.0, 1)])] == [6]  # 1 is out of reach
