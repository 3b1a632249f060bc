"""OR and nested groups against their oracle (automata/pattern/nested_reference.py).

The tree oracle is first checked against the flat oracle: a flat pattern under any
match, written as a nested one (wrapped in an OR of one part, or with a run of its
parts grouped in a SEQ of their own), gives the flat oracle's matches.  Then random
nested patterns (tests/pattern_strategies.py ``nested_patterns``: flat alternatives, and SEQ
and AND nested in one another) run on the single-automaton runtime, the engine in each
mode, and across a restart, each giving the tree oracle's multiset; the same under an
after-match policy, which takes the matches of every alternative together.
"""

import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from cesar.automata.compiler import compile_pattern
from cesar.automata.errors import CelSemanticError
from cesar.automata.normal import DnfLimitError
from cesar.automata.pattern.nested_reference import evaluate_nested
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.runtime import Runner
from cesar.automata.schema import epochs
from cesar.server.engine.engine import Engine, EngineOptions
from tests.pattern_strategies import (
    SCHEMAS,
    compiled_patterns,
    conjunctions,
    negated_patterns,
    nested_patterns,
    pattern_streams,
    through_a_restart,
)

MODES = {
    "full": EngineOptions(),
    "nomerge": EngineOptions(merge=False),
    "naive": EngineOptions(merge=False, indices=False),
}
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
SKIPPING = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much],
}
ANY_MATCH = compiled_patterns(strategies=("skip_till_any_match",)) | conjunctions()


def _structure(text: str) -> tuple[int, int]:
    """The span of the pattern's structure in ``text``: from PATTERN's end to WHERE, WITHIN
    or PUBLISH."""
    start = len("PATTERN ")
    end = min(text.find(w) for w in (" WHERE ", " WITHIN ", " PUBLISH ") if w in text)
    return start, end


def _parts(inner: str) -> list[str]:
    """The top-level parts of ``SEQ(...)``'s body, split at commas outside brackets."""
    parts, depth, current = [], 0, ""
    for char in inner:
        depth += (char in "([") - (char in ")]")
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()]


@st.composite
def regrouped(draw):
    """(flat text, the same pattern written nested)."""
    text = draw(ANY_MATCH | negated_patterns().filter(lambda t: "skip_till_any_match" in t))
    start, end = _structure(text)
    structure = text[start:end]
    match = re.fullmatch(r"(SEQ|AND)\((.*)\)", structure)
    if match is None or draw(st.booleans()):
        nested = f"OR({structure})"
    else:
        parts = _parts(match[2])
        if len(parts) < 2:
            nested = f"OR({structure})"
        else:
            i = draw(st.integers(0, len(parts) - 2))
            j = draw(st.integers(i + 2, len(parts)))
            inner = f"{match[1]}({', '.join(parts[i:j])})"
            if all(p.startswith("!(") for p in parts[i:j]):
                reject()
            nested = f"{match[1]}({', '.join([*parts[:i], inner, *parts[j:]])})"
    return text, text[:start] + nested + text[end:]


@settings(max_examples=300, **SETTINGS)
@given(pair=regrouped(), streams=pattern_streams())
def test_the_tree_oracle_gives_the_flat_oracles_matches(pair, streams):
    flat, nested = pair
    compiled = compile_pattern(nested, SCHEMAS, build=False)
    assert compiled.nested is not None
    expected = Counter(evaluate(resolve(parse_pattern(flat), SCHEMAS), streams))
    assert Counter(evaluate_nested(compiled.nested, streams)) == expected


def _automata(text):
    try:
        return compile_pattern(text, SCHEMAS).automata
    except DnfLimitError:
        reject()


def _subscribed(engine, texts):
    """``engine`` with ``texts`` subscribed as ``q0``, ``q1``…, and all their automata."""
    automata = []
    for n, text in enumerate(texts):
        mine = _automata(text)
        engine.subscribe(f"q{n}", mine)
        automata.extend(mine)
    return engine, automata


