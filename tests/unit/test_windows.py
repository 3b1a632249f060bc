"""Time-window aggregates: the call's forms and errors in both languages
(automata/windows.py), placement, and the engine's shared windows, their limit and their
refusals (server/engine/windowing.py)."""

from __future__ import annotations

import math

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelSemanticError
from cesar.automata.partition import partition_keys
from cesar.automata.schema import Event, parse_stream_spec
from cesar.automata.shape import QueryCache, shape_of
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.workload import Workload

STOCK = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")
S = {"Stock": STOCK}


def quote(t: int, name: str, price: float) -> Event:
    return Event.of("Stock", t, t, {"Name": name, "Price": price, "Volume": 1})


def test_the_average_of_the_last_30_minutes_per_stock():
    q = compile_query(
        "SELECT Name, Price, AVG_OVER(Price, 30 MIN, Name) AS Avg FROM Stock PUBLISH A", S
    )
    engine = Engine()
    engine.subscribe("a", q.automata)
    events = [quote(0, "X", 10.0), quote(10, "Y", 99.0), quote(20, "X", 20.0), quote(30, "X", 30.0)]
    out = engine.run(events)
    assert [e.value("Avg") for e in out if e.value("Name") == "X"] == [10.0, 15.0, 25.0]
    engine.check_valid()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("FILTER{AVG_OVER(30 MIN) > 1} Stock", "expected AVG_OVER.attribute, window"),
        ("FILTER{AVG_OVER(Price, Name) > 1} Stock", "the window is a duration"),
        ("FILTER{AVG_OVER(Price, 0, Name) > 1} Stock", "at least 1"),
        ("FILTER{AVG_OVER(Price * 2, 30 MIN) > 1} Stock", "plain attributes"),
        ("Stock NEXT{AVG_OVER($1.Price, 3, $2.Name) > 1} Stock", "one event's"),
        ("FILTER{AVG_OVER(Name, 3) > 1} Stock", "needs numbers"),
    ],
)
def test_a_malformed_window_names_its_place_and_form(text, expected):
    with pytest.raises(CelSemanticError, match=expected) as raised:
        compile_query(text, S, "x")
    assert raised.value.line == 1 and raised.value.column > 1


def test_a_pattern_reads_windows_of_its_events():
    text = (
        "PATTERN SEQ(Stock a, Stock b) WHERE [Name] AND b.Price > 1.01 * AVG_OVER(b.Price, "
        "30 MIN, b.Name) WITHIN 5 MIN RETURN b.Name AS Name, COUNT_OVER(a.Name, 30 MIN) AS n"
    )
    with pytest.raises(CelSemanticError, match="the window is a duration"):
        compile_query(text, S, "x")
    q = compile_query(
        text.replace("COUNT_OVER(a.Name, 30 MIN)", "COUNT_OVER(30 MIN, a.Name)"), S, "x"
    )
    assert q.output.spec() == "x(Name:string,n:int)[min]"
    assert {w.name for _, w in q.windows} == {
        "AVG_OVER(Price, 30, Name)",
        "COUNT_OVER(30, Name)",
    }


def test_a_window_partitioned_otherwise_keeps_the_query_whole():
    keyed = compile_query(
        "Stock NEXT{$1.Name = $2.Name AND $2.Price > AVG_OVER($2.Price, 5, $2.Name)} Stock", S, "k"
    )
    whole = compile_query(
        "Stock NEXT{$1.Name = $2.Name AND $2.Price > AVG_OVER($2.Price, 5)} Stock", S, "w"
    )
    assert partition_keys(keyed.automata, S) == {"Name"}
    assert partition_keys(whole.automata, S) == frozenset()


def test_subscriptions_share_one_window_until_the_last_reader_goes():
    text = "FILTER{Price > AVG_OVER(Price, 5, Name)} Stock PUBLISH "
    engine = Engine()
    for name in ("a", "b"):
        engine.subscribe(name, compile_query(text + name.upper(), S).automata)
    assert len(engine.windows.states) == 1
    engine.process([quote(1, "X", 1.0)])
    engine.unsubscribe("a")
    assert len(engine.windows.states) == 1
    engine.check_valid()
    engine.unsubscribe("b")
    assert not engine.windows.states
    engine.check_valid()


def test_a_window_over_its_limit_drops_its_oldest_with_one_notice_per_reader():
    engine = Engine(EngineOptions(max_window_events=2))
    engine.subscribe("a", compile_query("FILTER{COUNT_OVER(99, Name) > 5} Stock", S, "c").automata)
    for t in range(1, 5):
        engine.process([quote(t, "X", 1.0)])
    assert [n.subscription for n in engine.notices] == ["a"]
    assert "max_window_events" in engine.notices[0].reason
    assert len(engine.windows.states[next(iter(engine.windows.states))].order) == 2


