"""Resolving patterns against schemas (automata/pattern/resolve.py): placement, output, errors."""

import pytest

from cesar.automata.errors import CelSemanticError
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.resolve import resolve
from cesar.automata.schema import parse_stream_spec
from cesar.automata.terms import to_cel

SCHEMAS = {
    s.name: s
    for s in map(
        parse_stream_spec,
        [
            "Stock(symbol:string,price:float,volume:int)[min]",
            "Shelf(tag_id:int,shelf:string)[min]",
            "Exit(tag_id:int)[min]",
            "Register(tag_id:int,till:int)[min]",
            "Tick(n:int)",
        ],
    )
}


def resolved(text: str, name: str | None = "out"):
    return resolve(parse_pattern(text), SCHEMAS, name)


def test_conjuncts_go_to_their_last_identifier():
    """SASE+ Step 2: a[1] → begin, a[i] → take, a[a.LEN] with b → b's begin."""
    r = resolved(
        "PATTERN SEQ(Stock+ a[], Stock b) WHERE skip_till_next_match(a[], b) {"
        " [symbol] AND a[1].volume > 1000 AND a[i].price > avg(a[..i-1].price)"
        " AND a.LEN >= 3 AND b.volume < 80% * a[a.LEN].volume } WITHIN 1 HOUR"
    )
    a, b = r.steps
    assert to_cel(a.begin) == "a[1].volume > 1000"
    assert to_cel(a.take) == "a[i].symbol = a[1].symbol AND a[i].price > avg(a[..i-1].price)"
    assert to_cel(a.close) == "a.LEN >= 3"
    assert to_cel(b.begin) == "b.symbol = a[1].symbol AND b.volume < 0.8 * a[a.LEN].volume"
    assert r.window == 60 and r.partition == ("symbol",)
    assert r.types["avg(a[..i-1].price)"].value == "float"


def test_negations_take_the_conditions_that_name_them():
    r = resolved(
        "PATTERN SEQ(Shelf a, !(Register b), Exit c) WHERE [tag_id] AND b.till = 3 WITHIN 12 HOURS"
    )
    (negation,) = r.negations
    assert negation.after == 0 and negation.types == ("Register",)
    assert to_cel(negation.pred) == "b.tag_id = a.tag_id AND b.till = 3"
    assert to_cel(r.steps[1].begin) == "c.tag_id = a.tag_id"
    assert r.reads == frozenset({"Shelf", "Register", "Exit"})


def test_default_output_names_every_variables_attributes():
    r = resolved("PATTERN SEQ(Shelf a, Stock+ k[])")
    assert r.output.spec() == (
        "out(a_tag_id:int,a_shelf:string,k_len:int,k_first_symbol:string,k_last_symbol:string,"
        "k_first_price:float,k_last_price:float,k_first_volume:int,k_last_volume:int)[min]"
    )


def test_return_names_and_types():
    r = resolved(
        "PATTERN SEQ(Stock+ a[], Stock b) RETURN a[1].symbol, avg(a[].price), count(a[].price),"
        " a.LEN, b.price - a[a.LEN].price AS change PUBLISH Moves",
        None,
    )
    assert r.output.spec() == (
        "Moves(a_first_symbol:string,avg_a_price:float,count_a_price:int,a_len:int,"
        "change:float)[min]"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("PATTERN SEQ(Nope a)", "unknown stream Nope"),
        ("PATTERN SEQ(Stock a, Tick b)", "must share a unit"),
        ("PATTERN SEQ(Stock a, Stock a)", "declared twice"),
        ("PATTERN SEQ(Stock a) WHERE z.price > 1", "unknown variable z"),
        ("PATTERN SEQ(Stock a) WHERE a.nope > 1", "has no attribute nope"),
        ("PATTERN SEQ(Stock a) WHERE a.symbol > 1", "cannot compare string a.symbol"),
        ("PATTERN SEQ(Stock+ a[]) WHERE a.price > 1", "is a Kleene variable"),
        ("PATTERN SEQ(Stock a) WHERE a[1].price > 1", "not a Kleene closure"),
        ("PATTERN SEQ(Stock+ a[]) WHERE avg(a[].symbol) > 1", "avg needs numbers"),
        ("PATTERN SEQ(Stock+ a[]) WHERE a[i].price > a[a.LEN].price", "not known then"),
        ("PATTERN SEQ(Stock a, !(Stock b)) WHERE [symbol]", "needs WITHIN"),
        ("PATTERN SEQ(!(Stock b))", "not negated"),
        ("PATTERN AND(Stock a, Stock+ b[])", "AND takes components without"),
        ("PATTERN AND(Stock a, !(Stock n)) WITHIN 5", "needs two components that are not"),
        ("PATTERN AND(Stock a, Stock b) WHERE skip_till_next_match(a, b) { }", "only skip_till"),
        ("PATTERN SEQ(Stock a, Stock b) RETURN a.price + 1", "needs a name"),
        ("PATTERN SEQ(Stock a, Stock b) RETURN a.price AS x, b.price AS x", "two output"),
        ("PATTERN SEQ(Stock a) WITHIN 90 SECONDS", "whole number"),
        ("PATTERN SEQ(ANY(Shelf, Exit) a) RETURN a.shelf", "Exit has no shelf"),
        ("PATTERN SEQ(Tick a) WITHIN 1 MIN", "needs streams with a time unit"),
        ("PATTERN SEQ(Stock+ a[], Stock b) WHERE b.price > a[i].price", "not known then"),
        ("PATTERN SEQ(Stock a, !(Stock b), !(Stock c)) WHERE b.price = c.price", "two negated"),
        ("PATTERN SEQ(Stock+ a[], !(Stock b), Stock c) WHERE b.price > a[i].price", "a negation"),
    ],
)
def test_semantic_errors(text, message):
    with pytest.raises(CelSemanticError) as caught:
        resolved(text)
    assert message in str(caught.value)


def test_a_pattern_needs_a_name():
    with pytest.raises(CelSemanticError, match="PUBLISH name"):
        resolved("PATTERN SEQ(Stock a)", None)
