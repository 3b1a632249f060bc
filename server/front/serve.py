"""``cesar serve``: the front process, its shard processes and the gRPC server.

Start-up: open the catalog under ``--data-dir``, start the shards, replay the
catalog into them, then serve the public API with the standard health and
reflection services.  SIGTERM or SIGINT shut down gracefully: health turns
NOT_SERVING, intake stops (new calls get UNAVAILABLE), Listen streams end, the
server keeps answering until no call came for :data:`DRAIN_QUIET` seconds (see
:func:`drain`), in-flight calls finish (up to ``--grace`` seconds), the catalog is
checkpointed, and the shards exit.  If a child shard process dies the front stops
too, with exit status 1: it cannot go on consistently, and a restart rebuilds
every shard from the catalog.  With shards on their own (``--shard HOST:PORT``)
the front instead answers UNAVAILABLE while it waits for the lost shard to be
reachable again, then reloads every shard from the latest checkpoint and the
log.
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from cesar.automata.schema import EventError, TimeUnit
from cesar.server.console.app import Console
from cesar.server.engine.planned import PlanCosts
from cesar.server.front import limits
from cesar.server.front.auth import Clients, Limits, TokensError, parse_tokens
from cesar.server.front.catalog import RESTORE, Catalog, CatalogError
from cesar.server.front.checkpoints import NoCheckpoint, SnapshotPolicy
from cesar.server.front.errors import AlreadyExists
from cesar.server.front.front import Front
from cesar.server.front.metrics import collect
from cesar.server.front.repair import RepairError, drop_events, input_schema
from cesar.server.front.service import CesarServicer, add_to_server
from cesar.server.front.startup import ReplayError
from cesar.server.host.collector import tune_collector
from cesar.server.host.cpus import Placement, PlacementError, allowed, pin, place
from cesar.server.host.logs import configure_logging
from cesar.server.host.metrics import serve_metrics
from cesar.server.host.stopping import Stopping
from cesar.server.host.tls import TlsError, server_credentials
from cesar.server.shard.pool import RemoteShards, ShardFailure, ShardPool
from cesar.server.wire.arrowevents import warm_up
from cesar.server.wire.eventfile import Ingest, tick_time
from cesar.server.wire.transport import GRPC_OPTIONS
from cesar.v1 import cesar_pb2

log = logging.getLogger("cesar.front")

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
SERVICE = cesar_pb2.DESCRIPTOR.services_by_name["Cesar"].full_name
SHUTDOWN_MARGIN = 30.0  # seconds past --grace before a stuck shutdown exits hard
DRAIN_QUIET = 0.2  # seconds without a call before gRPC's own shutdown begins
DRAIN_MAX = 2.0  # seconds at most spent draining (never more than --grace)


@dataclass(frozen=True)
class ServeConfig:
    """Everything ``cesar serve`` is started with; the command line builds it.

    Sizes and counts are per client (``max_subscriptions``, ``max_query_bytes``,
    ``max_listens``), per subscription (``max_instances_per_subscription``,
    ``max_steps_per_epoch``), per engine (``max_instances``)
    or per subscription (``retention``: alerts kept; ``max_alerts_per_epoch``);
    None is unlimited; ``grace`` and ``max_time_jump`` are in seconds.
    """

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 50051
    shards: int = 1
    tokens: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    streams: Sequence[str] = field(default_factory=tuple)
    retention: int = 100_000
    max_subscriptions: int = limits.MAX_SUBSCRIPTIONS
    max_query_bytes: int = limits.MAX_QUERY_BYTES
    max_listens: int = limits.MAX_LISTENS
    max_streams: int = limits.MAX_STREAMS
    max_instances_per_subscription: int | None = limits.MAX_INSTANCES_PER_SUBSCRIPTION
    max_instances: int | None = limits.MAX_INSTANCES
    max_alerts_per_epoch: int | None = limits.MAX_ALERTS_PER_EPOCH
    max_alert_bytes_per_epoch: int | None = limits.MAX_ALERT_BYTES_PER_EPOCH
    max_steps_per_epoch: int | None = limits.MAX_STEPS_PER_EPOCH
    max_engine_steps_per_epoch: int | None = limits.MAX_ENGINE_STEPS_PER_EPOCH
    max_client_steps_per_epoch: int = limits.MAX_CLIENT_STEPS_PER_EPOCH
    max_open_epoch_events: int = limits.MAX_OPEN_EPOCH_EVENTS
    """Per client: its events waiting in open epochs (0: no bound)."""
    max_time_jump: int = limits.MAX_TIME_JUMP_SECONDS
    replayed: frozenset[str] = frozenset()
    """Input streams whose times may run ahead of the wall clock (``--replayed``)."""
    snapshots: SnapshotPolicy = field(default_factory=SnapshotPolicy)
    shard_addresses: Sequence[str] = field(default_factory=tuple)
    shard_secret_file: Path | None = None
    shard_tls_ca: Path | None = None
    workers: int = 256
    grace: float = 10.0
    log_level: str = "INFO"
    metrics_port: int | None = None
    """Serve Prometheus metrics at ``http://HOST:PORT/metrics`` (0: any free port)."""
    shard_metrics_port: int | None = None
    """Child shard ``i`` serves its own at ``127.0.0.1:PORT+i`` (0: any free port)."""
    ready_file: Path | None = None
    """Written (atomically, ``HOST:PORT``) once the server answers; removed when it stops."""
    console_port: int | None = None
    """Serve the web console at ``http://HOST:PORT/`` (0: any free port; None: off)."""
    plan_costs: PlanCosts | None = None
    """The planner's constants for the child shards (None: measured at start)."""
    shard_cpus: str | None = None
    """``auto`` or one CPU per child shard (:func:`~cesar.server.host.cpus.place`); the front
    keeps the CPUs left (None: nothing pinned)."""


