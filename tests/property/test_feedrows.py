"""The feed's vectorized paths against the project's own meanings.

* :func:`server.wire.arrowroute.compile_predicate` (static interest as Arrow filters)
  against :func:`automata.evaluate.holds`: equal where Arrow evaluates the
  predicate, and never narrower anywhere (a global shard may get an event it
  does not need, never miss one);
* :func:`server.feed.jsonl.check_json` (Arrow's JSON reader, then ``cesar run``'s
  rules) against :func:`server.wire.eventfile.json_event` line by line: the same
  events, and the same field and reason for every rejected line.
"""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from cesar.automata.evaluate import Env, Faults, holds
from cesar.automata.schema import AttrType, Event, EventError, parse_stream_spec
from cesar.automata.terms import (
    And,
    Arith,
    Attr,
    Call,
    Cmp,
    Const,
    Dur,
    Neg,
    Not,
    Or,
    Pred,
    Scope,
    Term,
)
from cesar.server.feed.jsonl import check_json
from cesar.server.wire.algebra_proto import to_predicate
from cesar.server.wire.arrowevents import column
from cesar.server.wire.arrowroute import compile_interest, compile_predicate, key_shards
from cesar.server.wire.eventfile import json_event
from cesar.server.wire.routing import shard_of
from tests.strategies import event_values, typed_preds

S = parse_stream_spec("S(x:int,y:int,f:float,s:string)")


def arrow_evaluable(node: Pred | Term) -> bool:
    """Whether the predicate uses only what the Arrow filter evaluates exactly."""
    if isinstance(node, Cmp):
        return arrow_evaluable(node.left) and arrow_evaluable(node.right)
    if isinstance(node, And | Or):
        return all(arrow_evaluable(item) for item in node.items)
    if isinstance(node, Not):
        return arrow_evaluable(node.item)
    if isinstance(node, Arith):
        return node.op in "+-*" and arrow_evaluable(node.left) and arrow_evaluable(node.right)
    if isinstance(node, Neg):
        return arrow_evaluable(node.operand)
    return not isinstance(node, Dur | Call)


@given(typed_preds, st.lists(event_values, min_size=1, max_size=12))
def test_compiled_interest_admits_what_the_predicate_admits(pred, rows):
    table = pa.table(
        {
            "t0": [0] * len(rows),
            "t1": [0] * len(rows),
            **{column("S", name): [r[name] for r in rows] for name in ("x", "y", "f", "s")},
        }
    )
    mask = compile_predicate(to_predicate(pred), "S")(table).to_pylist()
    truth = [holds(pred, Env({Scope.EVENT: r}, 0), Faults()) for r in rows]
    assert all(m or not t for m, t in zip(mask, truth, strict=True))  # never narrower
    if arrow_evaluable(pred):
        assert mask == truth


@given(
    st.lists(st.tuples(st.booleans(), st.sampled_from(["", "a", "b", "IBM"])), min_size=2),
    typed_preds,
    st.lists(event_values, min_size=1, max_size=12),
)
def test_equalities_with_strings_taken_in_one_filter_admit_what_they_admit(equal, other, rows):
    """A disjunction holding several ``s = 'c'`` (either way round; ``is_in`` in one pass)
    beside another predicate: exactly what it admits, where Arrow evaluates the other."""
    attribute = Attr(Scope.EVENT, "s")
    items = [
        Cmp("=", attribute, Const(v, AttrType.STRING))
        if left
        else Cmp("=", Const(v, AttrType.STRING), attribute)
        for left, v in equal
    ]
    pred = Or((*items, other))
    table = pa.table(
        {column("S", name): [r[name] for r in rows] for name in ("x", "y", "f", "s")}
        | {"t0": [0] * len(rows), "t1": [0] * len(rows)}
    )
    mask = compile_interest([to_predicate(p) for p in pred.items], "S", limit=None)
    assert mask is not None
    got = mask(table).to_pylist()
    truth = [holds(pred, Env({Scope.EVENT: r}, 0), Faults()) for r in rows]
    assert all(m or not t for m, t in zip(got, truth, strict=True))
    if arrow_evaluable(other):
        assert got == truth
    assert compile_interest([to_predicate(p) for p in items], "S", limit=0) is not None


