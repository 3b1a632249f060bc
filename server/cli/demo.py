"""``cesar demo``: the whole system on the bundled stock sample, printing alerts as they arrive.

Starts ``cesar serve`` (front + 2 shards) on a scratch directory, subscribes
the example queries (``examples/queries``), listens, and starts ``cesar feed``
(Spark, local[2]) on a source directory into which the sample's quotes are
dropped a few hundred at a time, as a live feed would deliver them.  Each
alert is printed as a JSON line the moment it arrives; at the end the demo
checks the alerts against ``cesar run`` on the same quotes and stops both
processes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import grpc

from cesar.automata.schema import parse_stream_spec
from cesar.examples import QUERIES as EXAMPLE_QUERIES
from cesar.examples import STOCKS_SAMPLE, STOCKS_SAMPLE_SPEC
from cesar.server.engine.workload import Workload
from cesar.server.wire.client import Connection, alerts
from cesar.server.wire.convert import trusted_event
from cesar.server.wire.eventfile import (
    EventInputError,
    drop_file,
    event_json,
    input_line,
    read_events,
)
from cesar.v1 import cesar_pb2 as pb

STOCK = STOCKS_SAMPLE_SPEC
QUERIES = (
    "rising.cel",
    "drops.cel",
    "drop_after_rise.cel",
    "rise_then_drop.sase",
    "loud_fall.sase",
)
CESAR = Path(sys.executable).with_name("cesar")


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo (see the module docstring); 0 when the alerts equal ``cesar run``'s."""
    from cesar.server.cli.main import EXIT_USAGE

    schemas = {"Stock": parse_stream_spec(STOCK)}
    try:
        with open(args.events, encoding="utf-8") as handle:
            events = read_events(handle, args.events, schemas).events
    except OSError as exc:
        print(f"cesar: --events {args.events}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    except EventInputError as exc:
        print(f"cesar: --events {args.events}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not events:
        print(f"cesar: --events {args.events}: no quote in it", file=sys.stderr)
        return EXIT_USAGE
    queries = [(Path(name).stem, (EXAMPLE_QUERIES / name).read_text()) for name in QUERIES]
    program = Workload.build(list(schemas.values()), queries)
    outputs = {q.name: q.output for q in program.queries}
    expected = Counter(
        event_json(e, outputs[e.stream]) for e in program.run(events, engine="engine")
    )
    say(
        f"{len(events)} one-minute quotes "
        + ("of 6 stocks (the bundled sample), " if args.events == str(STOCKS_SAMPLE) else "")
        + f"{len(queries)} queries, a server and a Spark feed; alerts are printed on stdout"
    )
    with tempfile.TemporaryDirectory(prefix="cesar-demo-") as scratch:
        work = Path(scratch)
        say("starting the server (front + 2 shards) ...")
        server = subprocess.Popen(
            [
                *(str(CESAR), "serve", "--data-dir", str(work / "data"), "--port", "0"),
                *("--shards", "2", "--stream", STOCK, "--log-level", "WARNING"),
                *("--console-port", "0"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        address = server.stdout.readline().split()[1]
        console = server.stdout.readline().split()[1]
        say(f"server on {address}; its web console at {console} while the demo runs")
        connection = Connection.open(address)
        got: Counter[str] = Counter()
        try:
            for (name, text), file in zip(queries, QUERIES, strict=True):
                request = pb.SubscribeRequest(query=text, name=name)
                sub = connection.stub.Subscribe(request, metadata=connection.metadata)
                say(f"subscribed examples/queries/{file} as {sub.id}")
            printer = threading.Thread(
                target=_print_alerts, args=(connection, got, outputs), daemon=True
            )
            printer.start()
            source = work / "in"
            source.mkdir()
            feed = subprocess.Popen(
                [
                    *(str(CESAR), "feed", "--server", address, "--source", str(source)),
                    *("--checkpoint", str(work / "checkpoint")),
                    *("--dead-letter", str(work / "dead")),
                    *("--trigger", "0.5", "--idle-stop", "6", "--log-level", "WARNING"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=open(work / "feed.log", "w"),  # noqa: SIM115 - the child keeps it
            )
            say(
                "starting the Spark feed (local[2]; Spark takes 20-60 s to start) and dropping "
                f"the quotes into its source, {args.rows_per_file} per file; the feed stops "
                "when no file has come for 6 s"
            )
            for number, start in enumerate(range(0, len(events), args.rows_per_file)):
                chunk = events[start : start + args.rows_per_file]
                drop_file(source, number, [input_line(e) for e in chunk])
                time.sleep(args.pause)
            if feed.wait() != 0:
                print((work / "feed.log").read_text()[-4000:], file=sys.stderr)
            say("the feed has stopped; waiting for the last alerts")
            deadline = time.monotonic() + 30
            while sum(got.values()) < sum(expected.values()) and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            connection.close()
            server.terminate()
            server.wait(30)
    same = got == expected
    say(
        f"{sum(got.values())} alerts; cesar run on the same quotes: {sum(expected.values())}"
        + (" (identical)" if same else " (DIFFERENT)")
    )
    return 0 if same else 1


def say(text: str) -> None:
    """A line about what the demo is doing, on standard error (stdout holds the alerts)."""
    print(f"cesar demo: {text}", file=sys.stderr, flush=True)


def _print_alerts(connection: Connection, got: Counter[str], outputs: dict) -> None:  # type: ignore[type-arg]
    stream = connection.stub.Listen(pb.ListenRequest(), metadata=connection.metadata)
    try:
        for alert in alerts(stream):
            line = event_json(trusted_event(alert.event), outputs[alert.event.stream])
            got[line] += 1
            print(line, flush=True)
    except grpc.RpcError:
        return
