"""Where alerts go: standard output, a JSON Lines file that rotates, or an HTTP endpoint (a
webhook); ``cesar listen --to`` and :meth:`Listener.deliver <cesar.client.Listener.deliver>`.

Each delivers one batch of alerts (the alerts of one Listen message), each as the JSON
object :meth:`Alert.json <cesar.client.Alert.json>` makes, and returns only once it is
delivered: the listener counts an alert's seq as done (and saves it in its checkpoint) only
then, so delivery is at least once, and a receiver removes a duplicate by
``(subscription, seq)``.

* ``-``: standard output, one JSON line per alert;
* a path: appended, flushed and fsynced per batch; past ``rotate_bytes`` the file is renamed
  ``PATH.1`` (``PATH.1`` to ``PATH.2`` and so on, the oldest of ``keep`` dropped) and a new
  one begun;
* ``http://`` or ``https://``: one POST per batch, a JSON array of the alert objects; a
  failure to connect, a 5xx or a 429 is retried with exponential backoff (0.5 s doubling to
  30 s) until it succeeds or its ``deadline`` passes (``cesar listen --timeout``); another
  status, or the deadline, is an error (:class:`DeliveryError`).

Any other target (a directory, a URL of another scheme, a file in a missing directory) is a
ValueError when the sink is made, before any alert is read.
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from cesar.client.model import Alert

RETRY_FIRST = 0.5
"""Seconds before the first retry of a webhook POST ..."""
RETRY_MAX = 30.0
"""... doubling up to this many."""
POST_TIMEOUT = 30.0
"""Seconds a webhook POST may take."""


class DeliveryError(Exception):
    """A delivery that retrying cannot mend (a webhook's 4xx other than 429), or that its
    deadline ended while retrying."""


class Sink(Protocol):
    """One kind of delivery (module docstring)."""

    def deliver(self, alerts: list[Alert]) -> None:
        """Deliver ``alerts``; return once delivered."""


class StandardOutput:
    """One JSON line per alert on standard output."""

    def deliver(self, alerts: list[Alert]) -> None:
        sys.stdout.write("".join(alert.json() + "\n" for alert in alerts))
        sys.stdout.flush()


class RotatingFile:
    """A JSON Lines file, synced per batch, renamed ``.1``, ``.2`` … past ``rotate_bytes``."""

    def __init__(self, path: Path, rotate_bytes: int, keep: int) -> None:
        self.path, self.rotate_bytes, self.keep = path, rotate_bytes, keep

    def deliver(self, alerts: list[Alert]) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write("".join(alert.json() + "\n" for alert in alerts))
            handle.flush()
            os.fsync(handle.fileno())
            size = handle.tell()
        if size >= self.rotate_bytes:
            self._rotate()

    def _rotate(self) -> None:
        """``PATH.k`` becomes ``PATH.k+1`` (the oldest dropped), then ``PATH`` ``PATH.1``."""
        aged = [self.path.with_name(f"{self.path.name}.{k}") for k in range(self.keep + 1)]
        aged[self.keep].unlink(missing_ok=True)
        for k in range(self.keep - 1, 0, -1):
            if aged[k].exists():
                os.replace(aged[k], aged[k + 1])
        os.replace(self.path, aged[1])


class Webhook:
    """One POST per batch to ``url``, retried until it succeeds or ``deadline`` (a
    ``time.monotonic()`` reading; None: never) passes (module docstring); ``sleep`` and
    ``say`` are the waiting and the telling (tests pass their own)."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        sleep: Callable[[float], None] = time.sleep,
        say: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
        deadline: float | None = None,
    ) -> None:
        self.url, self.headers, self.sleep, self.say = url, headers, sleep, say
        self.deadline = deadline
        self.retries = 0

    def deliver(self, alerts: list[Alert]) -> None:
        body = ("[" + ",".join(alert.json() for alert in alerts) + "]").encode()
        wait = RETRY_FIRST
        while True:
            why = self._post(body, self._left(POST_TIMEOUT))
            if why is None:
                return
            left = self._left(wait)
            if left < wait:
                self.sleep(left)
                raise DeliveryError(
                    f"{self.url}: {why}; the deadline passed while retrying: "
                    f"{len(alerts)} alerts not delivered (a later listen resumes them)"
                )
            self.retries += 1
            self.say(f"cesar: {self.url}: {why}; retrying in {wait:g} s")
            self.sleep(wait)
            wait = min(wait * 2, RETRY_MAX)

    def _left(self, at_most: float) -> float:
        """Seconds to the deadline, at most ``at_most`` (0 once it passed)."""
        if self.deadline is None:
            return at_most
        return max(0.0, min(at_most, self.deadline - time.monotonic()))

    def _post(self, body: bytes, timeout: float) -> str | None:
        """POST ``body``; None if delivered, else why it should be retried."""
        request = urllib.request.Request(
            self.url,
            data=body,
            headers={"Content-Type": "application/json", **self.headers},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=max(timeout, 0.1)) as response:
                response.read()
            return None
        except urllib.error.HTTPError as exc:
            if exc.code >= 500 or exc.code == 429:
                return f"HTTP {exc.code}"
            raise DeliveryError(f"{self.url}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return f"cannot deliver ({reason})"


def sink_for(
    target: str,
    rotate_bytes: int,
    keep: int,
    headers: dict[str, str],
    deadline: float | None = None,
) -> Sink:
    """The sink ``--to`` names: ``-``, an ``http(s)://`` URL, or a file path; ValueError for
    anything else (module docstring).  ``deadline`` bounds a webhook's retrying."""
    if target == "-":
        return StandardOutput()
    if target.startswith(("http://", "https://")):
        return Webhook(target, headers, deadline=deadline)
    scheme, colon, _ = target.partition("://")
    if colon and scheme.isalnum():
        raise ValueError(f"{target}: {scheme}:// is not a target; use -, a file, or http(s)://")
    path = Path(target)
    if path.is_dir():
        raise ValueError(f"{target}: a directory; name a file in it")
    if not path.parent.is_dir():
        raise ValueError(f"{target}: no directory {path.parent}")
    return RotatingFile(path, rotate_bytes, keep)