def _oracle(texts, streams) -> Counter:
    """What ``texts`` publish by the oracles: the tree oracle, or the flat one for a pattern
    that is flat after all."""
    expected: Counter = Counter()
    for text in texts:
        compiled = compile_pattern(text, SCHEMAS, build=False)
        if compiled.nested is None:
            expected.update(evaluate(resolve(parse_pattern(text), SCHEMAS), streams))
        else:
            expected.update(evaluate_nested(compiled.nested, streams))
    return expected


@settings(max_examples=150, **SETTINGS)
@given(text=nested_patterns(), streams=pattern_streams())
def test_the_runtime_and_the_engine_give_the_tree_oracles_matches(text, streams):
    compiled = compile_pattern(text, SCHEMAS, build=False)
    assert compiled.nested is not None or " OR(" not in text
    automata = _automata(text)
    events = [e for stream in streams.values() for e in stream]
    if compiled.nested is None:
        expected = Counter(evaluate(resolve(parse_pattern(text), SCHEMAS), streams))
    else:
        expected = Counter(evaluate_nested(compiled.nested, streams))
    assert Counter(Runner(automata).run(events)) == expected
    engine = Engine()
    engine.subscribe("q", automata)
    assert Counter(engine.run(events)) == expected
    engine.check_valid()


@settings(max_examples=150, **SETTINGS)
@given(text=nested_patterns(shape="ordered"), streams=pattern_streams())
def test_seq_and_and_nested_in_one_another_give_the_tree_oracles_matches(text, streams):
    """The partial-order join (automata/pattern/poset.py) on the runtime and the engine."""
    compiled = compile_pattern(text, SCHEMAS, build=False)
    assert compiled.nested is not None
    assert not all(alternative.flat for alternative in compiled.nested.alternatives)
    automata = _automata(text)
    events = [e for stream in streams.values() for e in stream]
    expected = Counter(evaluate_nested(compiled.nested, streams))
    assert Counter(Runner(automata).run(events)) == expected
    for options in MODES.values():
        engine = Engine(options)
        engine.subscribe("q", automata)
        assert Counter(engine.run(events)) == expected
        engine.check_valid()


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=100, **SETTINGS)
@given(
    texts=st.lists(nested_patterns() | nested_patterns(shape="ordered"), min_size=1, max_size=3),
    streams=pattern_streams(),
)
def test_the_engine_gives_each_nested_subscription_its_matches(mode, texts, streams):
    texts = [text.replace(" PUBLISH P", f" PUBLISH P{n}") for n, text in enumerate(texts)]
    events = [e for stream in streams.values() for e in stream]
    engine, _ = _subscribed(Engine(MODES[mode]), texts)
    expected = _oracle(texts, streams)
    assert Counter(engine.run(events)) == expected
    engine.check_valid()


@settings(max_examples=60, **SETTINGS)
@given(
    texts=st.lists(nested_patterns() | nested_patterns(shape="ordered"), min_size=1, max_size=2),
    streams=pattern_streams(),
    data=st.data(),
)
def test_a_restored_engine_runs_nested_patterns_on_as_if_never_stopped(texts, streams, data):
    texts = [text.replace(" PUBLISH P", f" PUBLISH P{n}") for n, text in enumerate(texts)]
    for text in texts:
        _automata(text)
    parts = epochs(sorted((e for s in streams.values() for e in s), key=lambda e: e.t1))
    cut = data.draw(st.integers(0, len(parts)))
    builds = [lambda text=text: compile_pattern(text, SCHEMAS).automata for text in texts]
    expected, got = through_a_restart(builds, parts, cut)
    assert got == expected


POLICIES = ["PAST LAST ROW", "TO NEXT ROW", "PAST LAST EVENT", "TO FIRST", "TO LAST"]


