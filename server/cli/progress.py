"""Progress of long commands on standard error: a bar on a terminal, a line now and then off one.

Standard output stays the command's data (alerts, JSON), so progress never mixes
into a pipe.  When standard error is a file or a pipe (a log, CI), a command that
runs longer than :data:`EVERY_SECONDS` says where it is in a plain line that often;
a shorter one prints nothing.  ``--quiet`` turns both off.

>>> with progress_bar(quiet=True) as bar:
...     task = bar.add_task("reading", total=3)
...     bar.advance(task, 3)
>>> bar.disable
True
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

EVERY_SECONDS = 5.0
"""Seconds between two progress lines off a terminal."""


class Lines(Progress):
    """Progress off a terminal: every ``every`` seconds a line per unfinished task on standard
    error (``reading lines: 120,000 of 193,676 (62 %), 10 s``); nothing drawn.

    >>> import io, contextlib
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stderr(out), Lines(every=0.0) as lines:
    ...     task = lines.add_task("evaluating", total=200)
    ...     lines.update(task, completed=50)
    >>> out.getvalue().split(", ")[0]
    'evaluating: 50 of 200 (25 %)'
    """

    def __init__(self, every: float = EVERY_SECONDS) -> None:
        super().__init__(TextColumn("{task.description}"), disable=True)
        self.every = every
        self.said = time.monotonic()

    def update(self, task_id: Any, **fields: Any) -> None:
        super().update(task_id, **fields)
        self._say()

    def advance(self, task_id: Any, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._say()

    def _say(self) -> None:
        now = time.monotonic()
        if now - self.said < self.every:
            return
        self.said = now
        for task in self.tasks:
            if task.finished:
                continue
            done = f"{int(task.completed):,}"
            if task.total:
                done += f" of {int(task.total):,} ({100 * task.completed / task.total:.0f} %)"
            print(f"{task.description}: {done}, {task.elapsed or 0:.0f} s", file=sys.stderr)
            sys.stderr.flush()


def progress_bar(quiet: bool = False, transient: bool = True) -> Progress:
    """A rich :class:`Progress` bar on standard error if it is a terminal, :class:`Lines`
    if it is not; nothing when ``quiet``."""
    console = Console(stderr=True)
    if not quiet and not console.is_terminal:
        return Lines()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
        redirect_stdout=False,  # what a command prints meanwhile is its data: not above the bar
        disable=quiet,
    )