class StartError(RuntimeError):
    """The server cannot start as configured; the message says why and what to do."""


def _credentials(config: ServeConfig) -> grpc.ServerCredentials | None:
    """TLS credentials, checked here: a key that does not belong to its certificate is refused."""
    try:
        return server_credentials(config.tls_cert, config.tls_key)
    except TlsError as exc:
        raise StartError(str(exc)) from None


def lock_data_dir(data_dir: Path, holder: str = "cesar serve") -> TextIO:
    """Hold ``data_dir/lock`` for this process's life; one server (or repair) per directory."""
    handle = open(data_dir / "lock", "a+")  # noqa: SIM115 - held until the process exits
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        raise StartError(
            f"{data_dir} is in use by {holder}; one server per data directory"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{holder} (pid {os.getpid()})\n")
    handle.flush()
    return handle


def _listen(server: grpc.Server, config: ServeConfig, credentials: object) -> int:
    """Bind the public port (exclusively: no second server shares it); its number."""
    address = f"{config.host}:{config.port}"
    try:
        if credentials:
            return int(server.add_secure_port(address, credentials))
        return int(server.add_insecure_port(address))
    except RuntimeError as exc:
        raise StartError(f"cannot listen on {address}: the port is in use ({exc})") from None


def serve(config: ServeConfig) -> int:
    """Run the server until SIGTERM/SIGINT (0) or a shard failure (1)."""
    configure_logging(config.log_level, "front")
    if config.ready_file is not None:  # a killed server's file would say "ready" at once
        config.ready_file.unlink(missing_ok=True)
    tune_collector()
    # while the shards start: the first Arrow array's one-time cost, off the first publish
    threading.Thread(target=warm_up, name="arrow-warm-up", daemon=True).start()
    defaults = Limits(
        config.max_subscriptions,
        config.max_query_bytes,
        config.max_listens,
        config.max_streams,
        config.max_client_steps_per_epoch,
        config.max_open_epoch_events,
    )
    try:
        clients = (
            parse_tokens(config.tokens.read_text(), defaults)
            if config.tokens
            else Clients(defaults)
        )
    except (OSError, TokensError) as exc:
        print(f"cesar: --tokens {config.tokens}: {exc}", file=sys.stderr)
        return 2
    if config.shards < 1:
        print("cesar: --shards must be at least 1", file=sys.stderr)
        return 2
    if config.snapshots.keep < 1:
        print("cesar: --snapshots-kept must be at least 1", file=sys.stderr)
        return 2
    if config.retention < 1:
        print("cesar: --retention must be at least 1", file=sys.stderr)
        return 2
    try:
        placement = _placement(config)
    except PlacementError as exc:
        print(f"cesar: --shard-cpus: {exc}", file=sys.stderr)
        return 2
    if placement.rest:  # the front, its threads and what it starts, off the shards' CPUs
        pin(placement.rest)
        log.info("pinned", extra={"cpus": sorted(placement.rest), "shards": placement.shards})
    if config.host not in LOOPBACK and not clients.required:
        print(
            f"cesar: warning: serving {config.host} without --tokens: anyone who reaches the "
            "port is a client",
            file=sys.stderr,
        )
        log.warning("no tokens on a non-loopback address", extra={"host": config.host})
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="rpc"),
        options=[
            *(o for o in GRPC_OPTIONS if o[0] != "grpc.max_receive_message_length"),
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", limits.MAX_REQUEST_BYTES),
        ],
    )
    try:
        config.data_dir.mkdir(parents=True, exist_ok=True)
        lock = lock_data_dir(config.data_dir)
        credentials = _credentials(config)
        port = _listen(server, config, credentials)
    except (OSError, StartError) as exc:
        print(f"cesar: {exc}", file=sys.stderr)
        return 2
    code = _run(config, clients, server, port, credentials is not None, placement.shards)
    lock.close()
    return code


