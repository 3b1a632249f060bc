"""The planner's own-condition index (server/engine/fitting.py) against judging one at a time.

Random patterns of every kind the engine runs (SEQ with Kleene closures, ANY, negations;
AND), registered and removed in random order: every probe gives the signatures an event
fits, each once, and through them each subscription exactly the components
:meth:`Fits.places` says the event may be; the index is valid after every change.  The
planner's own property tests (test_plans.py) run it against the oracle.
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
        steps = len(registered[name].pattern.steps)
        always = data.draw(st.sets(st.integers(0, steps - 1)))
        index.add(name, registered[name], always)
        index.check_valid()
        if data.draw(st.booleans()):
            gone = data.draw(st.sampled_from(sorted(registered)))
            index.remove(gone)
            del registered[gone]
            index.check_valid()
        for event in events:
            hits = index.probe(event)
            assert len(hits) == len(set(hits))
            for fits in registered.values():
                steps = range(len(fits.pattern.steps))
                assert [n for n in steps if fits.signature(n) in hits] == fits.places(event)
    assert len(index) == len(registered)
