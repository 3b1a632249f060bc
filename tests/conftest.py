"""Pytest configuration shared by every test folder: Hypothesis profiles, the JIT of Spark's
JVMs, the servers' plan constants, and which pytest-xdist worker runs the tests of the
in-process Spark session."""

import os

import pytest
from hypothesis import HealthCheck, settings
from xdist.scheduler import LoadFileScheduling

settings.register_profile(
    "ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "pure", max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")

# Every JVM the tests start (the shared SparkSession, each `cesar feed`, a standalone
# cluster) stops its JIT at C1: a test's JVM lives under a minute, and C2's compiling took a
# quarter of its CPU (the demo's test: 28-31 CPU-s with C2, 20-23 without), CPU the other
# workers need. The code the JVM runs is the same; a deployed feed keeps C2.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")

# Every server the tests start plans with the same constants, as this host measures them
# (`cesar serve --plan-costs`): the measurement took 0.25 CPU-s a server start, and ~130 start
# in a suite. tests/integration/test_serve.py's SIGTERM test starts one that measures.
os.environ.setdefault("CESAR_PLAN_COSTS", "look=3,chain=0.45,recompute=0.45")

SPARK_FILES = frozenset({"tests/integration/test_feed.py"})
"""The test files that use the in-process SparkSession (the ``spark`` fixture)."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadFileScheduling | None:
    """Under ``--dist loadfile`` (``make test``), the first worker takes the files of
    :data:`SPARK_FILES` before any other and the others never while they have other work:
    only that worker starts a Spark session (a JVM costs ~12 CPU-s to start, CPU the suite
    needs), and it starts it before the process has used gRPC (tests/integration/conftest.py)."""
    if config.getoption("dist") != "loadfile":
        return None

    class SparkOnTheFirstWorker(LoadFileScheduling):
        def _assign_work_unit(self, node) -> None:  # type: ignore[no-untyped-def]
            wants_spark = node.gateway.id == "gw0"
            for scope in self.workqueue:
                if (scope in SPARK_FILES) == wants_spark:
                    self.workqueue.move_to_end(scope, last=False)
                    break
            super()._assign_work_unit(node)

    return SparkOnTheFirstWorker(config, log)  # type: ignore[arg-type]


def spark_users(session: pytest.Session) -> list[pytest.Item]:
    """The collected tests that use the ``spark`` fixture."""
    return [item for item in session.items if "spark" in getattr(item, "fixturenames", ())]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every test that uses the ``spark`` fixture is in a file of :data:`SPARK_FILES`."""
    files = {item.nodeid.split("::")[0] for item in spark_users(session)}
    if not files <= SPARK_FILES:
        raise pytest.UsageError(
            f"add {sorted(files - SPARK_FILES)} to tests/conftest.py's SPARK_FILES"
        )
