"""The Algebra message carries any well-typed algebra expression: same meaning, stable form.

``from_algebra(to_algebra(e))`` puts predicates in canonical form, so it means
what ``e`` means (checked with the reference evaluator on random streams) and
a second round trip changes nothing.
"""

from collections import Counter

from hypothesis import HealthCheck, given, settings

from cesar.automata.reference import evaluate
from cesar.automata.schema import StreamSchema
from cesar.server.wire.algebra_proto import from_algebra, to_algebra
from tests.algebra_strategies import SCHEMAS, expressions, input_streams

CATALOG = {name: StreamSchema(name, columns) for name, columns in SCHEMAS.items()}


def _round_trip(expr):  # type: ignore[no-untyped-def]
    message = to_algebra(expr)
    wire = type(message).FromString(message.SerializeToString())
    return from_algebra(wire, CATALOG, "out")


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions(), input_streams())
def test_from_algebra_inverts_to_algebra(expr, streams):
    back, output, reads = _round_trip(expr)
    assert output.attributes == expr.attributes
    assert reads <= set(SCHEMAS)
    assert Counter(evaluate(back, streams)) == Counter(evaluate(expr, streams))
    assert _round_trip(back)[0] == back
