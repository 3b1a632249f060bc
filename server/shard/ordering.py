"""The front's calls to a shard, run in the order the front sent them, several on the way.

The front keeps up to :data:`~cesar.server.shard.pool.CALLS_AHEAD` calls on their way to a
shard at once, so the shard starts its next Apply as soon as it ends one instead of waiting
a round trip through the front (a busy front answered and sent the next call 2 ms later, at
the median, in a shard's 41 ms Apply: 8 % of the shard idle; perf/RESULTS.md). gRPC keeps
no order among the calls of one channel, so each call carries its place, the
``cesar-order`` header ``"<session>:<number>"``: numbered from 1 in each session of the
front's pool (a new session when it starts or reconnects). :class:`CallOrder` holds a
call until the one numbered before it has run; a call whose predecessor does not arrive
within :data:`ARRIVAL_SECONDS`, or whose session a newer one replaced, is refused
(:class:`OutOfOrder`), and so is every later call of that session.

>>> order = CallOrder()
>>> first, second = Stamp("a", 1), Stamp("a", 2)
>>> order.wait(first); order.finish(first)
>>> order.wait(second); order.finish(second)
>>> order.waited
0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

ORDER_HEADER = "cesar-order"
"""The metadata key of a call's place in the front's order."""

ARRIVAL_SECONDS = 30.0
"""How long a call waits for the call numbered before it to arrive (not to run)."""


class OutOfOrder(Exception):
    """A call that cannot take its turn; the message says why."""


@dataclass(frozen=True)
class Stamp:
    """A call's place: its session of the front's pool and its number there (from 1)."""

    session: str
    number: int

    @staticmethod
    def of(metadata: Iterable[tuple[str, str | bytes]]) -> Stamp | None:
        """The stamp in a call's ``metadata`` (None: the call is not ordered); ValueError if
        the header is malformed.

        >>> Stamp.of([("cesar-order", "f00d:7")])
        Stamp(session='f00d', number=7)
        >>> Stamp.of([]) is None
        True
        """
        for key, value in metadata:
            if key == ORDER_HEADER:
                session, _, number = str(value).rpartition(":")
                if not session or not number.isdigit() or int(number) < 1:
                    raise ValueError(f"{ORDER_HEADER} must be <session>:<number >= 1>")
                return Stamp(session, int(number))
        return None


class CallOrder:
    """Turns for the calls of the newest session, in number order.

    :meth:`wait` returns when every call numbered before the caller's has finished;
    :meth:`finish` marks the caller's done.  O(1) a call besides the waiting.
    """

    def __init__(self, arrival_seconds: float = ARRIVAL_SECONDS) -> None:
        self.arrival_seconds = arrival_seconds
        self.changed = threading.Condition()
        self.session = ""
        """The newest session seen (its call 1 began it)."""
        self.ran = 0
        """The highest number of :attr:`session` finished; every lower one has too."""
        self.arrived: set[int] = set()
        """Numbers of :attr:`session` arrived and not finished."""
        self.broken = ""
        """Why :attr:`session` can go no further (a call never arrived), or empty."""
        self.waited = 0
        """Calls that arrived before the one ahead of them had finished (the front sent them
        ahead): the shard found its next call waiting."""

    def wait(self, stamp: Stamp | None) -> None:
        """Return once it is ``stamp``'s turn (None: at once); OutOfOrder if it never comes."""
        if stamp is None:
            return
        deadline = time.monotonic() + self.arrival_seconds
        counted = False
        with self.changed:
            known = stamp.session == self.session or stamp.number == 1
            self.waited += int(not known or self.ran < stamp.number - 1)
            while True:
                if stamp.session != self.session:
                    if stamp.number == 1:  # a new session begins: the old one's calls fail
                        self.session, self.ran, self.broken = stamp.session, 0, ""
                        self.arrived.clear()
                    elif counted:
                        raise OutOfOrder("a newer session of the front began")
                    elif self._expired(deadline):
                        raise OutOfOrder(f"session {stamp.session} never began here")
                    else:
                        continue
                if not counted:
                    counted = True
                    self.arrived.add(stamp.number)
                    self.changed.notify_all()
                if self.broken:
                    raise OutOfOrder(self.broken)
                before = stamp.number - 1
                if self.ran >= before:
                    return
                if before in self.arrived:
                    self.changed.wait()  # it runs or waits its own turn: no deadline
                elif self._expired(deadline):
                    self.broken = f"call {before} of session {stamp.session} never arrived"
                    self.changed.notify_all()
                    raise OutOfOrder(self.broken)

    def _expired(self, deadline: float) -> bool:
        """Wait for a change until ``deadline``; whether it had passed."""
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        self.changed.wait(left)
        return False

    def finish(self, stamp: Stamp | None) -> None:
        """``stamp``'s call is done (ran or failed): the next may go."""
        if stamp is None:
            return
        with self.changed:
            if stamp.session == self.session:
                self.ran = max(self.ran, stamp.number)
                self.arrived.discard(stamp.number)
            self.changed.notify_all()
