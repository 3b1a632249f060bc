"""Lazy runs sharing buffers (automata/pattern/buffers.py's BufferPool) against the oracle.

Random patterns a lazy plan can run, subscribed three times on one planned engine: as
drawn, with their variables named apart and another window, and with a third window.
Their components take the same events, so their lazy runs share each buffer, which is
kept for the longest window.  Forced switches between every plan at random epochs (an
old and a new run of one subscription share buffers too) and a snapshot taken and
restored mid-stream give each subscription the oracle's matches.
"""

import pickle
import re
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from cesar.automata.schema import epochs
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from tests.pattern_strategies import SCHEMAS, automata_of, pattern_streams
from tests.property.test_plans import choices, lazy_patterns

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

VARIABLES = re.compile(r"(?<!')\b(a|b|c|n1|n2|y)\b(?!')")


def copy(text: str, name: str, window: int, rename: bool) -> str:
    """``text`` publishing ``name`` within ``window``, its variables renamed if asked."""
    if rename:
        text = VARIABLES.sub(lambda m: f"z{m.group(1)}", text)
    text = re.sub(r"WITHIN \d+", f"WITHIN {window}", text)
    return text.replace("PUBLISH P", f"PUBLISH {name}")


@settings(max_examples=120, **SETTINGS)
@given(
    text=lazy_patterns("P"),
    windows=st.tuples(st.integers(0, 9), st.integers(0, 9)),
    streams=pattern_streams(),
    data=st.data(),
)
def test_runs_sharing_buffers_give_each_the_oracles_matches(text, windows, streams, data):
    texts = [text, copy(text, "Q", windows[0], True), copy(text, "R", windows[1], False)]
    patterns = [resolve(parse_pattern(t), SCHEMAS) for t in texts]

    def subscribed(saved=None):
        engine = Engine(EngineOptions(plans=True))
        if saved is not None:
            prepare(engine, saved)
        for pattern in patterns:
            name = pattern.output.name
            since = None if saved is None else saved.since[name]
            engine.subscribe(name, automata_of(pattern), since, pattern)
        if saved is not None:
            restore(engine, saved)
        return engine

    engine = subscribed()
    parts = epochs([e for stream in streams.values() for e in stream])
    cut = data.draw(st.integers(0, len(parts)))
    got: Counter = Counter()
    for number, epoch in enumerate(parts):
        if number == cut:
            saved = RunSnapshot.from_data(pickle.loads(pickle.dumps(capture(engine).to_data())))
            engine = subscribed(saved)
        for pattern in patterns:
            name = pattern.output.name
            plans = choices(pattern)
            if name in engine.planner.planned and data.draw(st.integers(0, 2)) == 0:
                engine.replan(name, data.draw(st.sampled_from(plans)))
        got.update(engine.process(epoch))
        engine.check_valid()
    want = Counter(e for pattern in patterns for e in evaluate(pattern, streams))
    assert got == want
