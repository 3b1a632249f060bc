"""Stopping a long-running process on SIGTERM or SIGINT, or when one of its threads asks.

A Python signal handler runs in the main thread between two bytecodes, possibly
while that thread holds the lock inside :meth:`threading.Event.wait`; a handler
that calls :meth:`threading.Event.set` then waits for that lock forever.  The
front hung so at shutdown, once in many hundred stops.  The handler here only
appends to a list (no lock); :meth:`Stopping.wait`, in the main thread, turns
the signal into the event the other threads read.

The main thread waits on a pipe, not on the event: a signal (through
:func:`signal.set_wakeup_fd`, written by the interpreter's C handler) and
:meth:`Stopping.request` each write a byte to it, so a wait ends as soon as
either happens (a wait on the event alone ran to its timeout after a signal,
0.25 s a stop on average).
"""

from __future__ import annotations

import contextlib
import os
import select
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
        self._wake_read, self._wake_write = os.pipe()
        for end in (self._wake_read, self._wake_write):
            os.set_blocking(end, False)
        self._poll = select.poll()
        self._poll.register(self._wake_read, select.POLLIN)

    def install(self, *signums: signal.Signals) -> Stopping:
        """Record ``signums`` (main thread only, as :func:`signal.signal` requires); their
        arrival wakes :meth:`wait` at once."""
        for signum in signums:
            signal.signal(signum, self._record)
        signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
        return self

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)

    def request(self) -> None:
        """Ask the process to stop (any thread)."""
        self.event.set()
        with contextlib.suppress(BlockingIOError):  # a full pipe wakes the wait already
            os.write(self._wake_write, b"\0")

    def wait(self, seconds: float) -> bool:
        """Whether to stop, after up to ``seconds``; a signal or a request ends the wait.

        Call it from the main thread: it sets :attr:`event` for a signal received.
        """
        if not (self.signals or self.event.is_set()):
            self._poll.poll(seconds * 1000)
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_read, 4096)
        if self.signals or self.event.is_set():
            self.event.set()
            return True
        return False
