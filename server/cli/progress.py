"""Progress bars for long commands: on standard error, and only when it is a terminal.

Standard output stays the command's data (alerts, JSON), so a bar never mixes
into a pipe; ``--quiet`` turns it off on a terminal too.

>>> with progress_bar(quiet=True) as bar:
...     task = bar.add_task("reading", total=3)
...     bar.advance(task, 3)
>>> bar.disable
True
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(quiet: bool = False, transient: bool = True) -> Progress:
    """A rich :class:`Progress` on standard error, disabled off a terminal or when ``quiet``."""
    console = Console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
        redirect_stdout=False,  # what a command prints meanwhile is its data: not above the bar
        disable=quiet or not console.is_terminal,
    )
