"""Lazy runs sharing buffers (automata/pattern/buffers.py's BufferPool) against the oracle.

Random patterns a lazy plan can run, subscribed three times on one planned engine: as
drawn, with their variables named apart and another window, and with a third window.
Their components take the same events, so their lazy runs share each buffer, which is
kept for the longest window.  Forced switches between every plan at random epochs (an
old and a new run of one subscription share buffers too) and a snapshot taken and
restored mid-stream give each subscription the oracle's matches.
"""

import re
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import evaluate
from cesar.automata.pattern.resolve import resolve
from tests.pattern_strategies import SCHEMAS, pattern_streams
from tests.property.test_plans import lazy_patterns, restarted_run

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

VARIABLES = re.compile(r"(?<!')\b(a|b|c|n1|n2|y)\b(?!')")


def copy(text: str, name: str, window: int, rename: bool) -> str:
    """``text`` publishing ``name`` within ``window``, its variables renamed if asked."""
    if rename:
        text = VARIABLES.sub(lambda m: f"z{m.group(1)}", text)
    text = re.sub(r"WITHIN \d+", f"WITHIN {window}", text)
    return text.replace("PUBLISH P", f"PUBLISH {name}")


@settings(max_examples=60, **SETTINGS)
@given(
    text=lazy_patterns("P"),
    windows=st.tuples(st.integers(0, 9), st.integers(0, 9)),
    streams=pattern_streams(),
    data=st.data(),
)
def test_runs_sharing_buffers_give_each_the_oracles_matches(text, windows, streams, data):
    texts = [text, copy(text, "Q", windows[0], True), copy(text, "R", windows[1], False)]
    patterns = [resolve(parse_pattern(t), SCHEMAS) for t in texts]
    got = restarted_run(patterns, streams, data, odds=3, check=True)
    want = Counter(e for pattern in patterns for e in evaluate(pattern, streams))
    assert got == want
