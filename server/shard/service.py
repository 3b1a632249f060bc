"""The shard's ``cesar.v1.Shard`` service: gRPC in, :class:`~cesar.server.shard.state.ShardState`
calls under one lock, gRPC out; only callers presenting the front's secret get in.

Apply's responses are the serialized messages :class:`~cesar.server.shard.lanes.Responses`
wrote, sent as they are (:func:`add_to_server`).
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from cesar.server.host.metrics import Histogram
from cesar.server.host.snapshots import SnapshotError
from cesar.server.shard.state import ShardState
from cesar.v1 import cesar_pb2, shard_pb2, shard_pb2_grpc

log = logging.getLogger("cesar.shard")


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