def test_an_integer_overflow_never_makes_the_filter_narrower():
    """``NOT (x * 2^62 < 0)``: for x = 2 and 3 the product overflows, and CEL makes that atom
    false whatever its polarity (NOT is pushed down to it); Arrow's product wraps, and a
    wrapped value gives the filter true or false, never less than false: it may admit more,
    never fewer (here: exactly the same)."""
    x = Attr(Scope.EVENT, "x")
    pred = Not(Cmp("<", Arith("*", x, Const(2**62, AttrType.INT)), Const(0, AttrType.INT)))
    table = pa.table({column("S", "x"): [-1, 0, 1, 2, 3], "t0": [0] * 5, "t1": [0] * 5})
    rows = [{"x": v, "y": 0, "f": 0.0, "s": ""} for v in (-1, 0, 1, 2, 3)]
    faults = Faults()
    truth = [holds(pred, Env({Scope.EVENT: r}, 0), faults) for r in rows]
    assert truth == [False, True, True, False, False] and faults.arithmetic == 2
    assert compile_predicate(to_predicate(pred), "S")(table).to_pylist() == truth


def test_arrow_evaluable_sees_the_forms_arrow_skips():
    one = Const(1, AttrType.INT)
    assert arrow_evaluable(Cmp("<", Arith("+", one, one), one))
    assert not arrow_evaluable(Cmp("<", Arith("/", one, one), one))
    assert not arrow_evaluable(Not(Cmp("<", Call("ABS", (one,)), one)))
    assert not arrow_evaluable(Cmp("<", Dur(), one))


values = st.one_of(
    st.integers(-5, 5),
    st.sampled_from([0.5, -2.25, 1e300, 3.0]),
    st.sampled_from(["", "a", "IBM"]),
    st.booleans(),
    st.none(),
    st.just([1]),
)
keys = st.sampled_from(["stream", "t", "t0", "t1", "x", "y", "f", "s", "extra"])
objects = st.dictionaries(keys, values, max_size=9)
valid_objects = st.fixed_dictionaries(
    {
        "t": st.integers(0, 5),
        "x": st.integers(-5, 5),
        "y": st.integers(-5, 5),
        "f": st.sampled_from([0.5, -2.25, 3]),
        "s": st.sampled_from(["", "a"]),
    },
    optional={"stream": st.just("S")},
)
lines = st.one_of(
    valid_objects.map(json.dumps),
    valid_objects.map(json.dumps),
    objects.map(json.dumps),
    st.sampled_from(["not json", "[1, 2]", "{", '"S"', "{}"]),
)


@given(st.lists(lines, min_size=1, max_size=10))
def test_json_rows_mean_what_cesar_run_reads(texts):
    batch = pa.RecordBatch.from_pydict(
        {"raw": texts, "arrival": list(range(len(texts)))},
        schema=pa.schema([("raw", pa.string()), ("arrival", pa.int64())]),
    )
    checked = check_json(batch, {"S": S}).to_pylist()
    got = {}
    for row in checked:
        if row["reason"] is not None:
            got[row["arrival"]] = (row["field"], row["reason"])
        else:
            values = {name: row[column("S", name)] for name in S.names}
            got[row["arrival"]] = Event.of("S", row["t0"], row["t1"], values)
    expected = {}
    for index, text in enumerate(texts):
        try:
            expected[index] = json_event(text, {"S": S})
        except EventError as exc:
            expected[index] = (exc.field or "", exc.reason)
    assert got == expected


KEYS = {
    pa.string(): st.text(max_size=4),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.float64(): st.floats(allow_nan=False),
    pa.bool_(): st.booleans(),
}


@given(
    st.sampled_from(sorted(KEYS, key=str)).flatmap(
        lambda typ: st.tuples(st.just(typ), st.lists(st.one_of(st.none(), KEYS[typ]), max_size=12))
    ),
    st.integers(1, 5),
)
def test_a_columns_key_shards_are_each_values_shard(column_values, shards):
    """key_shards (a whole column; one shard: no hashing at all) agrees with shard_of, the
    one value's hash the front's per-event routing and the feed use; a null has none."""
    typ, values = column_values
    got = key_shards(pa.array(values, typ), shards).to_pylist()
    assert got == [None if v is None else shard_of(v, shards) for v in values]
