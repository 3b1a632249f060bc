"""The options of a shard process, apart from the process: ``cesar --help`` lists them without
importing the engine (``cesar shard`` and the front's children parse them)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cesar.server.front import limits


def add_shard_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a shard process (``cesar shard`` and the front's children)."""
    parser.add_argument("--index", type=int, default=0, help="its number, for logs")
    for flag, default, what in (
        (
            "--max-instances-per-subscription",
            limits.MAX_INSTANCES_PER_SUBSCRIPTION,
            "live partial matches per subscription",
        ),
        ("--max-instances", limits.MAX_INSTANCES, "live partial matches per engine lane"),
        ("--max-alerts-per-epoch", limits.MAX_ALERTS_PER_EPOCH, "alerts per subscription"),
        ("--max-alert-bytes-per-epoch", limits.MAX_ALERT_BYTES_PER_EPOCH, "alert bytes"),
        (
            "--max-steps-per-epoch",
            limits.MAX_STEPS_PER_EPOCH,
            "steps (instances tested and made, matches) per subscription and epoch",
        ),
        (
            "--max-engine-steps-per-epoch",
            limits.MAX_ENGINE_STEPS_PER_EPOCH,
            "steps per engine lane and epoch",
        ),
    ):
        parser.add_argument(
            flag, type=int, default=default, help=f"{what} (default {default}; 0: unlimited)"
        )
    parser.add_argument("--data-dir", type=Path, help="where its snapshots are written")
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="run on its own, serving this address (else: a child reading its secret on stdin)",
    )
    parser.add_argument(
        "--secret-file", type=Path, help="with --listen: the secret the front presents"
    )
    add_plan_costs_argument(parser, "with --listen: the planner's constants")
    parser.add_argument("--tls-cert", type=Path, help="with --listen: PEM certificate chain")
    parser.add_argument("--tls-key", type=Path, help="with --listen: PEM private key")
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve this shard's metrics for Prometheus on this port (0: any free port)",
    )
    parser.add_argument(
        "--metrics-host",
        help="the address --metrics-port binds to (default: --listen's host, or 127.0.0.1)",
    )
    parser.add_argument(
        "--cpus",
        metavar="LIST",
        help="run on these CPUs only, e.g. 3 or 2-3 (as taskset -c; default: where started)",
    )
    parser.add_argument("--log-level", default="INFO")


def add_plan_costs_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--plan-costs`` (``cesar serve`` for its child shards, ``cesar shard --listen`` for
    itself), read by :func:`~cesar.server.host.calibrate.given`."""
    parser.add_argument(
        "--plan-costs",
        default=os.environ.get("CESAR_PLAN_COSTS", "measure"),
        metavar="look=X,chain=Y,recompute=Z",
        help=f"{what}, in steps of the DAG, each within 1/8-8: the same plans on every start "
        "and host (default $CESAR_PLAN_COSTS, else 'measure': measured on this host at start, "
        "about 0.2 s)",
    )
