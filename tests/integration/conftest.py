"""Integration fixtures: a real ``cesar serve`` (front + 2 shards) in a temporary directory."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.serverproc import Server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "data").start()
    yield srv
    srv.stop()