def _placement(config: ServeConfig) -> Placement:
    """Where the child shards and the front run (``--shard-cpus``); nothing pinned without it."""
    if config.shard_cpus is None:
        return Placement((), frozenset())
    if config.shard_addresses:
        raise PlacementError("shards on their own run where they are started (cesar shard --cpus)")
    return place(config.shard_cpus, config.shards, allowed())


def _run(
    config: ServeConfig,
    clients: Clients,
    server: grpc.Server,
    port: int,
    tls: bool,
    shard_cpus: Sequence[int],
) -> int:
    stop = Stopping().install(signal.SIGTERM, signal.SIGINT)
    status = {"code": 0}

    recovering = threading.Lock()

    def fail() -> None:
        if shards.remote is None:  # a child died: stop; a restart rebuilds every shard
            status["code"] = 1
            stop.request()
        elif recovering.acquire(blocking=False):
            threading.Thread(
                target=_recover, args=(front, stop.event, recovering), daemon=True
            ).start()

    shard_args = [
        f"--max-instances-per-subscription={config.max_instances_per_subscription or 0}",
        f"--max-instances={config.max_instances or 0}",
        f"--max-alerts-per-epoch={config.max_alerts_per_epoch or 0}",
        f"--max-alert-bytes-per-epoch={config.max_alert_bytes_per_epoch or 0}",
        f"--max-steps-per-epoch={config.max_steps_per_epoch or 0}",
        f"--max-engine-steps-per-epoch={config.max_engine_steps_per_epoch or 0}",
    ]
    try:
        shards = ShardPool(
            config.shards,
            shard_args,
            config.log_level,
            config.data_dir,
            _remote(config),
            config.shard_metrics_port,
            config.plan_costs,
            shard_cpus,
        )
    except (OSError, ShardFailure) as exc:
        print(f"cesar: {exc}", file=sys.stderr)
        return 2
    try:
        catalog = Catalog(config.data_dir / "catalog.sqlite", config.retention)
        front = Front(
            catalog, shards, config.max_time_jump, config.snapshots, config.replayed, clients
        )
        front.start()
        front.compiler.start()
        for spec in config.streams:
            with contextlib.suppress(AlreadyExists):
                front.define_stream(clients.anonymous, spec)
        servicer = CesarServicer(front, clients, fail)
        add_to_server(servicer, server)
        health_servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        reflection.enable_server_reflection(
            (SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME), server
        )
        server.start()
        for name in ("", SERVICE):
            health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        print(f"serving {config.host}:{port}", flush=True)
        if config.metrics_port is not None:
            bound = serve_metrics(config.host, config.metrics_port, lambda: collect(front))
            print(f"metrics http://{config.host}:{bound}/metrics", flush=True)
            log.info("metrics", extra={"address": f"{config.host}:{bound}"})
        console = None
        if config.console_port is not None:
            pair = None
            if config.tls_cert is not None and config.tls_key is not None:
                pair = (config.tls_cert, config.tls_key)
            console = Console(front, clients, config.host, config.console_port, pair).start()
            print(f"console {console.url}", flush=True)
            log.info("console", extra={"address": console.url})
        if config.ready_file is not None:
            _write_ready(config.ready_file, f"{config.host}:{port}")
        log.info(
            "serving",
            extra={
                "address": f"{config.host}:{port}",
                "shards": config.shards,
                "tls": tls,
            },
        )
        _watch_shards(shards, stop, fail, front)
        _arm_shutdown_deadline(config.grace + SHUTDOWN_MARGIN, status)
        log.info("shutting down", extra={"grace_seconds": config.grace})
        health_servicer.enter_graceful_shutdown()
        if console is not None:
            console.stop()
        front.stop_intake()
        drain(servicer, min(config.grace, DRAIN_MAX))
        server.stop(config.grace).wait()
        front.close()
        if config.ready_file is not None:
            config.ready_file.unlink(missing_ok=True)
    except ShardFailure as exc:
        log.error("shard failure at start", extra={"error": str(exc)})
        status["code"] = 1
    except (CatalogError, ReplayError, NoCheckpoint) as exc:
        log.error("catalog unusable", extra={"error": str(exc)})
        print(f"cesar: {exc}", file=sys.stderr)
        status["code"] = 2
    finally:
        shards.stop()
    log.info("stopped", extra={"status": status["code"]})
    return status["code"]


