"""WITHIN is FILTER{DUR <= window + 1} over the whole operand, on every evaluator.

The translation pushes the bound into the operand's NEXT and FOLD steps
(:func:`cesar.automata.translate.windowed`); the oracle is the plain reading,
one FILTER over the operand, run by the reference evaluator.  Streams carry
durations and simultaneous events.
"""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from cesar.automata.schema import Event, parse_stream_spec
from cesar.server.engine.workload import Workload

SCHEMA = parse_stream_spec("S(x:int,y:float)[min]")
OPERANDS = (
    "FILTER{x > 0} S",
    "S NEXT{$2.x > $1.x} S",
    "S NEXT{} S NEXT{$2.y < $1.y} S",
    "(S NEXT{} S) NEXT{$2.x = $1.x} S",
    "(SELECT *, 1 AS n FROM S) FOLD{$2.x >= $.x, $2.y > 0, $.n + 1 AS n} S",
    "SELECT x, n FROM (SELECT *, 1 AS n FROM S) FOLD{, , $.n + 1 AS n} S",
)
WINDOWS = st.one_of(
    st.integers(0, 6).map(lambda ticks: (str(ticks), ticks)),
    st.sampled_from([("2 MIN", 2), ("90 SEC", 1.5), ("0 HOUR", 0), ("1 HOUR", 60)]),
)


@st.composite
def streams(draw: st.DrawFn) -> list[Event]:
    """Up to 12 events: t1 steps of 0 (simultaneous) to 3, durations of 0 to 2 ticks."""
    events, t1 = [], 0
    for _ in range(draw(st.integers(0, 12))):
        t1 += draw(st.integers(0, 3))
        t0 = t1 - draw(st.integers(0, 2))
        values = {"x": draw(st.integers(0, 3)), "y": draw(st.sampled_from([-1.0, 0.5, 2.0]))}
        events.append(Event.of("S", t0, t1, values))
    return events


def outputs(text: str, events: list[Event], engine: str) -> Counter[Event]:
    return Counter(Workload.build([SCHEMA], [("w", text)]).run(events, engine=engine))


@given(st.sampled_from(OPERANDS), WINDOWS, streams())
def test_within_is_a_filter_on_the_duration_of_the_whole(operand, window, events):
    text, ticks = window
    expected = outputs(f"FILTER{{DUR <= {ticks} + 1}} ({operand})", events, "reference")
    for engine in ("reference", "automaton", "engine"):
        assert outputs(f"{operand} WITHIN {text}", events, engine) == expected, engine
