"""The integration tests pass on a busy machine: gRPC's tests and Spark's in one process,
gRPC's first, beside a CPU hog (with the suite's other workers, both cores busy): the order and
load under which a pytest worker once lost Spark's JVM (``JAVA_GATEWAY_EXITED``; see
``tests/integration/conftest.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
CHOSEN = [
    "integration/test_service.py::test_alerts_equal_cesar_run_and_seqs_count_from_one",
    "integration/test_feed.py::test_key_partitioned_subscriptions_each_shard_gets_only_its_keys",
]


def test_grpc_then_spark_in_one_process_beside_a_cpu_hog(tmp_path: Path) -> None:
    # niced: it fills a core the suite leaves idle (alone, one whole core), and yields to the
    # suite's other workers instead of taking a third of their CPU for a minute
    hogs = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while True: pass"])]
    try:
        run = subprocess.run(
            [
                *(sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider"),
                *("-q", "--basetemp", str(tmp_path / "base")),
                *(str(TESTS / test) for test in CHOSEN),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            cwd=TESTS.parent,
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout
