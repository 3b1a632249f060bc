"""The shape cache: which queries it binds, which it compiles in full, and what it refuses."""

from __future__ import annotations

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelError
from cesar.automata.schema import parse_stream_spec
from cesar.automata.shape import MAX_TOKENS, QueryCache, shape_of
from cesar.automata.terms import to_cel
from cesar.perf.loadwork import Workload, input_schema

STOCK = {"Stock": parse_stream_spec("Stock(Name:string,Price:float,Volume:int)")}


def compile_all(cache: QueryCache, texts: list[str], schemas=STOCK) -> list:
    return [cache.compile(shape_of(t), schemas, f"q{n}") for n, t in enumerate(texts)]


def test_the_load_tests_queries_are_bound_and_equal_their_full_compile():
    work = Workload("stock", seed=3)
    schemas = {"Stock": input_schema(work)}
    queries = [work.query(n) for n in range(300)]
    cache = QueryCache()
    for query in queries:
        got = cache.compile(shape_of(query.text), schemas, query.name)
        assert got == compile_query(query.text, schemas, query.name)
        assert got.name == query.name and got.text == query.text
    assert cache.counters["templates"] == 3  # selections, drops, two-stock sequences
    assert cache.counters["bound"] == 300 - 6
    assert len(cache) == 3


def test_a_shape_is_keyed_on_everything_but_its_literals_and_publish_name():
    a = shape_of("FILTER{Name = 'IBM' AND Price > 10.5} Stock PUBLISH A")
    b = shape_of("filter { Name='X' and Price>2.0 } Stock publish B  -- a comment")
    assert a.key == b.key and b.publish == "B" and b.values() == ["X", 2.0]
    assert shape_of("FILTER{Name = 'IBM' AND Price > 10} Stock").key != a.key  # INT, not FLOAT
    assert shape_of("FILTER{Name = 'IBM' AND Volume > 10.5} Stock").key != a.key
    assert shape_of("FILTER{DUR <= 10 MIN} Stock").key != shape_of("FILTER{DUR <= 9 MIN} Stock").key


def test_negated_literals_and_names_are_bound():
    cache = QueryCache()
    texts = [f"FILTER{{Price > -{n}.5}} Stock PUBLISH Low{n}" for n in (1, 2, 3)]
    last = compile_all(cache, texts)[-1]
    assert cache.counters["bound"] == 1
    assert last == compile_query(texts[-1], STOCK, "ignored")
    assert last.name == "Low3" and to_cel(last.automata[0].edges[0].pred) == "Price > -3.5"


def test_a_shape_whose_constants_fold_is_compiled_in_full_every_time():
    cache = QueryCache()
    texts = [f"FILTER{{Price > {a} * {b}}} Stock" for a, b in [(2, 3), (4, 5), (6, 7), (1, 1)]]
    got = compile_all(cache, texts)
    assert got == [compile_query(t, STOCK, f"q{n}") for n, t in enumerate(texts)]
    assert cache.counters == {"compiled": 4, "not_parametric": 1}


def test_constants_compared_with_each_other_are_not_parametric():
    cache = QueryCache()
    texts = ["FILTER{1 < 2 AND Price > 1.0} Stock", "FILTER{3 < 2 AND Price > 1.0} Stock"] * 2
    got = compile_all(cache, texts)
    assert got == [compile_query(t, STOCK, f"q{n}") for n, t in enumerate(texts)]
    assert cache.counters["bound"] == 0


def test_a_literal_folded_to_the_same_truth_as_its_sentinel_is_not_parametric():
    # The first b of a Kleene closure has LEN 1: `b.LEN >= 2` folds to FALSE there, and so
    # does the sentinel's `1 >= 987654321003`; a template bound with `b.LEN >= 0` would keep
    # FALSE where the full compile has TRUE, and lose every match that starts with one b.
    cache = QueryCache()
    pattern = "PATTERN SEQ(Stock a, Stock+ b[]) WHERE a.Price < {} AND b.LEN >= {} PUBLISH P"
    texts = [pattern.format(p, n) for p, n in [(1.5, 0), (1.5, 2), (2.5, 0)]]
    got = compile_all(cache, texts)
    assert got == [compile_query(t, STOCK, f"q{n}") for n, t in enumerate(texts)]
    assert cache.counters == {"compiled": 3, "not_parametric": 1}


def test_a_bound_literal_out_of_range_fails_as_the_full_compile_does():
    cache = QueryCache()
    compile_all(cache, ["FILTER{Volume > 1} Stock", "FILTER{Volume > 2} Stock"])
    huge = "FILTER{Volume > 99999999999999999999} Stock"
    with pytest.raises(CelError) as full:
        compile_query(huge, STOCK, "q")
    with pytest.raises(CelError) as cached:
        cache.compile(shape_of(huge), STOCK, "q")
    assert str(cached.value) == str(full.value)


def test_a_taken_name_or_a_changed_stream_is_compiled_in_full():
    cache = QueryCache()
    compile_all(cache, ["FILTER{Volume > 1} Stock", "FILTER{Volume > 2} Stock"])
    taken = {**STOCK, "q9": parse_stream_spec("q9(a:int)")}
    with pytest.raises(CelError, match="already exists"):
        cache.compile(shape_of("FILTER{Volume > 3} Stock"), taken, "q9")
    changed = {"Stock": parse_stream_spec("Stock(Name:string,Price:float,Volume:float)")}
    got = cache.compile(shape_of("FILTER{Volume > 3} Stock"), changed, "q")
    assert got == compile_query("FILTER{Volume > 3} Stock", changed, "q")
    assert got.output.type_of("Volume").value == "float"
    assert cache.counters["bound"] == 0


def test_the_oldest_shape_goes_when_the_cache_is_full():
    cache = QueryCache(capacity=2)
    texts = ["FILTER{Price != 0} Stock", "FILTER{Volume != 0} Stock", "FILTER{Volume = 0} Stock"]
    compile_all(cache, texts)
    assert len(cache) == 2
    assert shape_of(texts[0]) not in cache and shape_of(texts[2]) in cache


def test_a_query_longer_than_the_cache_keeps_is_compiled_in_full_and_not_remembered():
    cache = QueryCache()
    long = " AND ".join(f"Price > {n}.5" for n in range(MAX_TOKENS // 4))
    texts = [f"FILTER{{Volume > {v} AND {long}}} Stock" for v in (1, 2, 3)]
    assert len(shape_of(texts[0]).key) > MAX_TOKENS
    assert compile_all(cache, texts) == [
        compile_query(t, STOCK, f"q{n}") for n, t in enumerate(texts)
    ]
    assert len(cache) == 0 and cache.counters == {"compiled": 3}
