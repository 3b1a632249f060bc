"""The ``cesar`` subcommands that talk to a server: define-stream, subscribe, listen, ...

Every client command takes ``--server HOST:PORT`` (default ``$CESAR_SERVER`` or
``127.0.0.1:50051``), ``--token`` (default ``$CESAR_TOKEN``) and ``--tls-ca``.
gRPC is imported inside the handlers so ``cesar --help`` stays fast.  An
error status prints ``cesar: CODE: message`` and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_ERROR = 1
SAY_WAITING = 2.0
"""Seconds a client command waits for its server before it says it is waiting."""


def _connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--server",
        default=os.environ.get("CESAR_SERVER", "127.0.0.1:50051"),
        metavar="HOST:PORT",
    )
    parser.add_argument("--token", default=os.environ.get("CESAR_TOKEN"), help="bearer token")
    parser.add_argument("--tls-ca", type=Path, help="PEM root certificates: use TLS")
    parser.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for a server that is starting (0: fail at once)",
    )


def _remote(
    handler: Callable[[Any, argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """Open the connection, run ``handler``, and turn an error status into a message."""

    def run(args: argparse.Namespace) -> int:
        import grpc

        from cesar.client import CesarError
        from cesar.server.wire.client import Connection

        connection = Connection.open(args.server, args.token, args.tls_ca)
        try:
            if args.wait > 0:
                ready = grpc.channel_ready_future(connection.channel)
                try:
                    try:
                        ready.result(timeout=min(SAY_WAITING, args.wait))
                    except grpc.FutureTimeoutError:
                        if args.wait <= SAY_WAITING:
                            raise
                        print(
                            f"cesar: waiting up to {args.wait:g} s for the server at "
                            f"{args.server} (one that restarts answers once it has replayed "
                            "its log; it logs its progress)",
                            file=sys.stderr,
                            flush=True,
                        )
                        ready.result(timeout=args.wait - SAY_WAITING)
                except grpc.FutureTimeoutError:
                    hint = (
                        f" (with --tls-ca {args.tls_ca}: is the server's certificate signed by "
                        "it, and for this host name?)"
                        if args.tls_ca
                        else ""
                    )
                    print(
                        f"cesar: UNAVAILABLE: no server answered at {args.server} within "
                        f"{args.wait:g} s{hint}",
                        file=sys.stderr,
                    )
                    return EXIT_ERROR
            return handler(connection, args)
        except grpc.RpcError as exc:
            print(f"cesar: {exc.code().name}: {exc.details()}", file=sys.stderr)
            return EXIT_ERROR
        except CesarError as exc:
            print(f"cesar: {exc}", file=sys.stderr)
            return EXIT_ERROR
        finally:
            connection.close()

    return run


def _define_stream(conn: Any, args: argparse.Namespace) -> int:
    from cesar.v1 import cesar_pb2 as pb

    info = conn.stub.DefineStream(pb.DefineStreamRequest(spec=args.spec), metadata=conn.metadata)
    print(info.spec)
    return 0


def _delete_stream(conn: Any, args: argparse.Namespace) -> int:
    from cesar.v1 import cesar_pb2 as pb

    conn.stub.DeleteStream(pb.DeleteStreamRequest(name=args.name), metadata=conn.metadata)
    return 0


def _share(conn: Any, args: argparse.Namespace) -> int:
    from cesar.v1 import cesar_pb2 as pb

    request = pb.ShareStreamRequest(stream=args.stream, readers=args.readers)
    info = conn.stub.ShareStream(request, metadata=conn.metadata)
    print(" ".join(info.shared_with) or "(private)")
    return 0


def _streams(conn: Any, args: argparse.Namespace) -> int:
    from cesar.server.wire.client import list_streams, message_data

    for info in list_streams(conn.stub, conn.metadata):
        if args.json:
            print(json.dumps(message_data(info)))
            continue
        by = f"subscription {info.subscription}" if info.subscription else "input"
        print(f"{info.spec}\t{by}\t{info.owner}")
    return 0


SUBSCRIBE_CHUNK = 500
"""Queries per SubscribeBatch when ``subscribe`` is given many: its bar moves per chunk."""


def _subscribe(conn: Any, args: argparse.Namespace) -> int:
    from cesar.automata.script import split_script
    from cesar.client import Client, Subscription
    from cesar.server.cli.progress import progress_bar

    texts, labels = [], []
    for q in args.query:
        if "\n" not in q and len(q) < 4096 and Path(q).is_file():
            pieces = split_script(Path(q).read_text())
            if not pieces:
                raise SystemExit(f"cesar subscribe: {q}: the file holds no query")
            texts += pieces
            labels += [
                q if len(pieces) == 1 else f"{q} (query {n})" for n in range(1, 1 + len(pieces))
            ]
        else:
            texts.append(q)
            labels.append(q)
    client = Client(connection=conn)
    if len(texts) == 1:
        print(client.subscribe(texts[0], args.name or "").id)
        return 0
    if args.name:
        raise SystemExit("cesar subscribe: --name needs exactly one query")
    failed = 0
    with progress_bar(args.quiet) as bar:
        task = bar.add_task("subscribing", total=len(texts))
        for start in range(0, len(texts), SUBSCRIBE_CHUNK):
            chunk = texts[start : start + SUBSCRIBE_CHUNK]
            for query, result in zip(labels[start:], client.subscribe_many(chunk), strict=False):
                if isinstance(result, Subscription):
                    print(result.id)
                else:
                    failed += 1
                    print(f"{query}: {result}", file=sys.stderr)
            bar.update(task, advance=len(chunk))
    return 1 if failed else 0


def _unsubscribe(conn: Any, args: argparse.Namespace) -> int:
    from cesar.v1 import cesar_pb2 as pb

    for sub in args.id:
        conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=sub), metadata=conn.metadata)
    return 0


def one_line(query: str) -> str:
    """``query`` on one line for a TSV cell: its ``--`` comments left out (a string's
    ``--`` is kept), its whitespace runs made one space.

    >>> one_line("-- big ones\\nFILTER{Price > 9 -- dollars\\n AND Name = 'a--b'} Stock")
    "FILTER{Price > 9 AND Name = 'a--b'} Stock"
    """
    lines = []
    for line in query.splitlines():
        quoted = False
        for at, char in enumerate(line):
            if char == "'":
                quoted = not quoted
            elif not quoted and line.startswith("--", at):
                line = line[:at]
                break
        lines.append(line)
    return " ".join(" ".join(lines).split())


def _list(conn: Any, args: argparse.Namespace) -> int:
    from cesar.server.wire.client import message_data
    from cesar.v1 import cesar_pb2 as pb

    response = conn.stub.ListSubscriptions(pb.ListSubscriptionsRequest(), metadata=conn.metadata)
    for row in response.subscriptions:
        if args.json:
            print(json.dumps(message_data(row)))
            continue
        where = (
            f"key:{row.placement.key_attribute}"
            if row.placement.key_attribute
            else f"global@{row.placement.shard}"
        )
        query = one_line(row.query)
        print(f"{row.id}\t{row.stream}\t{where}\tseq={row.last_seq}\t{query}")
    return 0


def _publish(conn: Any, args: argparse.Namespace) -> int:
    from cesar.automata.schema import parse_stream_spec
    from cesar.server.cli.ingest import Refusals, read_event_file, skipped_report
    from cesar.server.cli.progress import progress_bar
    from cesar.server.wire.client import arrow_requests, list_streams
    from cesar.server.wire.eventfile import EventInputError, tick_time

    listing = list_streams(conn.stub, conn.metadata)
    inputs = {info.name: parse_stream_spec(info.spec) for info in listing if not info.subscription}
    try:
        result = read_event_file(args, inputs)
    except OSError as exc:
        print(f"cesar: {args.events}: {exc.strerror}", file=sys.stderr)
        return 2
    except EventInputError as exc:
        print(f"cesar: {args.events}: {exc}", file=sys.stderr)
        return 2
    if result.skipped:
        print(skipped_report(result.skipped).report("skipped"), file=sys.stderr)
    events = result.events
    requests = arrow_requests(events, inputs, args.batch, close=not args.keep_open)

    accepted = 0
    rejected = Refusals()
    with progress_bar(args.quiet) as progress:
        task = progress.add_task("publishing", total=len(events))
        answers = conn.stub.Publish(iter(requests), metadata=conn.metadata)
        for number, ack in enumerate(answers):
            accepted += ack.accepted
            for rejection in ack.rejected:
                where = f"event {number * args.batch + rejection.index + 1}"
                rejected.add(where, rejection.field, rejection.reason)
            progress.update(task, advance=min(args.batch, len(events) - number * args.batch))
    if rejected:
        print(rejected.report("rejected"), file=sys.stderr)
    closed = requests[-1].watermark if requests and not args.keep_open else None
    said = "its last epoch left open (--keep-open)"
    if closed is not None:
        said = f"time closed through t1 = {tick_time(closed, inputs[events[-1].stream].unit)}"
    print(f"published {accepted} event(s), {len(rejected)} rejected; {said}", file=sys.stderr)
    return 0 if accepted and not rejected else EXIT_ERROR


def _stats(conn: Any, args: argparse.Namespace) -> int:
    from cesar.server.wire.client import message_data
    from cesar.v1 import cesar_pb2 as pb

    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    print(json.dumps(message_data(stats), indent=2))
    return 0


def _routing(conn: Any, args: argparse.Namespace) -> int:
    from cesar.server.wire.client import message_data
    from cesar.v1 import cesar_pb2 as pb

    table = conn.stub.GetRouting(pb.GetRoutingRequest(), metadata=conn.metadata)
    print(json.dumps(message_data(table), indent=2))
    return 0


def add_remote_commands(sub: Any) -> None:
    """Register the client subcommands on the ``cesar`` parser's subparsers."""
    define = sub.add_parser("define-stream", help="declare an input stream on a server")
    define.add_argument("spec", metavar="SPEC", help="e.g. 'Stock(Name:string,Price:float)[min]'")
    define.set_defaults(handler=_remote(_define_stream))

    streams = sub.add_parser("streams", help="list the streams you may use")
    streams.add_argument("--json", action="store_true", help="one JSON object a stream")
    streams.set_defaults(handler=_remote(_streams))

    delete = sub.add_parser("delete-stream", help="remove an input stream you defined")
    delete.add_argument("name", metavar="NAME")
    delete.set_defaults(handler=_remote(_delete_stream))

    share = sub.add_parser(
        "share", help="let other clients read a stream you PUBLISH (none: private again)"
    )
    share.add_argument("stream", metavar="STREAM")
    share.add_argument("readers", nargs="*", metavar="CLIENT")
    share.set_defaults(handler=_remote(_share))

    subscribe = sub.add_parser(
        "subscribe", help="register CEL queries (several: one SubscribeBatch); prints their ids"
    )
    subscribe.add_argument(
        "query", nargs="+", metavar="FILE.cel", help="a .cel file or the query text"
    )
    subscribe.add_argument("--name", help="published stream name when the query has no PUBLISH")
    subscribe.add_argument(
        "--quiet", action="store_true", help="no progress bar (shown only on a terminal)"
    )
    subscribe.set_defaults(handler=_remote(_subscribe))

    unsubscribe = sub.add_parser("unsubscribe", help="remove subscriptions")
    unsubscribe.add_argument("id", nargs="+", metavar="ID")
    unsubscribe.set_defaults(handler=_remote(_unsubscribe))

    listing = sub.add_parser("list", help="list my subscriptions")
    listing.add_argument("--json", action="store_true", help="one JSON object a subscription")
    listing.set_defaults(handler=_remote(_list))

    from cesar.server.cli.listen import add_listen_arguments, listen

    listener = sub.add_parser("listen", help="print alerts as JSON lines as they arrive")
    add_listen_arguments(listener)
    listener.set_defaults(handler=_remote(listen))

    publish = sub.add_parser("publish", help="publish events from a JSON Lines or CSV file")
    publish.add_argument("events", metavar="EVENTS", help="the file, or - for standard input")
    publish.add_argument("--batch", type=int, default=1000, help="events per message")
    publish.add_argument("--sort", action="store_true", help="sort events by t1 first")
    publish.add_argument("--skip-bad", action="store_true", help="skip malformed lines")
    publish.add_argument(
        "--keep-open",
        action="store_true",
        help="do not close the last epoch (by default a watermark at the last t1 is sent)",
    )
    publish.add_argument("--quiet", action="store_true", help="no progress bar")
    from cesar.server.cli.ingest import add_ingest_arguments

    add_ingest_arguments(publish)
    publish.set_defaults(handler=_remote(_publish))

    stats = sub.add_parser(
        "stats", help="print the server's counters as one JSON object (numbers as numbers)"
    )
    stats.set_defaults(handler=_remote(_stats))

    routing = sub.add_parser(
        "routing",
        help="print the table the feed routes events by (GetRouting; needs the feed scope)",
    )
    routing.set_defaults(handler=_remote(_routing))

    for parser in (
        routing,
        define,
        streams,
        delete,
        share,
        subscribe,
        unsubscribe,
        listing,
        listener,
        publish,
        stats,
    ):
        _connection_arguments(parser)
