"""The event automata agree with the reference evaluator (the oracle) on random inputs.

Random algebra expressions of depth ≤ 4 using all seven operators, compiled by
:mod:`automata.construct` (resubscription included) and run epoch by epoch by
:mod:`automata.runtime`, must output the same multiset of events as
:mod:`automata.reference` over random streams with durations and simultaneous
events.  ``pytest -m long`` runs many more examples.
"""

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings

from cesar.automata.construct import build_automata
from cesar.automata.reference import evaluate
from cesar.automata.runtime import Runner
from cesar.automata.schema import StreamSchema
from tests.algebra_strategies import expressions, input_streams, resubscriptions


def check(expr, streams):
    expected = Counter(evaluate(expr, streams))
    automata = build_automata(expr, StreamSchema("out", expr.attributes))
    events = [e for stream in streams.values() for e in stream]
    assert Counter(Runner(automata).run(events)) == expected


SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}


@settings(max_examples=1000, **SETTINGS)
@given(expressions(), input_streams())
def test_automata_output_equals_the_reference(expr, streams):
    check(expr, streams)


@settings(max_examples=500, **SETTINGS)
@given(resubscriptions(), input_streams())
def test_resubscription_output_equals_the_reference(expr, streams):
    """Right operands that are NEXT, FOLD or ∪ run as internal automata read in the same epoch."""
    check(expr, streams)


@pytest.mark.long
@settings(max_examples=50_000, **SETTINGS)
@given(expressions(), input_streams())
def test_automata_output_equals_the_reference_long(expr, streams):
    check(expr, streams)
