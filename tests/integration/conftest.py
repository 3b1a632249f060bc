"""Integration fixtures: a real ``cesar serve`` (front + 2 shards), a real local Spark session."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from cesar.perf.serverproc import Server
from cesar.server.feed.job import session as feed_session


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "data").start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one in-process Spark session (local[2]) the integration tests share."""
    session = feed_session("local[2]", "cesar-tests")
    yield session
    session.stop()
