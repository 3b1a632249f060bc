"""The pure build stays equal: a smaller set of the property tests, run with CESAR_PURE=1.

The rest of the suite runs the compiled build (tests/unit/test_build.py says so); these
compare the pure modules' fast paths (merged DAG, single automaton, shared steps, the
indices' state machines, alerts written to bytes and numbered from them, events read from
bytes) with the oracles, with the ``pure`` Hypothesis profile.
"""

import os
import subprocess
import sys

from tests.e2e.smoke import ROOT

PURE_PROPERTIES = [
    "tests/property/test_engine.py",
    "tests/property/test_runtime.py",
    "tests/property/test_static.py",
    "tests/property/test_masks.py",
    "tests/property/test_thresholds.py",
    "tests/property/test_stepping.py",
    "tests/property/test_alertbytes.py",
    "tests/property/test_protocolumns.py",
]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
SELECTED = (
    "each_subscription_gets_exactly_its_reference_output and full or Machine"
    " or test_automata_output_equals or written_event or read_events_equal or numbered_alerts"
)


def test_the_property_tests_pass_on_the_pure_build():
    done = subprocess.run(
        [*PYTEST, "--hypothesis-profile=pure", "-k", SELECTED, *PURE_PROPERTIES],
        cwd=ROOT,
        env={**os.environ, "CESAR_PURE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert "\n9 passed" in done.stdout
