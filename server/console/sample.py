"""Try a query on the bundled sample before subscribing: ``cesar run`` in a child process.

The run reads the bundled day of quotes (:data:`~cesar.examples.STOCKS_SAMPLE`, 2,340
one-minute quotes of six stocks, the stream ``Stock``) with the engine a server runs.  A
child process keeps it off the front's interpreter: a runaway query costs one core for at
most :data:`RUN_SECONDS` and :data:`RUN_MEMORY_BYTES` of memory, never the events the server
is processing.  One run at a time
per console (:class:`SampleRuns`); the first :data:`SHOWN` alerts are returned with the
count of all.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from cesar.examples import STOCKS_SAMPLE, STOCKS_SAMPLE_SPEC
from cesar.server.front.errors import InvalidArgument, ResourceExhausted

RUN_SECONDS = 20.0
"""Seconds a run on the sample may take before it is stopped."""
RUN_MEMORY_BYTES = 512 << 20
"""Memory a run on the sample may take (its data segment: ``RLIMIT_DATA``); past it the run
fails with MemoryError and is answered as over its budget."""
SHOWN = 100
"""Alerts of a run returned (all are counted)."""
SAMPLE_QUOTES = 2_340
"""Quotes in the bundled sample."""


class SampleRuns:
    """Runs on the sample, one at a time."""

    def __init__(self) -> None:
        self.one = threading.Lock()

    def run(self, query: str) -> dict[str, Any]:
        """``query``'s alerts on the sample: ``{"quotes", "alerts", "shown"}``.

        InvalidArgument with ``cesar run``'s message (line, column, caret) if it does not
        compile against ``Stock``; ResourceExhausted while another run goes on, or past
        RUN_SECONDS.
        """
        if not self.one.acquire(blocking=False):
            raise ResourceExhausted("a run on the sample is under way: one at a time")
        try:
            return _run(query)
        finally:
            self.one.release()


def _run(query: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cesar-try-") as scratch:
        path = Path(scratch) / "query.cel"
        path.write_text(query)
        child = subprocess.Popen(
            [
                *(sys.executable, "-m", "cesar.server.cli.main", "run", "--quiet"),
                *("--stream", STOCKS_SAMPLE_SPEC, "--query", str(path), str(STOCKS_SAMPLE)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        with contextlib.suppress(ProcessLookupError):  # before it has imported much
            resource.prlimit(child.pid, resource.RLIMIT_DATA, (RUN_MEMORY_BYTES, RUN_MEMORY_BYTES))
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            child.kill()

        timer = threading.Timer(RUN_SECONDS, expire)
        timer.start()
        peak = 0
        try:
            assert child.stdout is not None and child.stderr is not None
            shown: list[dict[str, Any]] = []
            alerts = 0
            for line in child.stdout:
                alerts += 1
                if len(shown) < SHOWN:
                    shown.append(json.loads(line))
            error = child.stderr.read()
            _, status, usage = os.wait4(child.pid, 0)
            child.returncode = code = os.waitstatus_to_exitcode(status)
            peak = usage.ru_maxrss << 10
        finally:
            timer.cancel()
    if expired.is_set():
        raise ResourceExhausted(
            f"the run on the sample took more than {RUN_SECONDS:g} s and was stopped"
        )
    if code != 0 and (error.rstrip().endswith("MemoryError") or code < 0):
        # An allocation refused at the limit is a MemoryError where Python can raise one, and
        # a death by signal (abort, segmentation fault) where it cannot: either is the budget.
        raise ResourceExhausted(
            f"the run on the sample took more than {RUN_MEMORY_BYTES >> 20} MiB and was stopped"
            f" (peak {peak >> 20} MiB)"
        )
    if code != 0:
        raise InvalidArgument(error.strip().removeprefix("cesar: "))
    return {"quotes": SAMPLE_QUOTES, "alerts": alerts, "shown": shown}
