"""Every docstring example of every cesar module runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import cesar

# perf.flinkjob runs under .venv-flink (pyflink), not in the project's environment.
MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(cesar.__path__, "cesar.")
    if info.name != "cesar.perf.flinkjob"
)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_the_examples_are_collected() -> None:
    module = importlib.import_module("cesar.server.engine.workload")
    assert doctest.testmod(module).attempted > 0
