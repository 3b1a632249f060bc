"""Try a query before subscribing: ``cesar run`` in a child process, on the bundled sample or
on the server's own recent events.

A run reads the bundled day of quotes (:data:`~cesar.examples.STOCKS_SAMPLE`, 2,340
one-minute quotes of six stocks, the stream ``Stock``), or the latest
:data:`RECENT_EVENTS` events of the server's event log of the input streams the query reads
(:func:`recent_events`), with the engine a server runs.  A child process keeps it off the
front's interpreter: a runaway query costs one core for at most :data:`RUN_SECONDS` and
:data:`RUN_MEMORY_BYTES` of memory, never the events the server is processing.  One run at
a time per console (:class:`SampleRuns`); the first :data:`SHOWN` alerts are returned with
the count of all.
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

from cesar.automata.schema import Event, StreamSchema
from cesar.examples import STOCKS_SAMPLE, STOCKS_SAMPLE_SPEC
from cesar.server.front.catalog import connect
from cesar.server.front.errors import InvalidArgument, ResourceExhausted
from cesar.server.wire.arrowevents import events_of
from cesar.server.wire.arrowevents import read as read_arrow
from cesar.server.wire.convert import trusted_event
from cesar.server.wire.eventfile import input_line
from cesar.v1 import cesar_pb2 as pb

RUN_SECONDS = 20.0
"""Seconds a run on the sample may take before it is stopped."""
RUN_MEMORY_BYTES = 512 << 20
"""Memory a run on the sample may take (its data segment: ``RLIMIT_DATA``); past it the run
fails with MemoryError and is answered as over its budget."""
SHOWN = 100
"""Alerts of a run returned (all are counted)."""
SAMPLE_QUOTES = 2_340
"""Quotes in the bundled sample."""
RECENT_EVENTS = 50_000
"""Events a run on recent events reads at most: the latest of the log, of the input streams
the query reads (compacted batches are gone)."""


class SampleRuns:
    """Runs on the sample, one at a time."""

    def __init__(self) -> None:
        self.one = threading.Lock()

    def run(
        self, query: str, recent: tuple[list[StreamSchema], list[Event]] | None = None
    ) -> dict[str, Any]:
        """``query``'s alerts on the sample, or on ``recent``'s events of its streams:
        ``{"quotes", "alerts", "shown", "source"}`` (``quotes``: the events read).

        InvalidArgument with ``cesar run``'s message (line, column, caret) if it does not
        compile against the streams; ResourceExhausted while another run goes on, or past
        RUN_SECONDS or RUN_MEMORY_BYTES.
        """
        if not self.one.acquire(blocking=False):
            raise ResourceExhausted("a run on the sample is under way: one at a time")
        try:
            if recent is None:
                ran = _run(query, [STOCKS_SAMPLE_SPEC], STOCKS_SAMPLE)
                return {**ran, "quotes": SAMPLE_QUOTES, "source": "sample"}
            schemas, events = recent
            with tempfile.TemporaryDirectory(prefix="cesar-recent-") as scratch:
                path = Path(scratch) / "events.jsonl"
                path.write_text("".join(input_line(e) + "\n" for e in events))
                ran = _run(query, [s.spec() for s in schemas], path)
            return {**ran, "quotes": len(events), "source": "recent"}
        finally:
            self.one.release()


def recent_events(
    catalog: Path, streams: frozenset[str], limit: int = RECENT_EVENTS
) -> list[Event]:
    """The latest ``limit`` events of ``streams`` in the event log of the catalog at
    ``catalog``, in ``t1`` order (arrival order within one ``t1``).

    Reads through a connection of its own (read-only; the front keeps writing), from the
    newest batch back.  O(the batches read).
    """
    db = connect(catalog, readonly=True)
    try:
        found: list[list[Event]] = []
        count = 0
        for (payload,) in db.execute("SELECT payload FROM batches ORDER BY number DESC"):
            batch = pb.PublishRequest.FromString(payload)
            events = [trusted_event(e) for e in batch.events if e.stream in streams]
            if batch.arrow_events:
                routed = events_of(read_arrow(batch.arrow_events))
                events += [e for e in routed if e.stream in streams]
            found.append(events)
            count += len(events)
            if count >= limit:
                break
    finally:
        db.close()
    events = [e for batch in reversed(found) for e in batch]
    return sorted(events, key=lambda e: e.t1)[-limit:]


def _run(query: str, specs: list[str], events: Path) -> dict[str, Any]:
    streams = [arg for spec in specs for arg in ("--stream", spec)]
    with tempfile.TemporaryDirectory(prefix="cesar-try-") as scratch:
        path = Path(scratch) / "query.cel"
        path.write_text(query)
        child = subprocess.Popen(
            [
                *(sys.executable, "-m", "cesar.server.cli.main", "run", "--quiet"),
                *streams,
                *("--query", str(path), str(events)),
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
    return {"alerts": alerts, "shown": shown}
