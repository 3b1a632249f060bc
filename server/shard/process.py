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
module only translates messages and keeps the lanes apart.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import fields
from pathlib import Path
from typing import Any

import grpc

from cesar.automata.schema import Event, StreamSchema, epochs, parse_stream_spec
from cesar.automata.shape import QueryCache
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.planned import PlanCosts
from cesar.server.engine.sharing import placed
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from cesar.server.host import snapshots
from cesar.server.host.calibrate import calibrate
from cesar.server.host.collector import tune_collector
from cesar.server.host.logs import configure_logging
from cesar.server.host.metrics import Histogram, serve_metrics
from cesar.server.host.rss import rss_bytes
from cesar.server.host.snapshots import SnapshotError
from cesar.server.host.tls import server_credentials
from cesar.server.shard.lanes import Lane, Responses, emit
from cesar.server.shard.metrics import collect
from cesar.server.shard.options import add_shard_arguments
from cesar.server.wire.alertbytes import notice_body
from cesar.server.wire.arrowevents import lane_table_events
from cesar.server.wire.client import GRPC_OPTIONS
from cesar.server.wire.convert import trusted_event
from cesar.server.wire.source import Source, compile_source, parse_source
from cesar.v1 import cesar_pb2, shard_pb2, shard_pb2_grpc

log = logging.getLogger("cesar.shard")


