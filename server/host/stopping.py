"""Stopping a long-running process on SIGTERM or SIGINT, or when one of its threads asks.

A Python signal handler runs in the main thread between two bytecodes, possibly
while that thread holds the lock inside :meth:`threading.Event.wait`; a handler
that calls :meth:`threading.Event.set` then waits for that lock forever.  The
front hung so at shutdown, once in many hundred stops.  The handler here only
appends to a list (no lock); :meth:`Stopping.wait`, in the main thread, turns
the signal into the event the other threads read.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


class Stopping:
    """Whether to stop: a signal received, or :meth:`request` called from any thread.

    >>> stopping = Stopping()
    >>> stopping.wait(0)
    False
    >>> stopping.request()
    >>> stopping.wait(0), stopping.event.is_set()
    (True, True)
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signals: list[int] = []

    def install(self, *signums: signal.Signals) -> Stopping:
        """Record ``signums`` (main thread only, as :func:`signal.signal` requires)."""
        for signum in signums:
            signal.signal(signum, self._record)
        return self

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)

    def request(self) -> None:
        """Ask the process to stop (any thread)."""
        self.event.set()

    def wait(self, seconds: float) -> bool:
        """Whether to stop, after up to ``seconds``; a signal is seen within ``seconds``.

        Call it from the main thread: it sets :attr:`event` for a signal received.
        """
        if self.signals or self.event.wait(seconds) or self.signals:
            self.event.set()
            return True
        return False
