"""perf/hetero.py's turns: a build's processes merged into one report, each figure its least."""

from __future__ import annotations

import pytest

from cesar.perf.hetero import _least


def _turn(all_s: float, rise_s: float, digest: str = "d") -> dict:
    def figure(seconds: float) -> dict:
        return {"seconds": seconds, "digest": digest, "alerts": 3}

    return {
        "build": "b",
        "runs": [{"events": 10, "all": figure(all_s), "shapes": {"rise": figure(rise_s)}}],
    }


def test_each_measurement_keeps_the_least_of_its_turns():
    (run,) = _least([_turn(2.0, 0.5), _turn(1.5, 0.7), _turn(1.8, 0.6)])["runs"]
    assert (run["all"]["seconds"], run["shapes"]["rise"]["seconds"]) == (1.5, 0.5)


def test_turns_whose_outputs_differ_are_refused():
    with pytest.raises(AssertionError, match="outputs differ"):
        _least([_turn(2.0, 0.5), _turn(1.5, 0.7, digest="other")])
