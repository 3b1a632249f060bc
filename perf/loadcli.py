"""``cesar loadtest``'s command line and settings, apart from the load test: ``cesar`` starts fast.

The ``cesar`` command registers this module's :func:`add_loadtest_command`
through its entry point group (``pyproject.toml``); the load test itself
(:mod:`cesar.perf.loadtest`, gRPC, the workloads, the plots) is imported
only when the command runs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

TEMPLATES = (
    "stock",
    "LinearStat",
    "LinearDyn",
    "Filter",
    "NonDeterministic",
    "NonDeterministicAgg",
)
"""The workloads' names: ``stock`` and Table 2's templates (:data:`cesar.perf.loadwork.TEMPLATES`,
which a test keeps equal)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The load test's options."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--serve",
        type=int,
        default=0,
        metavar="SHARDS",
        help="start cesar serve --shards SHARDS on loopback (default 2)",
    )
    where.add_argument("--server", default="", metavar="HOST:PORT", help="a running server")
    parser.add_argument("--tokens", default="", help="with --server: the server's tokens file")
    parser.add_argument("--subscribers", type=int, default=20, help="subscriber clients (S)")
    parser.add_argument("--per-subscriber", type=int, default=5000, help="subscriptions each (K)")
    parser.add_argument("--publishers", type=int, default=2, help="publisher clients (P)")
    parser.add_argument(
        "--rate", type=float, default=1000.0, help="target events/s, 0 = as fast as acknowledged"
    )
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of load")
    parser.add_argument("--max-events", type=int, default=2_000_000, help="bound on events")
    parser.add_argument("--epoch-size", type=int, default=200, help="simultaneous events")
    parser.add_argument(
        "--churn",
        type=float,
        default=5.0,
        help="subscribes (and as many unsubscribes) per second during the load",
    )
    parser.add_argument(
        "--churn-life", type=float, default=10.0, help="seconds a churn subscription lives"
    )
    parser.add_argument("--template", choices=TEMPLATES, default="stock")
    parser.add_argument(
        "--query-file", default="", help="CEL queries, one per line, drawn at random"
    )
    parser.add_argument(
        "--prefix", default="L", help="prefix of the PUBLISH names (unique per run)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=1000, help="subscriptions per SubscribeBatch")
    parser.add_argument(
        "--no-check", dest="check", action="store_false", help="skip the comparison with cesar run"
    )
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument(
        "--in-flight",
        type=int,
        default=1,
        help="epochs whose closing watermark may be unacknowledged while the next epoch's "
        "pieces go out (1: lock-step, each epoch closed and acknowledged before the next)",
    )
    parser.add_argument("--out", default="perf/results/loadtest", help="directory for JSON + PNG")
    parser.add_argument(
        "--smoke", action="store_true", help="2 shards, 4 x 250 subscriptions, 12 s of load (CI)"
    )


def add_loadtest_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``cesar loadtest``."""
    parser = sub.add_parser("loadtest", help="drive a server with subscribers, publishers, churn")
    add_arguments(parser)
    parser.set_defaults(handler=_command)


def _command(args: argparse.Namespace) -> int:
    from cesar.perf.loadtest import command

    return command(args)


@dataclass
class Settings:
    """The run's parameters (the command line's options)."""

    serve: int
    server: str
    tokens: str
    subscribers: int
    per_subscriber: int
    publishers: int
    rate: float
    duration: float
    max_events: int
    epoch_size: int
    churn: float
    churn_life: float
    template: str
    query_file: str
    prefix: str
    seed: int
    batch: int
    check: bool
    drain_timeout: float
    out: str
    in_flight: int = 1


SMOKE = {"serve": 2, "subscribers": 4, "per_subscriber": 250, "publishers": 2, "rate": 500.0,
         "duration": 12.0, "epoch_size": 50, "churn": 5.0, "churn_life": 3.0,
         "batch": 100, "in_flight": 2}  # fmt: skip


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings from parsed options (``--smoke`` overrides the sizes)."""
    values = {k: v for k, v in vars(args).items() if k in Settings.__dataclass_fields__}
    if args.smoke:
        values.update(SMOKE, server="")
    if not values["server"] and not values["serve"]:
        values["serve"] = 2
    if values["in_flight"] < 1:
        raise SystemExit("cesar loadtest: --in-flight must be at least 1")
    return Settings(**values)