class ShardState:
    """The lanes of one shard; install / remove subscriptions and apply epochs.

    At most ``max_alerts_per_epoch`` alerts and ``max_alert_bytes_per_epoch``
    bytes of alerts of one subscription leave one epoch (None: no limit); the
    rest are counted (``alerts_dropped``) and the subscription gets one notice,
    and another only after it has recovered (:meth:`Lane.settle`).  The limits
    follow the event log, so a restart that replays it sends the same alerts.
    """

    def __init__(
        self,
        options: EngineOptions,
        max_alerts_per_epoch: int | None = None,
        directory: Path | None = None,
        max_alert_bytes_per_epoch: int | None = None,
    ) -> None:
        self.options = options
        self.max_alerts_per_epoch = max_alerts_per_epoch
        self.max_alert_bytes_per_epoch = max_alert_bytes_per_epoch
        self.directory = directory
        self.alerts_dropped = 0
        self.lanes: dict[str, Lane] = {}
        self.output: dict[str, tuple[str, str]] = {}
        self.queries = QueryCache()
        self.loaded: dict[str, tuple[RunSnapshot, dict[str, int]]] | None = None
        self.place = (0, 1)
        """(this shard's index, the shard count) in the front's order, from its last Load."""
        self.server = 0
        """The identity of the server whose front sent the last Load (0: none given)."""
        self.held: dict[str, list[Event]] = {}
        """Per lane, the events of an epoch that came in parts (``continued``), until its last."""
        self._schemas: dict[str, StreamSchema] = {}

    def _schema(self, spec: str) -> StreamSchema:
        """The schema of ``spec``, parsed once per distinct spec."""
        schema = self._schemas.get(spec)
        if schema is None:
            schema = self._schemas[spec] = parse_stream_spec(spec)
        return schema

    def install(self, request: shard_pb2.InstallRequest) -> None:
        """Build and subscribe a query in its lane, from the algebra the front compiled (or,
        for a CEL query of a shape seen before, from its shape's template)."""
        schemas = {s.name: s for s in map(self._schema, request.stream_specs)}
        algebra = request.algebra if request.HasField("algebra") else None
        parsed = parse_source(Source(request.shape_text, algebra))
        query = compile_source(parsed, schemas, request.name, self.queries)
        saved = self.loaded.get(request.lane) if self.loaded is not None else None
        since = None
        if self.loaded is not None:
            if saved is None or request.subscription not in saved[0].since:
                raise SnapshotError(
                    f"subscription {request.subscription} is not in the loaded snapshot's "
                    f"lane {request.lane}"
                )
            since = saved[0].since[request.subscription]
        lane = self.lanes.get(request.lane)
        if lane is None:
            lane = self.lanes[request.lane] = Lane(Engine(self.options))
            if saved is not None:
                prepare(lane.engine, saved[0])
        client = (request.client, request.client_steps) if request.client_steps else None
        lane.engine.subscribe(request.subscription, query.automata, since, query.pattern, client)
        lane.streams[query.name] = request.subscription
        self.output[request.subscription] = (request.lane, query.name)

    def remove(self, request: shard_pb2.RemoveRequest) -> None:
        """Unsubscribe a query from its lane."""
        lane_name, stream = self.output.pop(request.subscription)
        lane = self.lanes[lane_name]
        lane.engine.unsubscribe(request.subscription)
        del lane.streams[stream]

    def apply(self, request: shard_pb2.ApplyRequest) -> list[bytes]:
        """Process each lane's epochs in order; the alerts made, in order, in serialized
        ApplyResponse messages of at most about :data:`~cesar.server.shard.lanes.RESPONSE_BYTES`
        each.  A lane's last
        epoch marked ``continued`` is held until the message with its last part, then
        processed whole."""
        out = Responses()
        for lane_events in request.lanes:
            lane = self.lanes.get(lane_events.lane)
            if lane is None:
                continue
            engine = lane.engine
            if lane_events.arrow:
                events = list(lane_table_events(lane_events.arrow))
            else:
                events = [trusted_event(e) for e in lane_events.events]
            events = self.held.pop(lane_events.lane, []) + events
            if lane_events.continued and events:
                last = len(events)
                while last and events[last - 1].t1 == events[-1].t1:
                    last -= 1
                events, self.held[lane_events.lane] = events[:last], events[last:]
            for epoch in epochs(events):
                self.alerts_dropped += emit(
                    lane,
                    engine.process_matches(epoch),
                    out,
                    self.max_alerts_per_epoch,
                    self.max_alert_bytes_per_epoch,
                )
                for notice in engine.notices:
                    out.add(notice.subscription, notice_body(notice.reason))
                engine.notices.clear()
        return out.messages()

    def snapshot(self, position: int, keep: set[int]) -> int:
        """Save every lane's run state as the snapshot at ``position``; its size in bytes.

        The snapshot names :attr:`place` and :attr:`server`, so it is never loaded in another
        place nor by another server.  Deletes the
        snapshots at positions not in ``keep``.
        """
        assert not self.held, "a snapshot between the parts of an epoch"
        directory = self._directory()
        data = {
            "place": list(self.place),
            "server": self.server,
            "alerts_dropped": self.alerts_dropped,
            "lanes": {
                name: {"run": capture(lane.engine).to_data(), "capped": dict(lane.capped)}
                for name, lane in self.lanes.items()
            },
        }
        size = snapshots.write(directory, position, data)
        snapshots.prune(directory, keep | {position})
        return size

    def load(self, position: int, place: tuple[int, int] = (0, 1), server: int = 0) -> None:
        """Drop every lane; hold the snapshot at ``position`` (0: none) for the installs that
        follow.  Raises SnapshotError (the shard stays empty) for one that cannot be used:
        damaged, written in another ``place`` (shard index, shard count) — a snapshot
        copied from another shard's directory, or shards given in another order — or by
        another ``server`` (another deployment's snapshot at the same place)."""
        self.lanes.clear()
        self.output.clear()
        self.held.clear()
        self.alerts_dropped = 0
        self.loaded = None
        self.place = place
        self.server = server
        if not position:
            return
        data = snapshots.read(self._directory(), position)
        by = data.get("server") if isinstance(data, dict) else None
        if by is not None and by != server:
            raise SnapshotError(
                f"it was written by another server (identity {by}, this one's {server}): a "
                "snapshot of another deployment, or a data directory shared by two servers?"
            )
        written = data.get("place") if isinstance(data, dict) else None
        if written is not None and written != list(place):
            raise SnapshotError(
                f"it was written in another place (shard, shard count: {written}) than this "
                f"shard's {list(place)}: a snapshot copied from another shard, or shards given "
                "in another order?"
            )
        try:
            loaded = {
                name: (RunSnapshot.from_data(lane["run"]), _capped(lane["capped"]))
                for name, lane in data["lanes"].items()
            }
            dropped = int(data["alerts_dropped"])
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise SnapshotError(f"damaged: unexpected content ({exc!r})") from None
        self.loaded, self.alerts_dropped = loaded, dropped

    def resume(self) -> int:
        """Restore the loaded snapshot's run state into the lanes installed since; the number
        of live instances."""
        for name, (saved, capped) in (self.loaded or {}).items():
            lane = self.lanes.get(name)
            if lane is not None:
                restore(lane.engine, saved)
                subscriptions = set(lane.streams.values())
                lane.capped = {s: n for s, n in capped.items() if s in subscriptions}
        self.loaded = None
        return sum(len(lane.engine.state.instances) for lane in self.lanes.values())

    def _directory(self) -> Path:
        if self.directory is None:
            raise SnapshotError("this shard was started without --data-dir")
        return self.directory

    def counters(self) -> dict[str, int]:
        """Engine counters summed over lanes, plus live instances, nodes, subscriptions, lanes,
        the queries installed from their shape's template (bound) or built in full, and the
        planner's figures (planned pattern subscriptions, switches, lazy runs' holdings)."""
        total: dict[str, int] = {
            "lanes": len(self.lanes),
            "instances": 0,
            "nodes": 0,
            "rss_bytes": rss_bytes(),
            "alerts_dropped": self.alerts_dropped,
            "subscriptions": 0,
            "queries_bound": self.queries.counters["bound"],
            "queries_compiled": self.queries.counters["compiled"],
        }
        for lane in self.lanes.values():
            engine = lane.engine
            for f in fields(engine.counters):
                total[f.name] = total.get(f.name, 0) + int(getattr(engine.counters, f.name))
            total["instances"] += len(engine.state.instances)
            total["subscriptions"] += len(engine.subscriptions)
            total["nodes"] += len(engine.program.dag.nodes)
            for name, value in engine.planner.figures().items():
                total[name] = total.get(name, 0) + value
            total["arithmetic_faults"] = (
                total.get("arithmetic_faults", 0) + engine.faults.arithmetic
            )
        return total

    def plans(self) -> dict[str, str]:
        """Per planned pattern subscription, the plan it runs now and why."""
        out: dict[str, str] = {}
        for lane in self.lanes.values():
            for subscription in lane.engine.planner.planned:
                described = lane.engine.planner.describe(subscription)
                assert described is not None
                out[subscription] = described
        return out

    def place_of(self, subscription: str) -> shard_pb2.PlaceResponse:
        """Where ``subscription`` sits here: its template edges (:meth:`edges_of`), the
        partial matches it holds, the steps charged to it in the latest epoch, its budgets."""
        engines = [lane.engine for lane in self.lanes.values()]
        mine = [e for e in engines if subscription in e.program]
        return shard_pb2.PlaceResponse(
            edges=self.edges_of(subscription),
            held=sum(e.held(subscription) for e in mine),
            steps=sum(e.work.steps_of(subscription) for e in mine),
            instance_limit=self.options.max_instances_per_subscription or 0,
            step_limit=self.options.max_steps or 0,
        )

    def edges_of(self, subscription: str) -> list[shard_pb2.PlacedEdge]:
        """The template edges ``subscription`` uses in each lane, with their sharers."""
        return [
            shard_pb2.PlacedEdge(
                lane=name,
                edge=edge,
                source=source,
                target=target,
                kind=kind,
                stream=stream,
                template=template,
                sharers=sharers,
            )
            for name, lane in sorted(self.lanes.items())
            for edge, source, target, kind, stream, template, sharers in placed(
                lane.engine, subscription
            )
        ]


