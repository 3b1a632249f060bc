"""Run the installed ``cesar`` console script as a user would."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

CESAR = Path(sys.executable).with_name("cesar")


class Cesar:
    """The console script in a scratch directory; ``run_args`` go to every ``cesar run``."""

    def __init__(self, tmp_path: Path, *run_args: str) -> None:
        self.tmp = tmp_path
        self.run_args = run_args

    def write(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(CESAR), *map(str, args)], capture_output=True, text=True, timeout=120
        )

    def query(
        self, streams: list[str], queries: dict[str, str], events: list[dict] | str, *extra: str
    ) -> list[dict]:
        """Run queries (file stem → CEL) over events; return the output records."""
        args: list[str | Path] = ["run"]
        for spec in streams:
            args += ["--stream", spec]
        for stem, text in queries.items():
            args += ["--query", self.write(f"{stem}.cel", text)]
        if isinstance(events, str):
            path = self.write("events.csv", events)
        else:
            path = self.write("events.jsonl", "".join(json.dumps(e) + "\n" for e in events))
        result = self.run(*args, *self.run_args, *extra, path)
        assert result.returncode == 0, result.stderr
        return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture
def cesar(tmp_path: Path) -> Cesar:
    return Cesar(tmp_path)
