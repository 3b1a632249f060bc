"""The reference evaluator on the algebra-level examples of Section 2.2."""

from cesar.automata import algebra as alg
from cesar.automata.reference import evaluate
from cesar.automata.schema import AttrType, Event
from cesar.automata.terms import TRUE

QUOTES = alg.Source(
    "Q", (("name", AttrType.STRING), ("price", AttrType.INT), ("vol", AttrType.INT))
)
TRADES = alg.Source("T", (("company", AttrType.STRING), ("price", AttrType.INT)))


def test_concatenation_overwrites_shared_attributes():
    """e0 = <IBM, 10, 1000; 1, 1>, e1 = <MSFT, 99; 2, 3>: e0ˆe1 = <IBM, 99, 1000, MSFT; 1, 3>."""
    expr = alg.Seq(QUOTES, TRADES, TRUE)
    assert expr.names == ("name", "price", "vol", "company")
    streams = {
        "Q": [Event.of("Q", 1, 1, {"name": "IBM", "price": 10, "vol": 1000})],
        "T": [Event.of("T", 2, 3, {"company": "MSFT", "price": 99})],
    }
    assert evaluate(expr, streams) == [
        Event.of("out", 1, 3, {"name": "IBM", "price": 99, "vol": 1000, "company": "MSFT"})
    ]


def test_figure_1_sequence_takes_the_earliest_ending_non_overlapping_event():
    """e2 overlaps e1; e3 starts before e4 but ends after it: S1 ; S2 = {e1ˆe4}."""
    s1 = alg.Source("S1", (("a", AttrType.STRING),))
    s2 = alg.Source("S2", (("b", AttrType.STRING),))
    streams = {
        "S1": [Event.of("S1", 1, 2, {"a": "e1"})],
        "S2": [
            Event.of("S2", 2, 3, {"b": "e2"}),
            Event.of("S2", 4, 5, {"b": "e4"}),
            Event.of("S2", 3, 7, {"b": "e3"}),
        ],
    }
    assert evaluate(alg.Seq(s1, s2, TRUE), streams) == [
        Event.of("out", 1, 5, {"a": "e1", "b": "e4"})
    ]


def test_simultaneous_successors_each_give_an_output_and_union_keeps_duplicates():
    s = alg.Source("S", (("x", AttrType.INT),))
    streams = {
        "S": [
            Event.of("S", 1, 1, {"x": 1}),
            Event.of("S", 2, 2, {"x": 2}),
            Event.of("S", 2, 2, {"x": 3}),
        ]
    }
    pairs = evaluate(alg.Seq(alg.Rename(s, (("x", "x_1"),)), s, TRUE), streams)
    assert sorted(e.attrs()["x"] for e in pairs) == [2, 3]
    assert len(evaluate(alg.Union(s, s), streams)) == 6
