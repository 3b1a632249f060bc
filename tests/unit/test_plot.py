"""perf/plot.py: whether a figure can be drawn here."""

import sys

from cesar.perf.plot import unavailable


def test_a_missing_matplotlib_is_said_before_a_load_test_not_found_after_it(monkeypatch):
    assert unavailable() is None  # the development install has it
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as after a plain pip install
    reason = unavailable()
    assert reason is not None and "pip install 'cesar[dev]'" in reason
