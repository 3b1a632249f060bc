"""The pattern oracle (automata/pattern/reference.py) on hand-checked streams.

Each expected result is worked out by hand in the docstring, from the papers'
definitions as docs/patterns.md states them.
"""

from collections.abc import Mapping, Sequence

import pytest

from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.schema import Event, StreamSchema, Value, parse_stream_spec

SCHEMAS = {
    name: parse_stream_spec(spec)
    for name, spec in {
        "Stock": "Stock(symbol:string,price:float,volume:int)[min]",
        "A": "A(id:int,x:int)",
        "B": "B(id:int,x:int)",
        "C": "C(id:int,x:int)",
        "Note": "Note(id:int,x:string)",
        "Alert": "Alert(site:string)",
        "Shipment": "Shipment(src:string,dst:string)",
    }.items()
}


def run(
    text: str, events: Sequence[Event], schemas: Mapping[str, StreamSchema] = SCHEMAS
) -> list[tuple[int, int, dict[str, Value]]]:
    pattern = resolve(parse_pattern(text), schemas, "out")
    streams: dict[str, list[Event]] = {}
    for event in events:
        streams.setdefault(event.stream, []).append(event)
    return sorted((e.t0, e.t1, e.attrs()) for e in evaluate(pattern, streams))


def ev(stream: str, t: int, **values: Value) -> Event:
    return Event.of(stream, t, t, values)


QUERY_3 = """PATTERN SEQ(Stock+ a[ ], Stock b)
WHERE    skip_till_next_match(a[ ], b) {
                    [symbol]
       and       a[1].volume > 1000
       and       a[i].price > avg(a[..i-1].price)
       and       b.volume < 80%*a[a.LEN].volume }
WITHIN    1 hour
RETURN a[1].price AS first, a.LEN, b.volume"""

FIGURE_3 = [
    ev("Stock", t, symbol="IBM", price=float(p), volume=v)
    for t, (p, v) in enumerate(
        zip(
            (100, 120, 120, 121, 120, 125, 120, 120),
            (1010, 990, 1005, 999, 999, 750, 950, 700),
            strict=True,
        ),
        1,
    )
]


def test_sase_plus_query_3_gives_figure_3s_matches():
    """R1 = [e1..e5] e6 and R2 = [e3 e4] e6 after e6, R3 = [e1..e7] e8 after e8.

    The run [e1..e4] does not match e6: e5 is a take event for it (120 >
    avg 115.25), and skip till next match may not ignore it.  [e3] dies at e4
    the same way; [e3 e4] ignores e5 (120 < 120.5) and proceeds with e6.
    """
    assert run(QUERY_3, FIGURE_3) == [
        (1, 6, {"first": 100.0, "a_len": 5, "b_volume": 750}),
        (1, 8, {"first": 100.0, "a_len": 7, "b_volume": 700}),
        (3, 6, {"first": 120.0, "a_len": 2, "b_volume": 750}),
    ]


def test_query_3_keeps_partitions_apart_and_honours_the_window():
    """Another symbol's quotes between IBM's change nothing; with WITHIN 5 R3 is gone."""
    mixed = [*FIGURE_3, *(ev("Stock", t, symbol="HPQ", price=1.0, volume=5) for t in range(1, 9))]
    assert [m[:2] for m in run(QUERY_3, mixed)] == [(1, 6), (1, 8), (3, 6)]
    short = QUERY_3.replace("1 hour", "5")
    assert [m[:2] for m in run(short, FIGURE_3)] == [(1, 6), (3, 6)]


STRATEGY_STREAM = [ev("A", 1, id=1, x=0), ev("A", 2, id=2, x=0), ev("B", 3, id=1, x=0)]


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        # Any: both As pair with b.  Next: each A skips to the next B.
        ("skip_till_any_match", [(1, 3), (2, 3)]),
        ("skip_till_next_match", [(1, 3), (2, 3)]),
        # Strict: a1's run sees a2 next and dies; a2's run sees b next.
        ("strict_contiguity", [(2, 3)]),
    ],
)
def test_the_strategies_choose_between_relevant_events(strategy, expected):
    text = f"PATTERN SEQ(A a, B b) WHERE {strategy}(a, b) {{ TRUE }}"
    assert [m[:2] for m in run(text, STRATEGY_STREAM)] == expected


def test_partition_contiguity_skips_other_partitions_only():
    """[id]: a1 (id 1) skips a2 (id 2) and pairs with b (id 1); strict would not."""
    partition = "PATTERN SEQ(A a, B b) WHERE partition_contiguity(a, b) { [id] }"
    assert [m[:2] for m in run(partition, STRATEGY_STREAM)] == [(1, 3)]
    strict = "PATTERN SEQ(A a, B b) WHERE strict_contiguity(a, b) { [id] }"
    assert run(strict, STRATEGY_STREAM) == []
    same = [ev("A", 1, id=1, x=0), ev("A", 2, id=1, x=0), ev("B", 3, id=1, x=0)]
    assert [m[:2] for m in run(partition, same)] == [(2, 3)]


def test_skip_till_next_match_takes_only_the_next_relevant_event():
    """a1, b(x=1), b(x=2): next match pairs a1 with the first b only; any match with both."""
    stream = [ev("A", 1, id=1, x=0), ev("B", 2, id=1, x=1), ev("B", 3, id=1, x=2)]
    nxt = "PATTERN SEQ(A a, B b) WHERE skip_till_next_match(a, b) { [id] } RETURN b.x"
    assert [m[2]["b_x"] for m in run(nxt, stream)] == [1]
    anything = nxt.replace("skip_till_next_match", "skip_till_any_match")
    assert [m[2]["b_x"] for m in run(anything, stream)] == [1, 2]