class ShardServicer(shard_pb2_grpc.ShardServicer):
    """The internal service.  The front serializes its calls; the lock keeps out any other.

    A shard takes work only once loaded (a Load since it started): a shard that
    restarted behind the front's back answers FAILED_PRECONDITION instead of
    applying epochs to lanes it no longer has, and the front reloads it.
    """

    def __init__(self, index: int, state: ShardState) -> None:
        self.index = index
        self.state = state
        self.lock = threading.Lock()
        self.loaded = False
        self.apply_seconds = Histogram()
        """Wall seconds of each Apply, from its arrival (lock wait included) to its alerts."""

    def counters(self) -> dict[str, int]:
        """The state's counters, read under the lock."""
        with self.lock:
            return self.state.counters()

    def _check_loaded(self, context: grpc.ServicerContext) -> None:
        if not self.loaded:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                "this shard (re)started and holds no state yet: the front must Load it",
            )

    def Install(
        self, request: shard_pb2.InstallBatch, context: grpc.ServicerContext
    ) -> shard_pb2.InstallResponse:
        with self.lock:
            self._check_loaded(context)
            for install in request.subscriptions:
                try:
                    self.state.install(install)
                except SnapshotError as exc:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return shard_pb2.InstallResponse()

    def Remove(
        self, request: shard_pb2.RemoveRequest, context: grpc.ServicerContext
    ) -> shard_pb2.RemoveResponse:
        with self.lock:
            self._check_loaded(context)
            if request.subscription not in self.state.output:
                context.abort(
                    grpc.StatusCode.NOT_FOUND, f"no subscription {request.subscription} here"
                )
            self.state.remove(request)
        return shard_pb2.RemoveResponse()

    def Apply(
        self, request: shard_pb2.ApplyRequest, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        started = time.perf_counter()
        with self.lock:
            self._check_loaded(context)
            responses = self.state.apply(request)
        self.apply_seconds.observe(time.perf_counter() - started)
        yield from responses

    def Stats(
        self, request: cesar_pb2.StatsRequest, context: grpc.ServicerContext
    ) -> cesar_pb2.ShardStats:
        with self.lock:
            plans = self.state.plans()
        return cesar_pb2.ShardStats(shard=self.index, counters=self.counters(), plans=plans)

    def Snapshot(
        self, request: shard_pb2.SnapshotRequest, context: grpc.ServicerContext
    ) -> shard_pb2.SnapshotResponse:
        started = time.monotonic()
        with self.lock:
            self._check_loaded(context)
            try:
                size = self.state.snapshot(request.position, set(request.keep))
            except (OSError, SnapshotError) as exc:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"snapshot not written: {exc}")
        seconds = time.monotonic() - started
        log.info("snapshot written", extra={"position": request.position, "bytes": size})
        return shard_pb2.SnapshotResponse(bytes=size, seconds=seconds)

    def Load(
        self, request: shard_pb2.LoadRequest, context: grpc.ServicerContext
    ) -> shard_pb2.LoadResponse:
        with self.lock:
            self.loaded = True
            try:
                self.state.load(
                    request.position, (request.shard, request.shards or 1), request.server
                )
            except SnapshotError as exc:
                log.warning(
                    "snapshot refused", extra={"position": request.position, "reason": str(exc)}
                )
                return shard_pb2.LoadResponse(ok=False, reason=str(exc))
        return shard_pb2.LoadResponse(ok=True)

    def Resume(
        self, request: shard_pb2.ResumeRequest, context: grpc.ServicerContext
    ) -> shard_pb2.ResumeResponse:
        with self.lock:
            self._check_loaded(context)
            return shard_pb2.ResumeResponse(instances=self.state.resume())

    def Place(
        self, request: shard_pb2.PlaceRequest, context: grpc.ServicerContext
    ) -> shard_pb2.PlaceResponse:
        with self.lock:
            return self.state.place_of(request.subscription)