@st.composite
def skipping_nested(draw, name="P"):
    """A random nested pattern (flat alternatives) under a random after-match policy with a
    window; those a policy cannot apply to (an alternative that is an AND, a variable not in
    every alternative, partitions that differ) are refused by the compiler and not drawn."""
    text = draw(nested_patterns(name))
    if " WITHIN " not in text:
        text = text.replace(f" PUBLISH {name}", f" WITHIN {draw(st.integers(0, 6))} PUBLISH {name}")
    policy = draw(st.sampled_from(POLICIES))
    if policy in ("TO FIRST", "TO LAST"):
        variables = sorted(set(re.findall(r"\b([a-h]\d)\b", text.split(" WHERE ")[0])))
        policy = f"{policy} {draw(st.sampled_from(variables))}"
    text = text.replace(" PUBLISH ", f" AFTER MATCH SKIP {policy} PUBLISH ")
    try:
        compile_pattern(text, SCHEMAS)
    except CelSemanticError:
        reject()
    return text


@st.composite
def returning_nested(draw, name="P"):
    """A random nested pattern whose RETURN says which alternative matched and reads up to
    two singleton variables, bound in some alternatives and not in others."""
    text = draw(nested_patterns(name))
    singletons = sorted(
        c.var for c in parse_pattern(text).components if not (c.negated or c.kleene)
    )
    chosen = (
        draw(st.lists(st.sampled_from(singletons), max_size=2, unique=True)) if singletons else []
    )
    items = ["ALTERNATIVE() AS alt", *(f"{var}.k" for var in chosen)]
    return text.replace(f" PUBLISH {name}", f" RETURN {', '.join(items)} PUBLISH {name}")


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=40, **SKIPPING)
@given(
    texts=st.lists(skipping_nested() | nested_patterns(), min_size=1, max_size=3),
    streams=pattern_streams(),
)
def test_a_policy_on_a_nested_pattern_judges_its_alternatives_together(mode, texts, streams):
    """Every engine mode and the runtime publish, once the input ends, the matches the tree
    oracle keeps under each subscription's policy, beside subscriptions without one."""
    texts = [text.replace(" PUBLISH P", f" PUBLISH P{n}") for n, text in enumerate(texts)]
    events = [e for stream in streams.values() for e in stream]
    engine, automata = _subscribed(Engine(MODES[mode]), texts)
    expected = _oracle(texts, streams)
    assert Counter(engine.run(events)) + Counter(engine.finish()) == expected
    engine.check_valid()
    if mode == "full":
        runner = Runner(automata)
        assert Counter(runner.run(events)) + Counter(runner.finish()) == expected


@settings(max_examples=40, **SKIPPING)
@given(
    texts=st.lists(skipping_nested() | returning_nested(), min_size=1, max_size=2),
    streams=pattern_streams(),
    data=st.data(),
)
def test_a_restored_engine_runs_policies_and_returns_on_as_if_never_stopped(texts, streams, data):
    texts = [text.replace(" PUBLISH P", f" PUBLISH P{n}") for n, text in enumerate(texts)]
    parts = epochs(sorted((e for s in streams.values() for e in s), key=lambda e: e.t1))
    cut = data.draw(st.integers(0, len(parts)))
    builds = [lambda text=text: compile_pattern(text, SCHEMAS).automata for text in texts]
    expected, got = through_a_restart(builds, parts, cut)
    assert got == expected


@pytest.mark.parametrize("mode", sorted(MODES))
@settings(max_examples=50, **SETTINGS)
@given(texts=st.lists(returning_nested(), min_size=1, max_size=2), streams=pattern_streams())
def test_return_reads_which_alternative_matched_as_the_tree_oracle_says(mode, texts, streams):
    texts = [text.replace(" PUBLISH P", f" PUBLISH P{n}") for n, text in enumerate(texts)]
    events = [e for stream in streams.values() for e in stream]
    engine, automata = _subscribed(Engine(MODES[mode]), texts)
    expected = _oracle(texts, streams)
    assert Counter(engine.run(events)) == expected
    engine.check_valid()
    if mode == "full":
        runner = Runner(automata)
        assert Counter(runner.run(events)) == expected
