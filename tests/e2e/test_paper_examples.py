"""The worked examples of the Cayuga paper, written in CEL and run through ``cesar run``."""

from collections import Counter

import pytest

from tests.e2e.conftest import Cesar
from tests.paper import QUERY_7, STOCK_VOL, minutes, table_1_events

STOCK = "Stock(Name:string,Price:float)"


@pytest.fixture(params=["reference", "automaton", "engine", "naive"])
def cesar(request, tmp_path):
    """Every example runs on the reference evaluator, the automata and the engine (two modes)."""
    return Cesar(tmp_path, "--engine", request.param)


def ticks(*quotes):
    """Point events (name, price) at t = 1, 2, ...; a tuple (name, price, t) sets t."""
    out = []
    for index, quote in enumerate(quotes, 1):
        name, price, *t = quote
        time = t[0] if t else index
        out.append({"stream": "Stock", "t0": time, "t1": time, "Name": name, "Price": price})
    return out


def multiset(records):
    return Counter(
        (r["stream"], r["t0"], r["t1"], tuple(sorted(r["attrs"].items()))) for r in records
    )


def test_section_2_3_iteration_rising_prices(cesar):
    """μ over IBM/Dell quotes: the four output events of S[1] ∪ S[2]."""
    events = ticks(("IBM", 10), ("Dell", 22), ("IBM", 19), ("Dell", 24), ("IBM", 22), ("Dell", 22))
    out = cesar.query(
        [STOCK], {"rise": "Stock FOLD{$2.Name = $.Name, $2.Price > $.Price, } Stock"}, events
    )

    def e(n1, p1, n2, p2, t0, t1):
        attrs = {"Name_1": n1, "Price_1": p1, "Name": n2, "Price": p2}
        return {"stream": "rise", "t0": t0, "t1": t1, "attrs": attrs}

    assert multiset(out) == multiset(
        [
            e("IBM", 10.0, "IBM", 19.0, 1, 3),
            e("Dell", 22.0, "Dell", 24.0, 2, 4),
            e("IBM", 19.0, "IBM", 22.0, 3, 5),
            e("IBM", 10.0, "IBM", 22.0, 1, 5),
        ]
    )
    assert list(out[0]["attrs"]) == ["Name_1", "Price_1", "Name", "Price"]


def test_query_7_over_table_1(cesar):
    out = cesar.query([STOCK_VOL], {"q7": QUERY_7}, table_1_events())
    assert out == [
        {
            "stream": "Query7",
            "t0": minutes("9:10"),
            "t1": minutes("9:24"),
            "time": "1970-01-01T09:10Z/1970-01-01T09:24Z",
            "attrs": {"company": "IBM", "maxP": 90.0, "minP": 81.0, "finalP": 91.0},
        }
    ]


def test_query_7_simultaneous_events_of_section_3_1(cesar):
    """e6' at 9:24 fails θ5 but the output with e6 stays; e3' at 9:17 kills instance I1."""
    with_e6_prime = cesar.query(
        [STOCK_VOL], {"q7": QUERY_7}, table_1_events([("IBM", 80, 8000, "9:24")])
    )
    assert [r["attrs"]["finalP"] for r in with_e6_prime] == [91.0]
    with_e3_prime = cesar.query(
        [STOCK_VOL], {"q7": QUERY_7}, table_1_events([("IBM", 99, 8000, "9:17")])
    )
    assert with_e3_prime == []


def test_query_2_first_msft_after_expensive_ibm(cesar):
    query = (
        "FILTER{Price < 25}(FILTER{Name = 'IBM' AND Price > 100} Stock "
        "NEXT{$2.Name = 'MSFT'} Stock) PUBLISH Q2"
    )
    events = ticks(
        ("IBM", 101), ("MSFT", 30), ("IBM", 105), ("MSFT", 24), ("IBM", 99), ("MSFT", 20)
    )
    out = cesar.query([STOCK], {"q2": query}, events)
    assert [(r["t0"], r["t1"], r["attrs"]["Price_1"], r["attrs"]["Price"]) for r in out] == [
        (3, 4, 105.0, 24.0)
    ]


def test_query_3_same_stock_next_sale_five_percent_higher(cesar):
    query = "FILTER{Price > 1.05 * Price_1}(Stock NEXT{$1.Name = $2.Name} Stock) PUBLISH Q3"
    events = ticks(("IBM", 100), ("MSFT", 50), ("IBM", 104), ("MSFT", 53), ("IBM", 110))
    out = cesar.query([STOCK], {"q3": query}, events)
    assert [(r["t0"], r["t1"], r["attrs"]["Name"]) for r in out] == [(2, 4, "MSFT"), (3, 5, "IBM")]


