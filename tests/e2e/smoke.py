"""Running a benchmark's ``--smoke`` mode from the tests (tests/e2e/test_perf*.py)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def smoke_json(module: str, out: Path, timeout: int, *extra: str) -> dict:
    """Run ``python -m MODULE --smoke --json OUT [EXTRA…]``; it must exit 0; the JSON it wrote."""
    result = subprocess.run(
        [sys.executable, "-m", module, "--smoke", "--json", str(out), *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text())