def _remote(config: ServeConfig) -> RemoteShards | None:
    """The shards started on their own that ``config`` names (None: start children)."""
    if not config.shard_addresses:
        return None
    if config.shard_secret_file is None:
        raise OSError("--shard needs --shard-secret-file (the secret the shards expect)")
    return RemoteShards(
        tuple(config.shard_addresses),
        config.shard_secret_file.read_text().strip(),
        config.shard_tls_ca.read_bytes() if config.shard_tls_ca is not None else None,
    )


def _recover(front: Front, stop: threading.Event, running: threading.Lock) -> None:
    """After a shard on its own was lost: wait until every shard answers, then reload them all
    from the latest checkpoint and the log (calls get UNAVAILABLE meanwhile)."""
    try:
        while not stop.is_set():
            missing = front.shards.reconnect(10.0)
            if missing:
                log.warning("shards unreachable; still waiting", extra={"shards": missing})
                continue
            try:
                front.reload()
            except ShardFailure as exc:
                log.warning("reload failed; retrying", extra={"error": str(exc)})
                stop.wait(1.0)
                continue
            log.info("shards reconnected and reloaded")
            return
    finally:
        running.release()


def _watch_shards(
    shards: ShardPool, stop: Stopping, fail: Callable[[], None], front: Front
) -> None:
    """Return once ``stop`` says so: a signal, or a dead shard (through ``fail``).  Meanwhile take
    the checkpoints an idle front has due (:meth:`Front.checkpoint_if_due`).

    The main thread polls instead of blocking in ``stop.wait()``: a signal the
    kernel delivers to another thread does not interrupt a blocked wait, and the
    Python handler would only run at the next bytecode of the main thread.
    """
    while not stop.wait(0.5):
        dead = shards.dead()
        if dead:
            log.error("shard process exited", extra={"shards": dead})
            fail()
            continue
        try:
            front.checkpoint_if_due()
        except ShardFailure as exc:  # the shards failed meanwhile: the watch above sees it
            log.warning("idle checkpoint not taken", extra={"error": str(exc)})


