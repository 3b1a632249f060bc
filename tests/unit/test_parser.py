import pytest

from cesar.automata.ast import (
    FilterExpr,
    FoldExpr,
    NextExpr,
    Query,
    SelectExpr,
    StreamRef,
    UnionExpr,
    WithinExpr,
)
from cesar.automata.errors import CelSyntaxError
from cesar.automata.parser import parse_query
from cesar.automata.schema import AttrType
from cesar.automata.terms import And, Arith, Attr, Cmp, Const, DurLit, Neg, Not, Scope, Truth

# Queries in the original Cayuga grammar and in the language reference's examples must parse.
ACCEPTED = [
    "SELECT Name, Price_1 AS FirstPrice, Price AS SecondPrice FROM Stock "
    "NEXT{$1.Name = $2.Name} Stock PUBLISH Pairs",
    "SELECT * FROM FILTER{Name = 'IBM' AND Price > 100} Stock PUBLISH Q1",
    "SELECT *, 1 AS cnt FROM Stock",
    "(SELECT *, 1 AS cnt FROM Stock) FOLD{$2.Name = $.Name, $2.Price > $.Price, $.cnt + 1 AS cnt}"
    " Stock",
    "FILTER{cnt > 10}((SELECT *, 1 AS cnt FROM Stock) FOLD{,, $.cnt + 1 AS cnt} Stock)",
    "FILTER{DUR >= 30 MIN} (Stock FOLD{$2.Name = $.Name, $2.Price > $.Price,} Stock)",
    "Stock NEXT{} Stock NEXT{} Stock",
    "A NEXT{$2.x > $1.x} (B NEXT{} C)",
    "FILTER{CONTAINS(Name, 'IBM') = 1} Stock",
    "FILTER{SIMILARITY(Name, 'IBN') > 0.5} Stock",
    "select name from filter{price >= 1e3} Stock publish Big",
    "FILTER{NOT (a = 1 OR b != 2) AND TRUE} S UNION FILTER{FALSE} S",
    "FILTER{x = 'it''s'} S -- a comment\n",
    "FILTER{a % 2 = 0 AND -b ^ 2 < 3 * (c - 1) / 4} S",
    "FILTER{FILTER_x = 1} FILTER{y = 2} S",
    "SELECT Name FROM Stock NEXT{$2.Price > $1.Price} Stock WITHIN 10 MIN PUBLISH Rise",
    "S WITHIN 3 UNION (S NEXT{} S) within 90 seconds",
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepted(text):
    assert isinstance(parse_query(text), Query)


def test_structure_and_associativity():
    q = parse_query("A NEXT{} B FOLD{,,} C PUBLISH Out")
    assert q.publish == "Out"
    assert isinstance(q.expr, FoldExpr) and isinstance(q.expr.left, NextExpr)
    nested = parse_query("A NEXT{} (B NEXT{} C)").expr
    assert isinstance(nested, NextExpr) and isinstance(nested.right, NextExpr)
    union = parse_query("SELECT x FROM A UNION B").expr
    assert isinstance(union, UnionExpr) and isinstance(union.left, SelectExpr)
    assert union.right == StreamRef("B")


def test_within_bounds_the_whole_chain_before_it():
    q = parse_query("SELECT x FROM A NEXT{} B NEXT{} C WITHIN 10 MIN PUBLISH P")
    assert isinstance(q.expr, SelectExpr) and isinstance(q.expr.source, WithinExpr)
    within = q.expr.source
    assert within.window == DurLit(10, "MIN") and isinstance(within.operand, NextExpr)
    assert isinstance(within.operand.left, NextExpr)
    assert parse_query("S WITHIN 4").expr == WithinExpr(StreamRef("S"), Const(4, AttrType.INT))


def test_keywords_are_case_insensitive_names_are_not():
    q = parse_query("sElEcT Name FrOm FiLtEr{Price > 1} stock")
    assert isinstance(q.expr, SelectExpr)
    assert isinstance(q.expr.source, FilterExpr)
    assert q.expr.source.operand == StreamRef("stock")


def test_terms_precedence():
    pred = parse_query("FILTER{-a ^ 2 + b * c > 1} S").expr.pred
    a, b, c = (Attr(Scope.EVENT, n) for n in "abc")
    assert pred == Cmp(
        ">",
        Arith("+", Neg(Arith("^", a, Const(2, pred.right.type))), Arith("*", b, c)),
        Const(1, pred.right.type),
    )
    power = parse_query("FILTER{2 ^ 3 ^ 2 = x} S").expr.pred.left
    assert power.right == Arith("^", Const(3, power.left.type), Const(2, power.left.type))


def test_predicate_precedence_and_literals():
    pred = parse_query("FILTER{NOT a = 1 AND b = 2 OR TRUE} S").expr.pred
    assert pred.items[1] == Truth(True)
    first = pred.items[0]
    assert isinstance(first, And) and isinstance(first.items[0], Not)
    assert parse_query("FILTER{f = TRUE} S").expr.pred.right.value is True


def test_durations_and_scopes():
    pred = parse_query("FILTER{DUR >= 10 min AND DUR < 2.5 HOURS} S").expr.pred
    assert pred.items[0].right == DurLit(10, "min")
    assert pred.items[1].right == DurLit(2.5, "HOURS")
    nxt = parse_query("A NEXT{$1.x = $2.y AND $.z = 1} B").expr.pred
    assert [a.left.scope for a in nxt.items] == [Scope.LEFT, Scope.STATE]
    assert nxt.items[0].right.scope is Scope.RIGHT


def test_attribute_named_like_a_unit_is_a_name():
    pred = parse_query("FILTER{Min < Day} S").expr.pred
    assert pred == Cmp("<", Attr(Scope.EVENT, "Min"), Attr(Scope.EVENT, "Day"))


# (query, line, column, fragment of the message, an expected token or None)
MALFORMED = [
    ("FILTER{Price >} Stock", 1, 15, "unexpected '}'", "a term"),
    ("SELECT a+1 FROM S", 1, 8, "needs a name", "AS"),
    ("Stock NEXT", 1, 11, "unexpected end of query", "'{'"),
    ("FILTER{a = 'x} S", 1, 12, "unterminated string", None),
    ("FILTER{a} S", 1, 8, "value where a predicate belongs", "a comparison"),
    ("S PUBLISH", 1, 10, "end of query", "a name"),
    ("S NEXT{a=1 b} T", 1, 12, "unexpected name 'b'", "AND"),
    ("S # T", 1, 3, "unexpected character '#'", None),
    ("SELECT a FROM S PUBLISH X Y", 1, 27, "unexpected name 'Y'", "end of query"),
    ("FILTER{a = 1}\n  S NEXT{$1.a = } T", 2, 17, "unexpected '}'", "a term"),
    ("S FOLD{a = 1, b = 2} T", 1, 20, "unexpected '}'", "','"),
    ("FILTER{(a > 1) + 2 > 3} S", 1, 11, "predicate where a value belongs", "a term"),
    ("FILTER{a = 99999999999999999999} S", 1, 12, "outside the 64-bit range", None),
    ("FILTER{a < b < c} S", 1, 14, "unexpected comparison operator '<'", None),
    ("SELECT FROM S", 1, 8, "unexpected 'FROM'", "a term"),
    ("", 1, 1, "unexpected end of query", "a name"),
    ("FILTER{a = 1} S UNION", 1, 22, "end of query", "FILTER"),
    ("(S NEXT{} T", 1, 12, "end of query", "')'"),
    ("FILTER{$3.a = 1} S", 1, 8, "unexpected character '$'", None),
    ("S WITHIN", 1, 9, "unexpected end of query", "a duration"),
    ("S WITHIN x", 1, 10, "unexpected name 'x'", "a number"),
    ("S WITHIN -1", 1, 10, "unexpected '-'", "a number"),
    ("S WITHIN 1 WITHIN 2", 1, 12, "unexpected 'WITHIN'", "PUBLISH"),
    ("FILTER{Within = 1} S", 1, 8, "unexpected 'Within'", "a term"),
]


@pytest.mark.parametrize(("text", "line", "column", "message", "expected"), MALFORMED)
def test_malformed_queries_report_position(text, line, column, message, expected):
    with pytest.raises(CelSyntaxError) as info:
        parse_query(text)
    error = info.value
    assert (error.line, error.column) == (line, column), str(error)
    assert message in str(error)
    if expected is not None:
        assert expected in error.expected, error.expected
    source_line = text.splitlines()[line - 1] if text else ""
    excerpt, caret = str(error).splitlines()[-2:]
    assert excerpt == "  " + source_line
    assert caret.index("^") == column + 1
