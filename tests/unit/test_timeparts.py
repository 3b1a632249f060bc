"""Functions of an event's time in its stream's zone (automata/windows.py ``TimePart``) and the
zone of a stream spec (automata/schema.py)."""

from __future__ import annotations

import datetime
import json
import re
from collections import Counter

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import Event, SchemaError, parse_stream_spec
from cesar.server.engine.engine import Engine
from cesar.server.engine.workload import Workload
from cesar.server.wire.eventfile import event_json

NEW_YORK = parse_stream_spec("Stock(Name:string,Price:float)[min, America/New_York]")
UTC = parse_stream_spec("Stock(Name:string,Price:float)[min]")


def minute(iso: str) -> int:
    return int(datetime.datetime.fromisoformat(iso).timestamp()) // 60


def parts(schema, when: str) -> dict:
    text = (
        "SELECT HOUR(t1) AS h, MINUTE(t1) AS mi, MINUTE_OF_DAY(t1) AS md, DAY_OF_WEEK(t1) AS w, "
        "DAY_OF_MONTH(t1) AS d, MONTH(t1) AS mo, YEAR(t1) AS y, DATE(t1) AS day, "
        "HOUR(t0) AS h0 FROM Stock PUBLISH P"
    )
    engine = Engine()
    engine.subscribe("p", compile_query(text, {"Stock": schema}).automata)
    t = minute(when)
    (out,) = engine.process([Event.of("Stock", t - 90, t, {"Name": "X", "Price": 1.0})])
    engine.check_valid()
    return out.attrs()


def test_times_read_in_the_streams_zone_across_daylight_saving():
    """9:30 in New York is 13:30 UTC in summer time and 14:30 after it ends (2020-11-01)."""
    before = parts(NEW_YORK, "2020-10-30T13:30:00+00:00")
    after = parts(NEW_YORK, "2020-11-02T14:30:00+00:00")
    assert (before["h"], before["mi"], before["md"], before["w"]) == (9, 30, 570, 5)
    assert (after["h"], after["mi"], after["md"], after["w"]) == (9, 30, 570, 1)
    assert (after["d"], after["mo"], after["y"], after["day"]) == (2, 11, 2020, "2020-11-02")
    assert after["h0"] == 8  # t0 is 90 minutes before t1
    assert parts(UTC, "2020-11-02T14:30:00+00:00")["h"] == 14


def test_the_new_year_in_new_york_is_still_the_old_one_in_utc_minus_five():
    at = parts(NEW_YORK, "2021-01-01T03:00:00+00:00")
    assert (at["y"], at["day"], at["w"]) == (2020, "2020-12-31", 4)


def test_a_stream_spec_carries_its_zone_and_prints_it():
    assert NEW_YORK.spec() == "Stock(Name:string,Price:float)[min, America/New_York]"
    assert parse_stream_spec(NEW_YORK.spec()) == NEW_YORK
    assert UTC.zone == "UTC" and UTC.spec().endswith("[min]")


def test_what_a_query_publishes_keeps_its_streams_zone_and_alerts_show_it():
    query = compile_query("FILTER{Price > 1} Stock PUBLISH Up", {"Stock": NEW_YORK})
    assert query.output.zone == "America/New_York"
    event = Event.of(
        "Up",
        minute("2020-10-26T13:31:00+00:00"),
        minute("2020-10-26T13:33:00+00:00"),
        {"Name": "X", "Price": 2.0},
    )
    assert json.loads(event_json(event, query.output))["time"] == (
        "2020-10-26T09:31-04:00/2020-10-26T09:33-04:00"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("S(a:int)[min, Mars/Olympus]", "unknown time zone"),
        ("S(a:int)[min, /etc/passwd]", "unknown time zone"),
        ("S(a:int)[tick, UTC]", "needs a time unit"),
        ("S(a:int)[day, America/New_York]", "finer than a day"),
    ],
)
def test_a_bad_zone_is_refused(spec, message):
    with pytest.raises(SchemaError, match=message):
        parse_stream_spec(spec)


@pytest.mark.parametrize(
    ("text", "schema", "message"),
    [
        ("FILTER{HOUR(Price) > 9} Stock", NEW_YORK, r"expected HOUR\(t1\) or HOUR\(t0\)"),
        ("FILTER{HOUR(t1, t0) > 9} Stock", NEW_YORK, r"expected HOUR\(t1\)"),
        ("FILTER{HOUR(t1) > 9} Stock", parse_stream_spec("Stock(Name:string)"), "time unit"),
        ("FILTER{DATE(t1) > 9} Stock", NEW_YORK, "cannot compare string"),
    ],
)
def test_a_malformed_time_function_names_its_place(text, schema, message):
    with pytest.raises(CelSemanticError, match=message) as raised:
        compile_query(text, {"Stock": schema}, "x")
    assert raised.value.column > 1