SHIPMENTS = [
    ev("Alert", 1, site="X"),
    ev("Shipment", 2, src="X", dst="Y"),
    ev("Shipment", 3, src="X", dst="W"),
    ev("Shipment", 4, src="Y", dst="Z"),
]
QUERY_2 = """PATTERN SEQ(Alert a, Shipment+ b[ ])
WHERE skip_till_any_match(a, b[ ]) { b[1].src = a.site and b[i].src = b[i-1].dst }
WITHIN 3 RETURN b.LEN, b[b.LEN].dst AS reached"""


def test_sase_plus_query_2_follows_every_shipment_under_any_match():
    """X→Y, X→W and X→Y→Z: any match forks at each relevant shipment."""
    assert [m[2]["reached"] for m in run(QUERY_2, SHIPMENTS)] == ["Y", "W", "Z"]


def test_query_2_under_next_match_commits_to_the_first_shipment():
    """The alert's run must begin with X→Y (it may not ignore it), so X→W never begins."""
    text = QUERY_2.replace("skip_till_any_match", "skip_till_next_match")
    assert [m[2]["reached"] for m in run(text, SHIPMENTS)] == ["Y", "Z"]


NEGATION = "PATTERN SEQ(A a, !(C c), B b) WHERE skip_till_next_match(a, c, b) { [id] }"


@pytest.mark.parametrize(
    ("c", "kept"),
    [
        (ev("C", 2, id=1, x=0), False),  # strictly between, same id: the match goes
        (ev("C", 2, id=2, x=0), True),  # another id: no effect
        (ev("C", 3, id=1, x=0), True),  # simultaneous with b: not between
        (ev("C", 1, id=1, x=0), True),  # simultaneous with a: not between
    ],
)
def test_a_negation_drops_matches_with_its_event_strictly_between(c, kept):
    stream = [ev("A", 1, id=1, x=0), c, ev("B", 3, id=1, x=0)]
    assert len(run(NEGATION, stream)) == (1 if kept else 0)


def test_a_trailing_negation_waits_for_the_window_to_close():
    """SEQ(A a, !(C c)) WITHIN 5 over a at 1: a C at 4 drops it; one at 7 does not.

    The match is known once an epoch at or after 1 + 5 has been processed, and ends at 6.
    """
    text = "PATTERN SEQ(A a, !(C c)) WHERE [id] WITHIN 5 RETURN a.id"
    a = ev("A", 1, id=1, x=0)
    assert run(text, [a, ev("C", 4, id=1, x=0), ev("C", 9, id=1, x=0)]) == []
    assert run(text, [a, ev("C", 7, id=1, x=0)]) == [(1, 6, {"a_id": 1})]
    assert run(text, [a, ev("C", 6, id=1, x=0)]) == [], "6 is in the window"
    assert run(text, [a, ev("C", 6, id=2, x=0)]) == [(1, 6, {"a_id": 1})]
    assert run(text, [a, ev("C", 5, id=2, x=0)]) == [], "no epoch at 6 or later yet: not known"


def test_a_leading_negation_looks_back_over_the_window():
    """WITHIN 3 before a at 5 covers 2 .. 5: a C at 2 drops the match, one at 1 does not."""
    text = "PATTERN SEQ(!(C c), A a) WHERE [id] WITHIN 3 RETURN a.id"
    a = ev("A", 5, id=1, x=0)
    assert run(text, [ev("C", 1, id=1, x=0), a]) == [(5, 5, {"a_id": 1})]
    assert run(text, [ev("C", 2, id=1, x=0), a]) == []


def test_and_matches_in_any_order_including_simultaneous_events():
    """Two stocks drop in the same minute: AND with a window of 0."""
    text = """PATTERN AND(Stock a, Stock b)
    WHERE a.symbol < b.symbol AND a.price < 10 AND b.price < 10 WITHIN 0
    RETURN a.symbol, b.symbol"""
    stream = [
        ev("Stock", 1, symbol="IBM", price=5.0, volume=1),
        ev("Stock", 1, symbol="HPQ", price=6.0, volume=1),
        ev("Stock", 2, symbol="AAPL", price=7.0, volume=1),
    ]
    assert run(text, stream) == [(1, 1, {"a_symbol": "HPQ", "b_symbol": "IBM"})]


def test_any_reads_an_absent_attribute_as_true():
    """ANY(A, Alert) x: x.id = 1 holds for an Alert, which has no id (SASE §2.2.2)."""
    text = "PATTERN SEQ(ANY(A, Alert) x) WHERE x.id = 1"
    stream = [ev("A", 1, id=1, x=0), ev("A", 2, id=2, x=0), ev("Alert", 3, site="S")]
    assert [m[:2] for m in run(text, stream)] == [(1, 1), (3, 3)]


def test_kleene_closure_as_last_component_reports_every_prefix():
    """Rising x at 1, 2, 3: runs from each event, a match at each; a.LEN >= 2 keeps three."""
    stream = [ev("A", t, id=1, x=t) for t in (1, 2, 3)]
    text = "PATTERN SEQ(A+ a[]) WHERE skip_till_next_match(a[]) { a[i].x > a[i-1].x }"
    found = [(t0, t1, m["a_len"]) for t0, t1, m in run(text, stream)]
    assert found == [(1, 1, 1), (1, 2, 2), (1, 3, 3), (2, 2, 1), (2, 3, 2), (3, 3, 1)]
    longer = text.replace("}", "AND a.LEN >= 2 }")
    assert [(t0, t1) for t0, t1, _ in run(longer, stream)] == [(1, 2), (1, 3), (2, 3)]