class SecretCheck(grpc.ServerInterceptor):  # type: ignore[misc]
    """Lets through only calls carrying ``authorization: Bearer <secret>``."""

    def __init__(self, secret: str) -> None:
        self._expected = f"Bearer {secret}".encode()

        def deny(request: object, context: grpc.ServicerContext) -> None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "the shard service is internal")

        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(
        self, continuation: Callable[[object], object], details: grpc.HandlerCallDetails
    ) -> object:
        for key, value in details.invocation_metadata or ():
            if key == "authorization" and hmac.compare_digest(str(value).encode(), self._expected):
                return continuation(details)
        return self._deny


def add_to_server(servicer: ShardServicer, server: grpc.Server) -> None:
    """Register ``servicer`` as ``cesar.v1.Shard``, as the generated code would, except that
    Apply's responses are sent as the servicer wrote them (serialized ApplyResponse
    messages, :class:`~cesar.server.shard.lanes.Responses`)."""
    service = shard_pb2.DESCRIPTOR.services_by_name["Shard"]
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in service.methods:
        behaviour = getattr(servicer, method.name)
        decode = _message_class(method.input_type).FromString
        if method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                behaviour, request_deserializer=decode, response_serializer=_as_written
            )
        else:
            encode = _message_class(method.output_type).SerializeToString
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                behaviour, request_deserializer=decode, response_serializer=encode
            )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service.full_name, handlers),)
    )


def _message_class(descriptor: Any) -> Any:
    """The generated class of a message of shard.proto or of cesar.proto."""
    module = shard_pb2 if descriptor.file is shard_pb2.DESCRIPTOR else cesar_pb2
    return getattr(module, descriptor.name)


def _as_written(message: bytes) -> bytes:
    return message


def _capped(saved: object) -> dict[str, int]:
    """A snapshot's capped subscriptions: a map to calm epochs (a list in older snapshots)."""
    if isinstance(saved, dict):
        return {str(s): int(n) for s, n in saved.items()}
    if isinstance(saved, list):
        return {str(s): 0 for s in saved}
    raise TypeError(f"capped is a {type(saved).__name__}")


def _exit_with_parent() -> None:
    """Block until the front closes our stdin (it exited or died), then leave at once."""
    while sys.stdin.buffer.read(4096):
        pass
    os._exit(0)


def run(args: argparse.Namespace) -> int:
    """Serve the shard until SIGTERM (on its own) or until the front's pipe closes (child)."""
    configure_logging(args.log_level, f"shard-{args.index}")
    tune_collector()
    standalone = args.listen is not None
    try:
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
        costs = calibrate() if standalone else _costs()
    except ValueError as exc:
        print(f"cesar shard: {exc}", file=sys.stderr)
        return 2
    log.info(
        "plan constants measured" if standalone else "plan constants from the front",
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
