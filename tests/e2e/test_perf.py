"""The benchmarks' ``--smoke`` modes run once in CI and their engines agree."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_engines_benchmark_smoke_outputs_agree():
    result = subprocess.run(
        [sys.executable, "-m", "perf.engines", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["outputs_agree"] is True
    reference, automaton = summary["records"]
    assert reference["outputs"] == automaton["outputs"] > 0
    assert automaton["counters"]["events"] == 300
    assert automaton["counters"]["edge_checks"] > 0
