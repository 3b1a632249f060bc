"""A shard process: one engine per lane, applying whole epochs sent by the front.

As the front's child, ``python -m cesar.server.shard.process`` reads a secret
from the first line of its standard input, serves the internal
``cesar.v1.Shard`` service on loopback to callers that present it
(``authorization: Bearer <secret>``; anyone else gets UNAUTHENTICATED), prints
``ready <port>`` on stdout once listening, and exits as soon as its standard
input reaches end of file — the front holds the other end of that pipe, so a
shard never outlives its front, even one killed with ``kill -9``.

On its own (``cesar shard --listen HOST:PORT --data-dir DIR --secret-file F``,
optionally with TLS) it serves that address until SIGTERM, for a front on
another machine (``cesar serve --shard HOST:PORT``); its snapshots live in its
data directory, so a restarted shard resumes from them when the front
reconnects.  The engines (:class:`~cesar.server.engine.engine.Engine`) are the core; this
module runs the process; :mod:`cesar.server.shard.state` keeps the lanes apart and
:mod:`cesar.server.shard.service` translates messages.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from concurrent import futures

import grpc

from cesar.server.engine.engine import EngineOptions
from cesar.server.engine.planned import PlanCosts
from cesar.server.host.calibrate import calibrate, given
from cesar.server.host.collector import tune_collector
from cesar.server.host.cpus import parse_cpus, pin
from cesar.server.host.logs import configure_logging
from cesar.server.host.metrics import serve_metrics
from cesar.server.host.tls import server_credentials
from cesar.server.shard.metrics import collect
from cesar.server.shard.options import add_shard_arguments
from cesar.server.shard.service import SecretCheck, ShardServicer, add_to_server
from cesar.server.shard.state import ShardState
from cesar.server.wire.transport import GRPC_OPTIONS

log = logging.getLogger("cesar.shard")


def _exit_with_parent() -> None:
    """Block until the front closes our stdin (it exited or died), then leave at once."""
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def _warm_arrow() -> None:
    """Import pyarrow and make its first array (:func:`~cesar.server.wire.arrowevents.warm_up`),
    in the thread that calls it: at the module's top the import (numpy and pyarrow, ~0.13
    CPU-s) would fall on every shard's start, whether it ever sees Arrow rows or not."""
    from cesar.server.wire.arrowevents import warm_up

    warm_up()


def run(args: argparse.Namespace) -> int:
    """Serve the shard until SIGTERM (on its own) or until the front's pipe closes (child)."""
    configure_logging(args.log_level, f"shard-{args.index}")
    tune_collector()
    standalone = args.listen is not None
    try:
        if args.cpus is not None:  # before any thread starts: they all inherit it
            pin(parse_cpus(args.cpus))
            log.info("pinned", extra={"cpus": args.cpus})
        secret = _secret(args)
        credentials = server_credentials(args.tls_cert, args.tls_key) if standalone else None
        if standalone and args.data_dir is None:
            raise ValueError("--listen needs --data-dir (its snapshots live there)")
        if args.data_dir is not None:
            args.data_dir.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        print(f"cesar shard: {exc}", file=sys.stderr)
        return 2
    try:
        pinned = given(args.plan_costs) if standalone else None
        if not standalone:
            costs, source = _costs(), "from the front"
        elif pinned is None:
            costs, source = calibrate(), "measured"
        else:
            costs, source = pinned, "given"
    except ValueError as exc:
        print(f"cesar shard: {exc}", file=sys.stderr)
        return 2
    # while the shard starts (after calibrating, which it would disturb): pyarrow's import
    # and first array, off the start's path and the first Apply of Arrow rows
    threading.Thread(target=_warm_arrow, name="arrow-warm-up", daemon=True).start()
    log.info(
        f"plan constants {source}",
        extra={"look": costs.look, "chain": costs.chain, "recompute": costs.recompute},
    )
    state = ShardState(
        EngineOptions(
            plans=True,
            plan_costs=costs,
            max_instances_per_subscription=args.max_instances_per_subscription or None,
            max_instances=args.max_instances or None,
            max_steps=args.max_steps_per_epoch or None,
            max_engine_steps=args.max_engine_steps_per_epoch or None,
        ),
        args.max_alerts_per_epoch or None,
        args.data_dir,
        args.max_alert_bytes_per_epoch or None,
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[*GRPC_OPTIONS, ("grpc.so_reuseport", 0)],
        interceptors=[SecretCheck(secret)],
    )
    servicer = ShardServicer(args.index, state)
    add_to_server(servicer, server)
    address = args.listen if standalone else "127.0.0.1:0"
    try:
        if credentials is not None:
            port = server.add_secure_port(address, credentials)
        else:
            port = server.add_insecure_port(address)
    except RuntimeError as exc:
        print(f"cesar shard: cannot listen on {address} ({exc})", file=sys.stderr)
        return 2
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: server.stop(grace=5))
    if standalone:
        signal.signal(signal.SIGINT, lambda *_: server.stop(grace=5))
    else:
        threading.Thread(target=_exit_with_parent, daemon=True, name="parent-watch").start()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the front decides when shards stop
    print(f"ready {port}", flush=True)
    log.info("shard listening", extra={"address": address, "port": port, "tls": bool(credentials)})
    if args.metrics_port is not None:
        host = args.metrics_host or (args.listen.rpartition(":")[0] if standalone else "127.0.0.1")
        index = args.index
        bound = serve_metrics(
            host,
            args.metrics_port,
            lambda: collect(index, servicer.counters, servicer.apply_seconds),
        )
        if standalone:
            print(f"metrics http://{host}:{bound}/metrics", flush=True)
        log.info("metrics", extra={"address": f"{host}:{bound}"})
    server.wait_for_termination()
    return 0


def _secret(args: argparse.Namespace) -> str:
    """The secret callers must present: from ``--secret-file`` on its own, else stdin's first
    line (the front writes it)."""
    if args.listen is None:
        secret = sys.stdin.buffer.readline().decode().strip()
        if not secret:
            raise ValueError("expected a secret on the first line of standard input")
        return secret
    if args.secret_file is None:
        raise ValueError("--listen needs --secret-file (the front presents that secret)")
    secret = str(args.secret_file.read_text()).strip()
    if len(secret) < 16:
        raise ValueError(f"--secret-file {args.secret_file}: a secret of 16 characters or more")
    return secret


def _costs() -> PlanCosts:
    """The planner's constants the front measured on this host: stdin's second line, ``look
    chain recompute`` (the front's shards share one measurement)."""
    words = sys.stdin.buffer.readline().decode().split()
    try:
        look, chain, recompute = map(float, words)
    except ValueError:
        raise ValueError("expected 'look chain recompute' on the second line of stdin") from None
    return PlanCosts(look=look, chain=chain, recompute=recompute)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.server.shard.process")
    add_shard_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
