"""server/engine/modes.py names, without importing them, the evaluators workload.py runs."""

from cesar.server.engine.modes import ENGINE_NAMES
from cesar.server.engine.workload import ENGINE_MODES


def test_the_command_line_offers_every_evaluator_the_workload_runs_in_its_order():
    assert tuple(ENGINE_MODES) == ENGINE_NAMES
