"""The planner's own-condition index (server/engine/fitting.py) against judging one at a time.

Random patterns of every kind the engine runs (SEQ with Kleene closures, ANY, negations;
AND), registered and removed in random order: every probe gives each subscription exactly
the components :meth:`Fits.places` says the event may be, and the index is valid after
every change.  The planner's own property tests (test_plans.py) run it against the oracle.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cesar.automata.evaluate import Faults
from cesar.automata.functions import DEFAULT_FUNCTIONS
from cesar.automata.pattern.judging import Fits
from cesar.automata.pattern.parser import parse_pattern
from cesar.automata.pattern.reference import Judge
from cesar.automata.pattern.resolve import resolve
from cesar.server.engine.fitting import FitIndex
from tests.pattern_strategies import SCHEMAS, compiled_patterns, conjunctions, pattern_streams

SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


def fits_of(text):
    pattern = resolve(parse_pattern(text), SCHEMAS)
    return Fits(pattern, Judge(pattern, Faults(), DEFAULT_FUNCTIONS))


@settings(max_examples=200, **SETTINGS)
@given(
    texts=st.lists(
        st.sampled_from("PQRST").flatmap(lambda n: compiled_patterns(n) | conjunctions(n)),
        min_size=1,
        max_size=6,
    ),
    streams=pattern_streams(),
    data=st.data(),
)
def test_a_probe_gives_each_subscription_the_components_its_own_conditions_admit(
    texts, streams, data
):
    index = FitIndex()
    registered = {}
    events = [e for stream in streams.values() for e in stream]
    for number, text in enumerate(texts):
        name = f"q{number}"
        registered[name] = fits_of(text)
        index.add(name, registered[name])
        index.check_valid()
        if data.draw(st.booleans()):
            gone = data.draw(st.sampled_from(sorted(registered)))
            index.remove(gone)
            del registered[gone]
            index.check_valid()
        for event in events:
            want = {n: fits.places(event) for n, fits in registered.items()}
            assert index.probe(event) == {n: places for n, places in want.items() if places}
    assert len(index) == len(registered)
