"""The recursive-descent pattern parser (automata/pattern/descent.py) against lark's LALR
parser of the same grammar: the same tree, token for token and position for position, for
every text lark accepts, and nothing for a text lark rejects."""

from typing import Any

import lark
from hypothesis import given
from hypothesis import strategies as st

from cesar.automata.errors import CelSyntaxError
from cesar.automata.pattern.descent import descend
from cesar.automata.pattern.parser import _parser, tokenize
from cesar.perf.flinkcmp import skipping_queries
from cesar.perf.populations import population
from cesar.perf.serverproc import sample_events
from tests.pattern_strategies import (
    compiled_patterns,
    conjunctions,
    negated_patterns,
    nested_patterns,
    skipping_patterns,
    window_patterns,
)

PATTERNS = st.one_of(
    compiled_patterns(),
    compiled_patterns(windowed=True),
    nested_patterns(),
    nested_patterns(shape="ordered"),
    negated_patterns(),
    conjunctions(windowed=True),
    skipping_patterns(),
    window_patterns(),
)


def shape(node: Any) -> Any:
    """A tree as nested tuples: each rule's name, each token's kind, text and place."""
    if isinstance(node, lark.Token):
        return (node.type, str(node), node.start_pos, node.line, node.column)
    return (str(node.data), tuple(shape(child) for child in node.children))


def by_lark(text: str) -> Any:
    """lark's tree of ``text`` as :func:`shape` gives it, or None if lark rejects it."""
    try:
        return shape(_parser().parse(text))
    except (lark.exceptions.UnexpectedInput, CelSyntaxError):
        return None


def by_descent(text: str) -> Any:
    tree = descend(list(tokenize(text)))
    return None if tree is None else shape(tree)


def test_the_benchmarks_patterns_give_lark_trees() -> None:
    texts = population("patterns", 300, sample_events(), 1)
    texts += [text for _, text, _ in skipping_queries(12, "PAST LAST ROW")]
    for text in texts:
        assert by_descent(text) == by_lark(text) is not None, text


@given(PATTERNS)
def test_a_generated_pattern_gives_lark_tree(text: str) -> None:
    expected = by_lark(text)
    assert expected is not None, text
    assert by_descent(text) == expected, text


@given(PATTERNS, st.data())
def test_a_broken_pattern_is_left_to_lark(text: str, data: st.DataObject) -> None:
    """A token taken out, repeated or moved: the descent's tree is lark's, or both refuse."""
    spans = [(t.start_pos, t.start_pos + len(t)) for t in tokenize(text)]
    start, end = data.draw(st.sampled_from(spans))
    piece = text[start:end]
    how = data.draw(st.sampled_from(["drop", "repeat", "move"]))
    if how == "drop":
        broken = text[:start] + " " + text[end:]
    elif how == "repeat":
        broken = text[:end] + " " + piece + text[end:]
    else:
        rest = text[:start] + " " + text[end:]
        at = data.draw(st.integers(0, len(rest)))
        broken = rest[:at] + " " + piece + " " + rest[at:]
    try:
        tokens = list(tokenize(broken))
    except CelSyntaxError:
        return  # the tokenizer's refusal, before either parser (parse_pattern leaves it to lark)
    tree = descend(tokens)
    assert (None if tree is None else shape(tree)) == by_lark(broken), broken
