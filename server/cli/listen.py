"""``cesar listen``: alerts as JSON lines, resumed per subscription, through server restarts.

A thin front to :meth:`cesar.client.Client.listen` (:mod:`cesar.client.resume` says where
each subscription resumes) and :mod:`cesar.client.delivery`:

* it starts each subscription after ``--after-seq`` (``N`` for every subscription, or
  ``ID=N`` for one, repeatable; seqs count per subscription), else after what a
  ``--checkpoint`` file holds, else after its last committed alert (live);
* when the server goes away (a restart, a network cut), it says so once on standard error
  and reconnects for up to ``--wait`` seconds, resuming each subscription after the last seq
  it delivered: no alert is lost or printed twice;
* with ``--checkpoint FILE`` it keeps those seqs there, so a later ``listen`` resumes where
  this one stopped;
* ``--to`` delivers the alerts to standard output (``-``), a JSON Lines file that rotates, or
  an HTTP endpoint; a seq counts as done once its batch is delivered, so delivery is at
  least once, without a gap, through restarts of either side.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cesar.client.delivery import Sink


def after_seq(value: str) -> tuple[str | None, int]:
    """One ``--after-seq``: ``N`` (every subscription) or ``ID=N``.

    >>> after_seq("4"), after_seq("s2=10")
    ((None, 4), ('s2', 10))
    """
    sub, equals, number = value.rpartition("=")
    try:
        seq = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or ID=N, got {value!r}") from None
    if seq < 0:
        raise argparse.ArgumentTypeError(f"a seq is 0 or more, got {seq}")
    return (sub if equals else None), seq


def add_listen_arguments(listen: argparse.ArgumentParser) -> None:
    """The options of ``cesar listen``."""
    listen.add_argument("--subscription", action="append", metavar="ID", help="default: all mine")
    listen.add_argument(
        "--after-seq",
        type=after_seq,
        action="append",
        metavar="N|ID=N",
        help="resume after seq N: every subscription, or one (ID=N, repeatable)",
    )
    listen.add_argument(
        "--checkpoint",
        type=Path,
        metavar="FILE",
        help="resume from the seqs in FILE (if it exists) and keep them there",
    )
    listen.add_argument("--count", type=int, metavar="K", help="stop after K alerts")
    listen.add_argument("--timeout", type=float, metavar="S", help="stop after S seconds")
    listen.add_argument(
        "--to",
        default="-",
        metavar="-|FILE|URL",
        help="deliver to standard output (-), a JSON Lines FILE, or POST to an http(s) URL",
    )
    listen.add_argument(
        "--rotate-bytes",
        type=int,
        default=64 * 2**20,
        metavar="N",
        help="a FILE past N bytes is renamed FILE.1 (FILE.1 to FILE.2 ...) and begun again",
    )
    listen.add_argument(
        "--keep-files", type=int, default=5, metavar="K", help="rotated files kept (FILE.1..K)"
    )
    listen.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an HTTP header of every POST (repeatable), e.g. an Authorization",
    )


def _sink(args: argparse.Namespace) -> Sink:
    """The sink ``--to`` names; SystemExit for a malformed ``--header`` or bound."""
    headers = {}
    for header in args.header:
        name, colon, value = header.partition(":")
        if not colon or not name.strip():
            raise SystemExit(f"cesar: --header {header!r}: expected 'NAME: VALUE'")
        headers[name.strip()] = value.strip()
    if args.rotate_bytes < 1 or args.keep_files < 1:
        raise SystemExit("cesar: --rotate-bytes and --keep-files must be at least 1")
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    try:
        from cesar.client.delivery import sink_for

        return sink_for(args.to, args.rotate_bytes, args.keep_files, headers, deadline)
    except ValueError as exc:
        raise SystemExit(f"cesar: --to {exc}") from None


def _after(args: argparse.Namespace, client: Any) -> dict[str, int] | None:
    """The ``--after-seq`` resume points, in the order given, per subscription."""
    if not args.after_seq:
        return None
    ids = args.subscription or [row.id for row in client.subscriptions()]
    after: dict[str, int] = {}
    for sub, seq in args.after_seq:
        after.update(dict.fromkeys(ids, seq) if sub is None else {sub: seq})
    return after


def listen(conn: Any, args: argparse.Namespace) -> int:
    """Deliver alerts until ``--count`` or ``--timeout``, reconnecting as the module says."""
    from cesar.client import Client, Unavailable
    from cesar.client.delivery import DeliveryError

    client = Client(connection=conn)
    sink = _sink(args)
    try:
        listener = client.listen(
            args.subscription, _after(args, client), args.checkpoint, args.wait, args.timeout
        )
    except ValueError as exc:
        raise SystemExit(f"cesar: --checkpoint: {exc}") from None
    listener.on_lost = lambda said: print(f"cesar: {said}", file=sys.stderr, flush=True)
    try:
        listener.deliver(sink, args.count)
    except Unavailable as exc:
        print(f"cesar: {exc}", file=sys.stderr)
        return 1
    except DeliveryError as exc:
        print(f"cesar: {exc}", file=sys.stderr)
        return 1
    finally:
        listener.close()
    return 0