def test_a_window_over_a_published_stream_is_refused():
    engine = Engine()
    drops = compile_query("FILTER{Price < 1} Stock PUBLISH Drops", S)
    engine.subscribe("d", drops.automata)
    reader = compile_query(
        "FILTER{Price < AVG_OVER(Price, 5)} Drops", {**S, "Drops": drops.output}, "r"
    )
    with pytest.raises(ValueError, match="reads Drops, a stream a query publishes: windows"):
        engine.subscribe("r", reader.automata)


def test_queries_of_one_shape_with_other_windows_keep_their_own():
    """A window in ticks is a literal of the query's shape, but its length is part of its
    attribute's name, not a constant of the automaton: the shape is not parametric, and no
    template binds another length.  (A duration is part of the shape itself.)"""
    cache = QueryCache()
    for minutes in (30, 60, 90, 120):
        text = f"FILTER{{Price > AVG_OVER(Price, {minutes}, Name)}} Stock PUBLISH A{minutes}"
        query = cache.compile(shape_of(text), S)
        assert [w.ticks for _, w in query.windows] == [minutes]
    assert cache.counters["bound"] == 0 and cache.counters["not_parametric"] == 1


def test_sums_past_the_number_range_are_infinite_or_stop_at_the_64_bit_limit():
    """A hostile stream of the largest floats and ints: every path gives the same values, the
    float sum infinite, the average exact, the int sum at the 64-bit limit."""
    text = (
        "SELECT SUM_OVER(Price, 5) AS s, AVG_OVER(Price, 5) AS a, SUM_OVER(Volume, 5) AS v, "
        "AVG_OVER(Volume, 5) AS w FROM Stock PUBLISH Huge"
    )
    big = {"Name": "X", "Price": 1.7e308, "Volume": 2**63 - 1}
    events = [Event.of("Stock", t, t, big) for t in (1, 2)]
    workload = Workload.build([STOCK], [("h", text)])
    expected = workload.run(events)
    assert [e.attrs() for e in expected][-1] == {
        "s": math.inf,
        "a": 1.7e308,
        "v": 2**63 - 1,
        "w": float(2**63 - 1),
    }
    for mode in ("automaton", "engine", "naive"):
        assert workload.run(events, engine=mode) == expected


def test_a_tumbling_window_starts_again_at_each_bucket_per_stock():
    """Buckets of 5 minutes from minute 0: minutes 3 and 4 share one, 5 starts the next."""
    text = (
        "SELECT Name, MAX_TUMBLING(Price, 5 MIN, Name) AS High, COUNT_TUMBLING(5 MIN, Name) AS N,"
        " AVG_TUMBLING(Price, 5 MIN, Name) AS Avg FROM Stock PUBLISH T"
    )
    engine = Engine()
    engine.subscribe("t", compile_query(text, S).automata)
    events = [quote(3, "X", 10.0), quote(4, "Y", 7.0), quote(4, "X", 12.5), quote(5, "X", 1.0)]
    out = [
        (e.value("Name"), e.value("High"), e.value("N"), e.value("Avg")) for e in engine.run(events)
    ]
    assert out == [
        ("X", 10.0, 1, 10.0),
        ("Y", 7.0, 1, 7.0),
        ("X", 12.5, 2, 11.25),
        ("X", 1.0, 1, 1.0),
    ]
    engine.check_valid()
    with pytest.raises(CelSemanticError, match=r"expected COUNT_TUMBLING.window, \[offset, \]key"):
        compile_query("FILTER{COUNT_TUMBLING() > 1} Stock", S)


def test_a_tumbling_window_over_its_limit_drops_its_least_recent_key_with_a_notice():
    engine = Engine(EngineOptions(max_window_events=2))
    text = "FILTER{COUNT_TUMBLING(99, Name) > 5} Stock"
    engine.subscribe("a", compile_query(text, S, "c").automata)
    for t, name in enumerate("XYZX", 1):
        engine.process([quote(t, name, 1.0)])
    assert [n.subscription for n in engine.notices] == ["a"]
    assert "holds more than 2 keys (max_window_events)" in engine.notices[0].reason
    state = engine.windows.states[next(iter(engine.windows.states))]
    assert list(state.partitions) == [("Z",), ("X",)]  # Y went; X started again
    assert state.value(("X",)) == 1
