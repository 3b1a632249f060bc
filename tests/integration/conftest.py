"""Integration fixtures: a real ``cesar serve`` (front + 2 shards), a real local Spark session."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cesar.perf.serverproc import Server
from cesar.server.feed.job import session as feed_session
from tests.conftest import spark_users


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "data").start()
    yield srv
    srv.stop()


STARTED: list[SparkSession] = []
"""The Spark session, once :func:`pytest_collection_finish` started it."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the Spark session before any test of this process runs, if one of them needs it.

    Start order, not a retry.  Spark's JVM is launched by a fork and lives on a pipe to its
    standard input (it exits when that pipe ends) and py4j sockets.  In a pytest-xdist worker
    that had run the gRPC tests first, on a busy machine, it exited before its gateway
    answered (``JAVA_GATEWAY_EXITED``, gRPC's ``epoll_wait error: Bad file descriptor`` in
    the log just before): descriptors shared by number between gRPC's closed servers and
    channels and the JVM's launch.  Launched before this process has opened any gRPC
    descriptor, the JVM's pipe and sockets are never numbers gRPC held.  Each worker collects
    every test, but under ``make test`` only the first worker runs the feed's tests
    (tests/conftest.py's scheduler), so only it starts one; another worker given them all
    the same (its own work done) starts its own in the fixture.
    (``tests/e2e/test_busy.py`` runs both kinds in one process beside CPU hogs.)
    """
    first = os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0"
    if first and spark_users(session):
        STARTED.append(feed_session("local[2]", "cesar-tests"))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one in-process Spark session (local[2]) the integration tests share."""
    session = STARTED[0] if STARTED else feed_session("local[2]", "cesar-tests")
    yield session
    session.stop()
