"""Double-Top's two formulations (perf/doubletop.py) mean the same, and mean the definition.

On random price paths of alternating legs (sized so that tops are common), the μ
formulation and the resubscription formulation give the same matches on the
merged-DAG engine, on the literal evaluator of the algebra (the oracle), and
as :func:`perf.doubletop.scan` — the definition read directly.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.schema import Event, parse_stream_spec
from cesar.perf.doubletop import FORMULATIONS, QUOTE, matches, run, scan
from cesar.server.engine.workload import Workload

# Hypothesis draws (and shrinks towards) the first choices: those make a double top.
RISES = (1.25, 1.2, 1.3, 1.05)
FALLS = (0.8, 0.77, 0.7, 0.95)


def quotes(paths: dict[str, list[float]]) -> list[Event]:
    """Events day by day, stocks in name order; Prev is the stock's previous price."""
    out = []
    for day in range(1, max(len(p) for p in paths.values())):
        for name, path in sorted(paths.items()):
            if day < len(path):
                values = {"Name": name, "Price": path[day], "Prev": path[day - 1]}
                out.append(Event.of("Quote", day, day, values))
    return out


@st.composite
def price_paths(draw: st.DrawFn) -> dict[str, list[float]]:
    """Alternating legs of 1-3 steps whose sizes often make tops, with flat steps mixed in."""
    paths = {}
    for name in draw(st.sets(st.sampled_from("ABC"), min_size=1, max_size=2)):
        price, up = [110.0, 100.0], True
        for _ in range(draw(st.integers(5, 9))):
            steps = draw(st.sampled_from((2, 1, 3)))
            total = draw(st.sampled_from(RISES if up else FALLS))
            for _ in range(steps):
                price.append(round(price[-1] * total ** (1 / steps), 4))
            if draw(st.integers(0, 5)) == 5:
                price.append(price[-1])
            up = not up
        paths[name] = price
    return paths


def reference(formulation: str, events: list[Event]) -> list[tuple[object, ...]]:
    program = Workload.build([parse_stream_spec(QUOTE)], FORMULATIONS[formulation])
    final = program.queries[-1].name
    out = program.run(events, engine="reference")
    return matches([e for e in out if e.stream == final])  # type: ignore[return-value]


@settings(max_examples=60, deadline=None)
@given(price_paths())
def test_both_formulations_find_the_definition_s_matches(paths: dict[str, list[float]]) -> None:
    events = quotes(paths)
    expected = scan(events)
    assert run("mu", events)[0] == expected
    assert run("resubscription", events)[0] == expected
    assert reference("mu", events) == expected
    assert reference("resubscription", events) == expected


def test_a_double_top_with_short_wiggles() -> None:
    # A=100 (after a fall), up 2 steps to 125.0 (B), down 2 to 105 (C), up 2 to 130 (D),
    # down 3 to 95 (E), then up: one match. The same path with a one-step leg has none.
    top = [110, 100, 112, 125, 115, 105, 118, 130, 120, 110, 95, 99]
    events = quotes({"X": [float(p) for p in top]})
    found = scan(events)
    assert found == [("X", 1, 11, 100.0, 125.0, 105.0, 130.0, 95.0)]
    assert run("mu", events)[0] == run("resubscription", events)[0] == found
    wiggle = [110, 100, 125, 115, 105, 118, 130, 120, 110, 95, 99]
    assert scan(quotes({"X": [float(p) for p in wiggle]})) == []