def test_market_hours_in_a_pattern_on_every_path():
    """Rises within the first hour of New York trading, a pattern reading its events' times."""
    text = (
        "PATTERN SEQ(Stock a, Stock b) WHERE [Name] AND b.Price > a.Price AND "
        "MINUTE_OF_DAY(a.t1) >= 570 AND MINUTE_OF_DAY(b.t1) < 630 WITHIN 5 MIN "
        "RETURN a.Name AS Name, HOUR(b.t1) AS h PUBLISH Rises"
    )
    start = minute("2020-11-02T14:25:00+00:00")  # 9:25 New York
    events = [
        Event.of("Stock", start + i, start + i, {"Name": "X", "Price": float(i % 7)})
        for i in range(0, 80)
    ]
    workload = Workload.build([NEW_YORK], [("r", text)])
    expected = Counter(workload.run(events))
    assert expected and {e.value("h") for e in expected} == {9, 10}
    for mode in ("automaton", "engine", "naive", "planned"):
        assert Counter(workload.run(events, engine=mode)) == expected


def test_a_time_outside_the_years_1_to_9999_reads_as_minus_one_on_every_path():
    """Ticks reach far past the calendar: the functions give -1 (DATE '') instead of failing."""
    text = "SELECT HOUR(t1) AS h, DATE(t1) AS d, YEAR(t0) AS y FROM Stock PUBLISH Far"
    events = [
        Event.of("Stock", -(2**62), t, {"Name": "X", "Price": 1.0}) for t in (10**12, 2**63 - 1)
    ]
    workload = Workload.build([NEW_YORK], [("f", text)])
    expected = workload.run(events)
    assert [e.attrs() for e in expected] == [{"h": -1, "d": "", "y": -1}] * 2
    for mode in ("automaton", "engine"):
        assert workload.run(events, engine=mode) == expected


def test_tumbling_days_start_at_the_streams_midnight_or_at_an_offset_on_every_path():
    """A day's first quote in New York (not at 20:00, UTC midnight); with 570 MIN, its first
    quote of the session from 9:30 on."""
    text = (
        "SELECT Name, HOUR(t1) AS h, MINUTE(t1) AS m FROM FILTER{COUNT_TUMBLING(1 DAY, Name) = 1"
        " OR COUNT_TUMBLING(1 DAY, 570 MIN, Name) = 1} Stock PUBLISH First"
    )
    start = minute("2020-11-02T19:00:00+00:00")  # 14:00 New York, a Monday
    events = [
        Event.of("Stock", start + i, start + i, {"Name": "X", "Price": 1.0})
        for i in range(0, 2 * 1440, 30)
    ]
    workload = Workload.build([NEW_YORK], [("f", text)])
    expected = workload.run(events)
    assert [(e.value("h"), e.value("m")) for e in expected] == [
        *((14, 0), (0, 0), (9, 30), (0, 0), (9, 30))
    ]
    for mode in ("automaton", "engine", "naive"):
        assert workload.run(events, engine=mode) == expected


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("COUNT_OVER(1 DAY, 9 HOURS, Name)", "an offset is for tumbling windows"),
        ("COUNT_TUMBLING(1 HOUR, 60 MIN, Name)", "the offset (60 ticks) is less than the window"),
    ],
)
def test_a_bad_offset_is_refused_at_its_call(call, message):
    with pytest.raises(CelSemanticError, match=re.escape(message)):
        compile_query(f"FILTER{{{call} = 1}} Stock", {"Stock": NEW_YORK})


def test_a_bucket_the_clock_goes_back_into_starts_again_on_every_path():
    """01:00-02:00 comes twice on 2020-11-01 in New York: 45-minute buckets on its clock put
    01:10 EDT and 01:10 EST in one bucket, with 01:40 EDT (the next bucket) between them. As
    the engine keeps one bucket at a time, the bucket starts again at its second coming."""
    text = "SELECT k, COUNT_TUMBLING(45, 0, k) AS n FROM Z PUBLISH N"
    zoned = parse_stream_spec("Z(k:string)[min, America/New_York]")
    times = ["2020-11-01T05:10:00+00:00", "2020-11-01T05:40:00+00:00", "2020-11-01T06:10:00+00:00"]
    events = [Event.of("Z", minute(t), minute(t), {"k": "a"}) for t in times]
    workload = Workload.build([zoned], [("n", text)])
    expected = workload.run(events)
    assert [e.value("n") for e in expected] == [1, 1, 1]
    for mode in ("automaton", "engine"):
        assert workload.run(events, engine=mode) == expected
