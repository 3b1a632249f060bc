"""``cesar listen``: alerts as JSON lines, resumed per subscription, through server restarts.

Each subscription's alerts carry their own sequence numbers (``seq``, from 1).  ``listen``
keeps, per subscription, the last seq it printed, and asks the server for what follows:

* at start, after ``--after-seq`` (``N`` for every subscription, or ``ID=N`` for one,
  repeatable), else after what a ``--checkpoint`` file holds, else after each subscription's
  last committed alert (live);
* when the server goes away (a restart, a network cut), it says so once on standard error
  and reconnects for up to ``--wait`` seconds, resuming each subscription after the last seq
  it printed: no alert is lost or printed twice;
* with ``--checkpoint FILE`` it writes those seqs there (a JSON object, replaced whole at
  most once a second and at the end), so a later ``listen`` resumes where this one stopped;
* ``--to`` delivers the alerts to standard output (``-``), a JSON Lines file that rotates, or
  an HTTP endpoint (:mod:`cesar.server.cli.delivery`); a seq counts as done once its batch is
  delivered, so delivery is at least once, without a gap, through restarts of either side.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from cesar.server.cli.delivery import DeliveryError, Sink, sink_for

SAVE_EVERY = 1.0
"""Seconds between two writes of the checkpoint file (and one at the end)."""


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


def alert_json(alert: Any, schemas: dict[str, Any]) -> str:
    """An alert as ``cesar run``'s JSON line plus ``subscription`` and ``seq``."""
    from cesar.server.wire.convert import trusted_event
    from cesar.server.wire.eventfile import event_json

    record = {"subscription": alert.subscription, "seq": alert.seq}
    if alert.notice:
        record["notice"] = alert.notice
        return json.dumps(record)
    event = trusted_event(alert.event)
    record.update(json.loads(event_json(event, schemas.get(event.stream))))
    return json.dumps(record, ensure_ascii=False)


def _save(path: Path, seqs: dict[str, int]) -> None:
    """Write ``seqs`` to ``path`` whole or not at all."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(seqs, sort_keys=True) + "\n")
    os.replace(partial, path)


def _starts(args: argparse.Namespace, rows: list[Any]) -> dict[str, int]:
    """Per subscription listened to, the seq to resume after (module docstring)."""
    wanted = args.subscription or [row.id for row in rows]
    seqs = {row.id: row.last_seq for row in rows if row.id in wanted}
    if args.checkpoint is not None and args.checkpoint.exists():
        try:
            saved = json.loads(args.checkpoint.read_text())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"cesar: --checkpoint {args.checkpoint}: {exc}") from None
        if not isinstance(saved, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in saved.values()
        ):
            raise SystemExit(
                f"cesar: --checkpoint {args.checkpoint}: expected a JSON object of seqs"
            )
        seqs.update({sub: seq for sub, seq in saved.items() if sub in seqs})
    for sub, seq in args.after_seq or ():
        for one in [sub] if sub is not None else list(seqs):
            seqs[one] = seq
    return seqs


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
    return sink_for(args.to, args.rotate_bytes, args.keep_files, headers)


def listen(conn: Any, args: argparse.Namespace) -> int:
    """Print alerts until ``--count`` or ``--timeout``, reconnecting as the module says."""
    import grpc

    from cesar.automata.schema import parse_stream_spec
    from cesar.v1 import cesar_pb2 as pb

    listing = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    rows = list(listing.subscriptions)
    schemas = {}
    for row in rows:
        schema = parse_stream_spec(row.output_spec)
        schemas[schema.name] = schema
    seqs = _starts(args, rows)
    sink = _sink(args)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    count, saved_at, lost_at = 0, time.monotonic(), None
    try:
        while True:
            request = pb.ListenRequest(subscriptions=args.subscription or [], after_seq=seqs)
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            stream = conn.stub.Listen(request, metadata=conn.metadata, timeout=left)
            try:
                for batch in stream:
                    lost_at = None
                    chosen = list(batch.alerts)
                    if args.count is not None:
                        chosen = chosen[: args.count - count]
                    sink.deliver([alert_json(alert, schemas) for alert in chosen])
                    for alert in chosen:
                        seqs[alert.subscription] = alert.seq
                    count += len(chosen)
                    if args.checkpoint is not None and time.monotonic() - saved_at >= SAVE_EVERY:
                        _save(args.checkpoint, seqs)
                        saved_at = time.monotonic()
                    if args.count is not None and count >= args.count:
                        stream.cancel()
                        return 0
                why = "it ended the stream"  # a server shutting down ends it
            except grpc.RpcError as exc:
                if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED:
                    return 0
                if exc.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise
                why = exc.details() or "unavailable"
            if lost_at is None:
                lost_at = time.monotonic()
                print(
                    f"cesar: the server went away ({why}); reconnecting for up to "
                    f"{args.wait:g} s, each subscription resuming after its last seq",
                    file=sys.stderr,
                )
            elif time.monotonic() - lost_at > args.wait:
                print(
                    f"cesar: UNAVAILABLE: no server answered for {args.wait:g} s", file=sys.stderr
                )
                return 1
            time.sleep(0.5)
    except DeliveryError as exc:
        print(f"cesar: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.checkpoint is not None:
            _save(args.checkpoint, seqs)