def drain(servicer: CesarServicer, limit: float) -> None:
    """Keep serving, intake stopped, until no call reached ``servicer`` for
    :data:`DRAIN_QUIET` seconds or ``limit`` seconds passed.

    A call that reaches grpc-core just as ``grpc.Server.stop`` begins is cancelled, and
    its client sees CANCELLED ("typically by the caller": not a status clients retry).
    While draining, the front answers calls itself, UNAVAILABLE (intake is stopped), which
    clients retry after a back-off; so the stop begins in a pause of the calls.  Only a
    client that calls in a loop without backing off can still meet it.
    """
    began = time.monotonic()
    while True:
        now = time.monotonic()
        quiet = now - servicer.last_call
        if quiet >= DRAIN_QUIET or now - began >= limit:
            return
        time.sleep(min(DRAIN_QUIET - quiet, limit - (now - began)))


def _arm_shutdown_deadline(seconds: float, status: dict[str, int]) -> None:
    """Exit hard if shutdown is not over in ``seconds``, logging every thread's stack.

    Shutdown waits for in-flight calls, and the interpreter joins gRPC's worker
    threads at exit; a handler that never returns would keep the process, and
    its port and data-dir lock, forever.  The catalog needs no clean close (every
    acknowledged write is already committed) and the shards exit when their
    stdin pipes close with the process.
    """

    def expire() -> None:
        log.error("shutdown did not finish; exiting", extra={"seconds": seconds})
        faulthandler.dump_traceback(all_threads=True)
        os._exit(status["code"] or 1)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def repair_log(data_dir: Path, stream: str, after: str) -> int:
    """``cesar repair-log``: drop ``stream``'s logged events with ``t1 > after`` (ticks, or an
    ISO 8601 time read in the stream's unit); exit status."""
    path = data_dir / "catalog.sqlite"
    if not path.exists():
        print(f"cesar: {path} does not exist", file=sys.stderr)
        return 2
    try:
        lock = lock_data_dir(data_dir, "cesar repair-log")
        catalog = Catalog(path, retention=1)  # rewrites the log: no alert is stored
    except (OSError, StartError, CatalogError) as exc:
        print(f"cesar: {exc}", file=sys.stderr)
        return 2
    try:
        ticks, unit = _ticks(catalog, stream, after)
        done = drop_events(catalog, stream, ticks)
    except DecodeError as exc:
        print(f"cesar: the event log cannot be read ({exc}): {RESTORE}", file=sys.stderr)
        return 2
    except (RepairError, EventError) as exc:
        print(f"cesar: {exc}", file=sys.stderr)
        return 2
    finally:
        catalog.close()
        lock.close()
    print(
        f"dropped {done.events} events of {stream} after t1 = {tick_time(ticks, unit)} "
        f"from {done.batches} logged batches; start the server to rebuild the shards"
    )
    return 0


def _ticks(catalog: Catalog, stream: str, after: str) -> tuple[int, TimeUnit]:
    """``--after`` as ticks of ``stream``'s unit, and the unit (EventError naming ``--after``
    if it cannot be read)."""
    schema = input_schema(catalog, stream)
    return Ingest("--after").ticks(after, schema), schema.unit


def _write_ready(path: Path, address: str) -> None:
    """Write the ready file whole or not at all: a reader never sees half an address."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(address + "\n")
    os.replace(partial, path)