def test_query_6_next_ibm_above_its_52_week_average(cesar):
    query = """
    SELECT Avg, Price AS NextPrice FROM
    FILTER{Price > Avg}(
      (SELECT Avg FROM FILTER{DUR = 52 WEEKS}(
        (SELECT *, Price AS Avg, 1 AS Cnt FROM FILTER{Name = 'IBM'} Stock)
        FOLD{, , ($.Avg * $.Cnt + $2.Price) / ($.Cnt + 1) AS Avg, $.Cnt + 1 AS Cnt}
        FILTER{Name = 'IBM'} Stock))
      NEXT{$2.Name = 'IBM'} Stock)
    PUBLISH AboveAverage
    """
    events = ticks(
        ("IBM", 100, 0),
        ("MSFT", 30, 50),
        ("IBM", 110, 100),
        ("IBM", 120, 200),
        ("IBM", 130, 363),
        ("MSFT", 31, 380),
        ("IBM", 116, 400),
    )
    out = cesar.query(["Stock(Name:string,Price:float)[day]"], {"q6": query}, events)
    assert out == [
        {
            "stream": "AboveAverage",
            "t0": 0,
            "t1": 400,
            "time": "1970-01-01/1971-02-05",
            "attrs": {"Avg": 115.0, "NextPrice": 116.0},
        }
    ]


NESTED = """
SELECT N1, P1, Name_1 AS N2, Price_1 AS P2, Name AS N3, Price AS P3 FROM
(SELECT Name AS N1, Price AS P1 FROM Stock) NEXT{$2.Price > $1.P1} (Stock NEXT{} Stock)
PUBLISH E
"""


def triples(out):
    return Counter(
        (
            r["attrs"]["N1"],
            r["attrs"]["P1"],
            r["attrs"]["N2"],
            r["attrs"]["P2"],
            r["attrs"]["N3"],
            r["attrs"]["P3"],
            r["t0"],
            r["t1"],
        )
        for r in out
    )


def test_section_3_5_stream_3(cesar):
    """S1 ;θ (S2 ; S3): the output the naive automaton of Figure 7 misses is present."""
    events = ticks(("IBM", 10), ("Dell", 22), ("IBM", 9), ("Dell", 24), ("IBM", 11))
    out = cesar.query([STOCK], {"e": NESTED}, events)
    assert triples(out) == Counter(
        [
            ("IBM", 10.0, "IBM", 9.0, "Dell", 24.0, 1, 4),
            ("Dell", 22.0, "IBM", 9.0, "Dell", 24.0, 2, 4),
            ("IBM", 9.0, "Dell", 24.0, "IBM", 11.0, 3, 5),
        ]
    )


def test_section_3_5_stream_s_prime_with_simultaneous_events(cesar):
    """S′: the automaton of Figure 8 wrongly outputs (IBM 10, Dell 23, Dell 24; 1, 4)."""
    events = ticks(
        ("IBM", 10, 1),
        ("Dell", 22, 2),
        ("IBM", 9, 3),
        ("Dell", 23, 3),
        ("Dell", 24, 4),
        ("IBM", 11, 5),
    )
    out = cesar.query([STOCK], {"e": NESTED}, events)
    assert triples(out) == Counter(
        [
            ("IBM", 10.0, "Dell", 22.0, "Dell", 23.0, 1, 3),
            ("Dell", 22.0, "IBM", 9.0, "Dell", 24.0, 2, 4),
            ("Dell", 22.0, "Dell", 23.0, "Dell", 24.0, 2, 4),
            ("IBM", 9.0, "Dell", 24.0, "IBM", 11.0, 3, 5),
        ]
    )
    assert ("IBM", 10.0, "Dell", 23.0, "Dell", 24.0, 1, 4) not in triples(out)


def test_resubscription_reads_a_published_stream(cesar):
    """A derived event ending at T pairs with input events from T + 1 on."""
    pairs = "Stock NEXT{$1.Name = $2.Name} Stock PUBLISH Pairs"
    after = "(SELECT Name AS Pair FROM Pairs) NEXT{$1.Pair = $2.Name} Stock PUBLISH After"
    events = ticks(("IBM", 1, 1), ("IBM", 2, 2), ("IBM", 3, 2), ("IBM", 4, 3))
    out = cesar.query([STOCK], {"pairs": pairs, "after": after}, events)
    after_events = sorted(
        (r["t0"], r["t1"], r["attrs"]["Price"]) for r in out if r["stream"] == "After"
    )
    assert after_events == [(1, 3, 4.0), (1, 3, 4.0)]
