"""Parser round trip: syntax tree → text → syntax tree."""

from hypothesis import given

from cesar.automata.ast import format_query
from cesar.automata.parser import parse_query
from cesar.automata.terms import to_cel
from tests.strategies import queries, syntax_preds


@given(queries)
def test_query_round_trip(query):
    text = format_query(query)
    assert parse_query(text) == query, text


@given(syntax_preds)
def test_predicate_round_trip(pred):
    text = to_cel(pred)
    assert parse_query(f"FILTER{{{text}}} S").expr.pred == pred, text
