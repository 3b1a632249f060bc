"""Runs on the sample (the console's "Try a query"): each budget stops a runaway on its own."""

import pytest

from cesar.server.console import sample
from cesar.server.front.errors import ResourceExhausted

RUNAWAY = "PATTERN AND(Stock a, Stock b, Stock c, Stock d, Stock e) PUBLISH F"


def test_a_runaway_is_stopped_at_its_memory_budget(monkeypatch):
    # Time enough that memory runs out first however busy the machine (a run takes about
    # 4 s to reach 512 MiB alone); the console's own test meets whichever budget comes first.
    monkeypatch.setattr(sample, "RUN_SECONDS", 300.0)
    with pytest.raises(ResourceExhausted, match="more than 512 MiB"):
        sample.SampleRuns().run(RUNAWAY)


def test_a_runaway_is_stopped_at_its_time_budget(monkeypatch):
    monkeypatch.setattr(sample, "RUN_SECONDS", 1.0)
    with pytest.raises(ResourceExhausted, match="more than 1 s"):
        sample.SampleRuns().run(RUNAWAY)
