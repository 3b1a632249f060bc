"""The shape cache against compiling in full: same outputs, on the engine and the reference.

Families of CEL queries (and of patterns) are drawn as one text whose literals are then drawn
again (from small sets, so equal constants and negated ones occur; the
predicates fold, compare and negate constants, so shapes that are not
parametric occur too).  Each member compiled through one
:class:`~cesar.automata.shape.QueryCache` must publish, on random streams
with simultaneous events and durations, exactly what the member compiled in
full publishes, and its algebra must mean the same to the reference
evaluator.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelError
from cesar.automata.parser import tokenize
from cesar.automata.pattern.parser import tokenize as pattern_tokens
from cesar.automata.pattern.reference import evaluate as evaluate_pattern
from cesar.automata.reference import evaluate
from cesar.automata.schema import Event, parse_stream_spec
from cesar.automata.shape import QueryCache, shape_of
from cesar.automata.terms import Attr, Leaf, Scope, map_pred, to_cel
from cesar.server.engine.engine import Engine, EngineOptions
from tests.pattern_strategies import SCHEMAS as PATTERNS
from tests.pattern_strategies import compiled_patterns, pattern_streams
from tests.property.test_engine import SETTINGS
from tests.strategies import event_values, typed_preds

SCHEMAS = {"S": parse_stream_spec("S(x:int,y:int,f:float,s:string)")}
FRESH = {
    "INT": ["0", "1", "2", "3", "7"],
    "FLOAT": ["0.5", "1.5", "2.0", "0.0"],
    "STRING": ["''", "'a'", "'b'", "'ab'"],
}
SHAPES = [
    "FILTER{{{p}}} S",
    "FILTER{{{p}}} S PUBLISH Named",
    "FILTER{{{p}}} S NEXT{{$1.x = $2.x AND $2.f > {c} * $1.f}} S",
    "SELECT x, f AS g FROM FILTER{{{p}}} S NEXT{{{q}}} S",
    "(SELECT x, y, f, s, 1 AS n FROM FILTER{{{p}}} S)"
    " FOLD{{$2.x = $.x, $2.y > {c}, $.n + 1 AS n}} S",
    "FILTER{{DUR <= 3 AND x > {c}}} (FILTER{{{p}}} S NEXT{{}} S)",
]


def vary(draw: st.DrawFn, text: str) -> str:
    """``text`` with every literal token drawn again (same kind)."""
    out, last = [], 0
    for token in tokenize(text):
        if token.type in FRESH:
            assert token.start_pos is not None
            out += [text[last : token.start_pos], draw(st.sampled_from(FRESH[token.type]))]
            last = token.start_pos + len(token.value)
    return "".join(out) + text[last:]


def rescope(draw: st.DrawFn, leaf: Leaf) -> Leaf:
    """An attribute of the event as one of the left or the right event of NEXT."""
    if isinstance(leaf, Attr):
        return Attr(draw(st.sampled_from([Scope.LEFT, Scope.RIGHT])), leaf.name)
    return leaf


@st.composite
def families(draw: st.DrawFn) -> list[str]:
    """Two to six queries of one shape."""
    text = draw(st.sampled_from(SHAPES)).format(
        p=to_cel(draw(typed_preds)),
        q=to_cel(map_pred(draw(typed_preds), lambda leaf: rescope(draw, leaf))),
        c=draw(st.sampled_from(["0.5", "2", "1.5"])),
    )
    return [vary(draw, text) for _ in range(draw(st.integers(2, 6)))]


@st.composite
def s_events(draw: st.DrawFn) -> list[Event]:
    """Events of S with durations and simultaneous ends."""
    events = []
    for _ in range(draw(st.integers(0, 12))):
        t1 = draw(st.integers(0, 6))
        t0 = t1 - draw(st.sampled_from([0, 0, 1, 3]))
        events.append(Event.of("S", t0, t1, draw(event_values)))
    return sorted(events, key=lambda e: e.t1)


@settings(max_examples=150, **SETTINGS)
@given(texts=families(), events=s_events())
def test_a_query_bound_from_its_shape_means_what_its_full_compile_means(texts, events):
    cache = QueryCache()
    for number, text in enumerate(texts):
        name = f"q{number}"
        direct = compile_query(text, SCHEMAS, name)
        cached = cache.compile(shape_of(text), SCHEMAS, name)
        assert cached.output == direct.output and cached.reads == direct.reads
        assert cached.text == text
        streams = {"S": events}
        assert Counter(evaluate(cached.algebra, streams, name=name)) == Counter(
            evaluate(direct.algebra, streams, name=name)
        )
        got, expected = Engine(EngineOptions(merge=False)), Engine(EngineOptions(merge=False))
        got.subscribe(name, cached.automata)
        expected.subscribe(name, direct.automata)
        assert Counter(got.run(events)) == Counter(expected.run(events))
    assert cache.counters["compiled"] + cache.counters["bound"] == len(texts)


PATTERN_FRESH = {"INT": ["0", "1", "2", "4"], "STRING": ["'a'", "'b'"]}


@st.composite
def pattern_families(draw: st.DrawFn) -> list[str]:
    """Two to five patterns of one shape: a random pattern with its literals drawn again."""
    text = draw(compiled_patterns("P"))
    out = []
    for _ in range(draw(st.integers(2, 5))):
        pieces, last = [], 0
        for token in pattern_tokens(text):
            if token.type in PATTERN_FRESH and str(token).startswith(("'", *"0123456789")):
                assert token.start_pos is not None
                pieces += [
                    text[last : token.start_pos],
                    draw(st.sampled_from(PATTERN_FRESH[token.type])),
                ]
                last = token.start_pos + len(token.value)
        out.append("".join(pieces) + text[last:])
    return out


@settings(max_examples=100, **SETTINGS)
@given(texts=pattern_families(), streams=pattern_streams())
def test_a_pattern_bound_from_its_shape_matches_what_its_full_compile_matches(texts, streams):
    cache = QueryCache()
    events = [e for stream in streams.values() for e in stream]
    for number, text in enumerate(texts):
        name = f"P{number}"
        try:
            direct = compile_query(text.replace("PUBLISH P", f"PUBLISH {name}"), PATTERNS)
        except CelError:
            return  # a literal drawn again made it one the engine refuses (a DNF too large)
        cached = cache.compile(shape_of(direct.text), PATTERNS)
        assert cached.text == direct.text and cached.output == direct.output
        assert cached.pattern is not None and direct.pattern is not None
        want = Counter(evaluate_pattern(direct.pattern, streams))
        assert Counter(evaluate_pattern(cached.pattern, streams)) == want
        engine = Engine(EngineOptions(merge=False))
        engine.subscribe(name, cached.automata, None, cached.pattern)
        assert Counter(engine.run(events)) == want
    assert cache.counters["compiled"] + cache.counters["bound"] == len(texts)
