"""What ``cesar run`` and ``cesar publish`` share: files read as they are, and what failed.

The options of :class:`~cesar.server.wire.eventfile.Ingest` (``--time-column``,
``--time-format``, ``--columns``, ``--stream-name``) and :class:`Refusals`, the
summary of the rows a command could not use: counts by reason, the first few
in full.

>>> refusals = Refusals()
>>> for t1 in (5, 6, 7):
...     refusals.add(f"event {t1 - 4}", "t1", f"late: t1 = {t1}, but events up to t1 = 9 are ...")
>>> print(refusals.report("rejected", shown=1))
cesar: event 1: t1: late: t1 = 5, but events up to t1 = 9 are ...
cesar: ... and 2 more
cesar: rejected 3: 3 t1: late
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cesar.automata.schema import StreamSchema
from cesar.server.wire.eventfile import (
    TIME_FORMATS,
    EventInputError,
    Ingest,
    ReadResult,
    read_events,
)

SHOWN = 5
"""Refusals printed in full before the counts."""


def add_ingest_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that read a CSV or JSON Lines file not written for cesar."""
    group = parser.add_argument_group("files not written for cesar")
    group.add_argument(
        "--time-column",
        metavar="NAME",
        help="the column holding each event's time (point events: t0 = t1 = it)",
    )
    group.add_argument(
        "--time-format",
        choices=TIME_FORMATS,
        default="auto",
        help="how --time-column is written: ISO 8601, epoch s/ms/us/ns, or ticks; ISO and "
        "epoch times become ticks of the stream's unit, rounded down; auto: integers are "
        "ticks, text is ISO 8601",
    )
    group.add_argument(
        "--columns",
        metavar="A,B,...",
        help="the attribute columns to keep; the file's other columns are ignored",
    )
    group.add_argument(
        "--stream-name", metavar="NAME", help="the stream of the rows that name none"
    )


def ingest_of(args: argparse.Namespace) -> Ingest | None:
    """The :class:`Ingest` the options ask for (None: the file is in cesar's own layout).

    Raises SystemExit (usage) for ``--time-format`` without ``--time-column``.
    """
    if args.time_format != "auto" and args.time_column is None:
        raise SystemExit("cesar: --time-format reads the --time-column; give one")
    if args.time_column is None and args.columns is None and args.stream_name is None:
        return None
    columns = None
    if args.columns is not None:
        columns = tuple(name.strip() for name in args.columns.split(",") if name.strip())
    return Ingest(args.time_column, args.time_format, columns, args.stream_name)


def read_event_file(
    args: argparse.Namespace,
    schemas: Mapping[str, StreamSchema],
    progress: Callable[[int, int], None] | None = None,
) -> ReadResult:
    """Read ``args.events`` (``-``: standard input) with the command's options;
    ``progress(lines read, lines)`` as :func:`read_events` calls it.

    Raises OSError and :class:`~cesar.server.wire.eventfile.EventInputError`.
    """
    ingest = ingest_of(args)
    source = (
        contextlib.nullcontext(sys.stdin)
        if args.events == "-"
        else open(args.events, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    )
    with source as handle:
        return read_events(
            handle,
            args.events,
            schemas,
            sort=args.sort,
            skip_bad=args.skip_bad,
            ingest=ingest,
            progress=progress,
        )


def skipped_report(skipped: list[EventInputError]) -> Refusals:
    """The lines ``--skip-bad`` left out, as refusals."""
    refusals = Refusals()
    for error in skipped:
        reason = error.error
        if isinstance(reason, str):
            refusals.add(f"line {error.line}", None, reason)
        else:
            refusals.add(f"line {error.line}", reason.field, reason.reason)
    return refusals


@dataclass
class Refusals:
    """Rows a command could not use, with where, which field and why; :meth:`report` sums up."""

    items: list[tuple[str, str, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)

    def add(self, where: str, field_name: str | None, reason: str) -> None:
        """One refused row: ``where`` it was ("line 3", "event 7"), the field, the reason."""
        self.items.append((where, field_name or "", reason))

    def report(self, verb: str, shown: int = SHOWN) -> str:
        """The first ``shown`` refusals in full, then the count of each kind (its field and
        the reason up to its first colon), most frequent first."""
        lines = []
        for where, field_name, reason in self.items[:shown]:
            lines.append(f"cesar: {where}: {field_name + ': ' if field_name else ''}{reason}")
        if len(self.items) > shown:
            lines.append(f"cesar: ... and {len(self.items) - shown} more")
        kinds = Counter(
            f"{field_name + ': ' if field_name else ''}{reason.split(':')[0]}"
            for _, field_name, reason in self.items
        )
        summary = ", ".join(f"{count} {kind}" for kind, count in kinds.most_common())
        lines.append(f"cesar: {verb} {len(self.items)}: {summary}")
        return "\n".join(lines)
