"""``cesar serve``'s options and their reading into a
:class:`~cesar.server.front.serve.ServeConfig` (the server itself is
:mod:`cesar.server.front.serve`, imported when the command runs so ``cesar --help`` stays
fast)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cesar.server.front import limits
from cesar.server.shard.options import add_plan_costs_argument


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``cesar serve``."""
    parser.add_argument("--data-dir", required=True, type=Path, help="catalog directory")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind: loopback")
    parser.add_argument("--port", type=int, default=50051, help="0 picks a free port")
    parser.add_argument(
        "--shards",
        type=int,
        default=os.cpu_count() or 1,
        help="shard processes: one a core on this machine",
    )
    parser.add_argument(
        "--shard",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="use this shard started on its own (cesar shard --listen), in order; repeat per "
        "shard (instead of --shards children)",
    )
    parser.add_argument(
        "--shard-secret-file", type=Path, help="the secret the --shard shards expect"
    )
    parser.add_argument(
        "--shard-tls-ca",
        type=Path,
        help="PEM root certificates the --shard shards' TLS is checked with",
    )
    parser.add_argument("--tokens", type=Path, help="tokens file: TOKEN CLIENT [limit=N ...]")
    parser.add_argument("--tls-cert", type=Path, help="PEM certificate chain (enables TLS)")
    parser.add_argument("--tls-key", type=Path, help="PEM private key for --tls-cert")
    parser.add_argument(
        "--stream", action="append", default=[], metavar="SPEC", help="define if absent"
    )
    parser.add_argument(
        "--retention", type=int, default=100_000, help="alerts kept per subscription (at least 1)"
    )
    parser.add_argument(
        "--max-subscriptions", type=int, default=limits.MAX_SUBSCRIPTIONS, help="per client"
    )
    parser.add_argument(
        "--max-query-bytes", type=int, default=limits.MAX_QUERY_BYTES, help="per query and name"
    )
    parser.add_argument(
        "--max-listens", type=int, default=limits.MAX_LISTENS, help="Listen streams per client"
    )
    parser.add_argument(
        "--max-streams", type=int, default=limits.MAX_STREAMS, help="input streams per client"
    )
    parser.add_argument(
        "--max-instances-per-subscription",
        type=int,
        default=limits.MAX_INSTANCES_PER_SUBSCRIPTION,
        help="live partial matches per subscription (0: unlimited)",
    )
    parser.add_argument(
        "--max-instances",
        type=int,
        default=limits.MAX_INSTANCES,
        help="live partial matches per engine lane (0: unlimited)",
    )
    parser.add_argument(
        "--max-time-jump",
        type=int,
        default=limits.MAX_TIME_JUMP_SECONDS,
        help="seconds an event of a stream without a clock (no time unit, or --replayed) may "
        "be ahead of its stream's newest event",
    )
    parser.add_argument(
        "--replayed",
        action="append",
        default=[],
        metavar="STREAM",
        help="an input stream whose times are a recording's, not the clock's: its events may "
        "run past the wall clock, up to --max-time-jump past its newest (repeatable)",
    )
    parser.add_argument(
        "--max-alerts-per-epoch",
        type=int,
        default=limits.MAX_ALERTS_PER_EPOCH,
        help="alerts one subscription may make from one epoch (0: unlimited)",
    )
    parser.add_argument(
        "--max-alert-bytes-per-epoch",
        type=int,
        default=limits.MAX_ALERT_BYTES_PER_EPOCH,
        help="bytes of alerts one subscription may make from one epoch (0: unlimited)",
    )
    parser.add_argument(
        "--max-steps-per-epoch",
        type=int,
        default=limits.MAX_STEPS_PER_EPOCH,
        help="steps one subscription may cause in one epoch: instances tested and made, "
        "matches, a recomputation's candidates (0: unlimited)",
    )
    parser.add_argument(
        "--max-engine-steps-per-epoch",
        type=int,
        default=limits.MAX_ENGINE_STEPS_PER_EPOCH,
        help="steps one engine lane may take in one epoch; past it each subscription that "
        "took its share is cut (0: unlimited)",
    )
    parser.add_argument(
        "--max-client-steps-per-epoch",
        type=int,
        default=limits.MAX_CLIENT_STEPS_PER_EPOCH,
        help="steps one client's subscriptions may take together in one epoch of an engine "
        "lane; past it each that took its share is cut (0: unlimited; per client in --tokens)",
    )
    parser.add_argument(
        "--max-open-epoch-events",
        type=int,
        default=limits.MAX_OPEN_EPOCH_EVENTS,
        help="events of one client's waiting in open epochs (once for each shard they wait "
        "for); past it its requests with events are refused until a watermark or a later t1 "
        "closes them (0: unlimited; per client in --tokens)",
    )
    parser.add_argument(
        "--snapshot-every-batches",
        type=int,
        default=1_000,
        help="checkpoint (shard snapshots, log compaction) after this many batches (0: off)",
    )
    parser.add_argument(
        "--snapshot-every-seconds",
        type=float,
        default=60.0,
        help="checkpoint this many seconds after the last one if batches came since, at the "
        "next batch or, on an idle server, within half a second (0: off)",
    )
    parser.add_argument(
        "--snapshots-kept",
        type=int,
        default=2,
        help="checkpoints kept; the event log is compacted up to the oldest (at least 1)",
    )
    add_plan_costs_argument(parser, "the planner's constants for the child shards")
    parser.add_argument(
        "--shard-cpus",
        metavar="auto|LIST",
        help="pin child shard i to the i-th CPU of LIST (e.g. 2,3), or auto: the last CPUs "
        "this process may use, one a shard, keeping one for the front; the front runs on the "
        "CPUs left (default: nothing pinned)",
    )
    parser.add_argument("--workers", type=int, default=256, help="gRPC worker threads")
    parser.add_argument("--grace", type=float, default=10.0, help="shutdown grace, seconds")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics on this port of --host, at /metrics (0: any free port)",
    )
    parser.add_argument(
        "--shard-metrics-port",
        type=int,
        metavar="PORT",
        help="each child shard serves its own metrics on 127.0.0.1:PORT+INDEX (0: any free "
        "port, in the shard's log); shards on their own take cesar shard --metrics-port",
    )
    parser.add_argument(
        "--console-port",
        type=int,
        metavar="PORT",
        help="serve the web console on this port of --host, behind the same tokens "
        "(0: any free port; default: off)",
    )
    parser.add_argument(
        "--ready-file",
        type=Path,
        metavar="PATH",
        help="write HOST:PORT here once the server answers (removed when it stops)",
    )
    parser.set_defaults(handler=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server."""
    from cesar.server.front.checkpoints import SnapshotPolicy
    from cesar.server.front.serve import ServeConfig, serve
    from cesar.server.host.calibrate import given

    try:
        costs = given(args.plan_costs)
    except ValueError as exc:
        print(f"cesar: --plan-costs: {exc}", file=sys.stderr)
        return 2
    return serve(
        ServeConfig(
            data_dir=args.data_dir,
            host=args.host,
            port=args.port,
            shards=len(args.shard) or args.shards,
            shard_addresses=tuple(args.shard),
            shard_secret_file=args.shard_secret_file,
            shard_tls_ca=args.shard_tls_ca,
            tokens=args.tokens,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            streams=tuple(args.stream),
            retention=args.retention,
            max_subscriptions=args.max_subscriptions,
            max_query_bytes=args.max_query_bytes,
            max_listens=args.max_listens,
            max_streams=args.max_streams,
            max_instances_per_subscription=args.max_instances_per_subscription or None,
            max_instances=args.max_instances or None,
            max_alerts_per_epoch=args.max_alerts_per_epoch or None,
            max_alert_bytes_per_epoch=args.max_alert_bytes_per_epoch or None,
            max_steps_per_epoch=args.max_steps_per_epoch or None,
            max_engine_steps_per_epoch=args.max_engine_steps_per_epoch or None,
            max_client_steps_per_epoch=args.max_client_steps_per_epoch,
            max_open_epoch_events=args.max_open_epoch_events,
            max_time_jump=args.max_time_jump,
            replayed=frozenset(args.replayed),
            snapshots=SnapshotPolicy(
                args.snapshot_every_batches, args.snapshot_every_seconds, args.snapshots_kept
            ),
            workers=args.workers,
            grace=args.grace,
            log_level=args.log_level,
            ready_file=args.ready_file,
            console_port=args.console_port,
            metrics_port=args.metrics_port,
            shard_metrics_port=args.shard_metrics_port,
            plan_costs=costs,
            shard_cpus=args.shard_cpus,
        )
    )
