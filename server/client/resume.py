"""Where a listener resumes: the last seq done per subscription, its checkpoint file, and how
long it keeps reconnecting.  Shared by the blocking and the asyncio listener.

Seqs count per subscription (1, 2, 3 …).  A listener starts each subscription after,
in order of precedence: the seq ``after`` gives it; the seq its checkpoint file holds;
the subscription's last committed alert (live: only what comes next).

>>> rows = {"s1": 10, "s2": 4}
>>> starts(rows, None, {"s2": 1}, None)
{'s1': 10, 's2': 1}
>>> starts(rows, ["s1"], 0, None)
{'s1': 0}
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

SAVE_EVERY = 1.0
"""Seconds between two writes of a checkpoint file (and one when the listener closes)."""
RETRY_EVERY = 0.5
"""Seconds between two attempts to reach a server that went away."""

After = int | Mapping[str, int] | None
"""Resume points: one seq for every subscription, one per subscription, or none (live)."""


def starts(
    last_seqs: Mapping[str, int],
    subscriptions: Sequence[str] | None,
    after: After,
    checkpoint: Path | None,
) -> dict[str, int]:
    """Per subscription listened to, the seq to resume after (module docstring).

    ``last_seqs`` are the caller's subscriptions with their last committed seq; a
    ``subscriptions`` id not among them is left to the server to refuse.
    """
    wanted = list(last_seqs) if not subscriptions else list(subscriptions)
    seqs = {sub: last_seqs.get(sub, 0) for sub in wanted}
    if checkpoint is not None and checkpoint.exists():
        seqs.update({sub: seq for sub, seq in load(checkpoint).items() if sub in seqs})
    if isinstance(after, int):
        if isinstance(after, bool) or after < 0:
            raise ValueError(f"a seq is an int of 0 or more, not {after!r}")
        seqs = dict.fromkeys(seqs, after)
    elif after is not None:
        for sub, seq in after.items():
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
                raise ValueError(f"{sub}: a seq is an int of 0 or more, not {seq!r}")
            seqs[sub] = seq
    return seqs


def load(path: Path) -> dict[str, int]:
    """The seqs a checkpoint file holds; ValueError naming the file if it holds anything else."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"checkpoint {path}: {exc}") from None
    if not isinstance(saved, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in saved.values()
    ):
        raise ValueError(f"checkpoint {path}: expected a JSON object of seqs")
    return saved


class Positions:
    """The last seq done per subscription, kept in a checkpoint file if one is given.

    :meth:`done` moves them on; the file is replaced whole at most once every
    :data:`SAVE_EVERY` seconds and at :meth:`save`.
    """

    def __init__(self, seqs: dict[str, int], checkpoint: Path | None) -> None:
        self.seqs = seqs
        self.checkpoint = checkpoint
        self._saved_at = time.monotonic()

    def done(self, alerts: Iterable[tuple[str, int]]) -> None:
        """Count ``(subscription, seq)`` pairs as done; save the file if it is due."""
        for sub, seq in alerts:
            self.seqs[sub] = max(seq, self.seqs.get(sub, 0))
        if self.checkpoint is not None and time.monotonic() - self._saved_at >= SAVE_EVERY:
            self.save()

    def save(self) -> None:
        """Write the checkpoint file whole or not at all (nothing without one)."""
        if self.checkpoint is None:
            return
        partial = self.checkpoint.with_name(self.checkpoint.name + ".partial")
        partial.write_text(json.dumps(self.seqs, sort_keys=True) + "\n")
        os.replace(partial, self.checkpoint)
        self._saved_at = time.monotonic()


class Reconnect:
    """How long a listener keeps trying a server that went away.

    :meth:`lost` is called each time the stream broke; it returns whether this is
    the first failure of a run (to say so once) and raises :class:`TimeoutError` once
    no server answered for ``seconds``.  :meth:`heard` ends a run of failures.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._since: float | None = None

    def heard(self) -> None:
        """The server answered."""
        self._since = None

    def lost(self) -> bool:
        """One more failure: True for the first of a run; TimeoutError past ``seconds``."""
        now = time.monotonic()
        if self._since is None:
            self._since = now
            return True
        if now - self._since > self.seconds:
            raise TimeoutError(f"no server answered for {self.seconds:g} s")
        return False
