"""The public gRPC servicer: proto ↔ domain translation around the :class:`Front`.

As in grpc's route_guide, each method only authenticates the caller, converts
the request, calls the front and converts the answer; errors of the front
become status codes with its message (:class:`~cesar.server.front.front.FrontError`).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError

from cesar.server.front.auth import Client, Clients
from cesar.server.front.catalog import StreamRow, SubscriptionRow
from cesar.server.front.commits import Ticket, Tickets
from cesar.server.front.errors import FrontError
from cesar.server.front.front import Front
from cesar.server.front.subscribing import SubscribeItem
from cesar.server.shard.pool import ShardFailure
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import cesar_pb2_grpc

log = logging.getLogger("cesar.front")

F = TypeVar("F", bound=Callable[..., Any])
PAGE_BYTES = 1 << 20
"""The most stream descriptions one ListStreams page carries, in bytes."""


def _deadline(context: grpc.ServicerContext) -> float | None:
    """The caller's deadline as a ``time.monotonic()`` instant (None: it set none)."""
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


def _stream_info(row: StreamRow, shared_with: Sequence[str] = ()) -> pb.StreamInfo:
    return pb.StreamInfo(
        name=row.name,
        spec=row.spec,
        owner=row.owner,
        subscription=row.subscription,
        shared_with=shared_with,
    )


def _subscription(row: SubscriptionRow) -> pb.Subscription:
    return pb.Subscription(
        id=row.id,
        owner=row.owner,
        query=row.query,
        stream=row.stream,
        output_spec=row.output_spec,
        placement=pb.Placement(key_attribute=row.key_attribute, shard=row.shard),
        created_unix_ms=row.created_ms,
        last_seq=row.last_seq,
        algebra=pb.Algebra.FromString(row.algebra) if row.algebra else None,
    )


SCOPES: dict[str, frozenset[str]] = {
    "DefineStream": frozenset({"client"}),
    "ListStreams": frozenset({"client", "feed"}),
    "DeleteStream": frozenset({"client"}),
    "ShareStream": frozenset({"client"}),
    "Subscribe": frozenset({"client"}),
    "SubscribeBatch": frozenset({"client"}),
    "Unsubscribe": frozenset({"client"}),
    "ListSubscriptions": frozenset({"client"}),
    "Explain": frozenset({"client"}),
    "Listen": frozenset({"client"}),
    "Publish": frozenset({"client", "feed"}),
    "PublishBatch": frozenset({"client", "feed"}),
    "GetRouting": frozenset({"feed"}),
    "Stats": frozenset({"client", "feed"}),
}
"""Per RPC, the scopes a token needs one of (an admin token carries every scope).  The front
narrows further: a batch routed to one shard needs ``feed``, any other batch ``client``, and
Stats shows a non-admin client only what is its own."""


class CesarServicer(cesar_pb2_grpc.CesarServicer):
    """The ``cesar.v1.Cesar`` service; ``on_shard_failure`` is called when a shard is lost."""

    def __init__(self, front: Front, clients: Clients, on_shard_failure: Callable[[], None]):
        self.front = front
        self.clients = clients
        self.on_shard_failure = on_shard_failure
        self.last_call = time.monotonic()
        """When a call last reached a method (``time.monotonic()``): shutdown drains until
        none came for a while (:func:`cesar.server.front.serve.drain`)."""

    def _caller(self, context: grpc.ServicerContext, method: str) -> Client:
        """The authenticated caller of ``method``; UNAUTHENTICATED without a known token,
        PERMISSION_DENIED when its token carries none of the method's scopes (:data:`SCOPES`)."""
        self.last_call = time.monotonic()
        token = None
        for key, value in context.invocation_metadata():
            if key == "authorization" and isinstance(value, str):
                scheme, _, token = value.partition(" ")
                if scheme.lower() != "bearer":
                    token = None
        client = self.clients.authenticate(token)
        if client is None:
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or unknown bearer token (metadata 'authorization: Bearer <token>')",
            )
        assert client is not None
        allowed = SCOPES[method]
        if not any(client.may(scope) for scope in allowed):
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{method} needs a token with scope {' or '.join(sorted(allowed))}",
            )
        return client

    def _abort(self, exc: Exception, context: grpc.ServicerContext) -> None:
        """Turn a front error into its status; a shard failure also stops the server."""
        if isinstance(exc, ShardFailure):
            log.error("shard failure", extra={"error": str(exc)})
            self.on_shard_failure()
            context.abort(
                grpc.StatusCode.UNAVAILABLE, f"a shard failed: {exc}; retry once it is back"
            )
        context.abort(getattr(grpc.StatusCode, exc.code), str(exc))  # type: ignore[attr-defined]

    @staticmethod
    def _errors(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: CesarServicer, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                return method(self, request, context)
            except (FrontError, ShardFailure) as exc:
                self._abort(exc, context)

        return wrapper  # type: ignore[return-value]

    @staticmethod
    def _stream_errors(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: CesarServicer, request: Any, context: grpc.ServicerContext) -> Any:
            try:
                yield from method(self, request, context)
            except (FrontError, ShardFailure) as exc:
                self._abort(exc, context)

        return wrapper  # type: ignore[return-value]

    @_errors
    def DefineStream(
        self, request: pb.DefineStreamRequest, context: grpc.ServicerContext
    ) -> pb.StreamInfo:
        return _stream_info(
            self.front.define_stream(self._caller(context, "DefineStream"), request.spec)
        )

    @_errors
    def ListStreams(
        self, request: pb.ListStreamsRequest, context: grpc.ServicerContext
    ) -> pb.ListStreamsResponse:
        rows = self.front.stream_rows(
            self._caller(context, "ListStreams"), after=request.page_token
        )
        limit = request.page_size or len(rows)
        response = pb.ListStreamsResponse()
        size = 0
        for row, shared in rows:
            info = _stream_info(row, shared)
            size += info.ByteSize()
            if len(response.streams) >= limit or (response.streams and size > PAGE_BYTES):
                response.next_page_token = response.streams[-1].name
                break
            response.streams.append(info)
        return response

    @_errors
    def DeleteStream(
        self, request: pb.DeleteStreamRequest, context: grpc.ServicerContext
    ) -> pb.DeleteStreamResponse:
        self.front.delete_stream(self._caller(context, "DeleteStream"), request.name)
        return pb.DeleteStreamResponse()

    @_errors
    def ShareStream(
        self, request: pb.ShareStreamRequest, context: grpc.ServicerContext
    ) -> pb.StreamInfo:
        row, readers = self.front.share_stream(
            self._caller(context, "ShareStream"), request.stream, list(request.readers)
        )
        return _stream_info(row, readers)

    @_errors
    def Subscribe(
        self, request: pb.SubscribeRequest, context: grpc.ServicerContext
    ) -> pb.Subscription:
        algebra = request.algebra if request.HasField("algebra") else None
        row = self.front.subscribe(
            self._caller(context, "Subscribe"),
            request.query,
            request.name,
            algebra,
            _deadline(context),
            request.idempotency_key,
        )
        return _subscription(row)

    @_errors
    def SubscribeBatch(
        self, request: pb.SubscribeBatchRequest, context: grpc.ServicerContext
    ) -> pb.SubscribeBatchResponse:
        items = [
            SubscribeItem(
                r.query, r.name, r.algebra if r.HasField("algebra") else None, r.idempotency_key
            )
            for r in request.subscriptions
        ]
        response = pb.SubscribeBatchResponse()
        for result in self.front.subscribe_many(
            self._caller(context, "SubscribeBatch"), items, _deadline(context)
        ):
            if isinstance(result, FrontError):
                response.results.add(failure=pb.Failure(code=result.code, message=str(result)))
            else:
                response.results.add(subscription=_subscription(result))
        return response

    @_errors
    def Unsubscribe(
        self, request: pb.UnsubscribeRequest, context: grpc.ServicerContext
    ) -> pb.UnsubscribeResponse:
        self.front.unsubscribe(self._caller(context, "Unsubscribe"), request.id)
        return pb.UnsubscribeResponse()

    @_errors
    def ListSubscriptions(
        self, request: pb.ListSubscriptionsRequest, context: grpc.ServicerContext
    ) -> pb.ListSubscriptionsResponse:
        rows = self.front.subscriptions(self._caller(context, "ListSubscriptions"))
        return pb.ListSubscriptionsResponse(subscriptions=[_subscription(r) for r in rows])

    @_errors
    def Explain(
        self, request: pb.ExplainRequest, context: grpc.ServicerContext
    ) -> pb.ExplainResponse:
        text, dot, key = self.front.explain(
            self._caller(context, "Explain"), request.query, request.dot
        )
        return pb.ExplainResponse(
            text=text, dot=dot, placement=pb.Placement(key_attribute=key or "")
        )

    @_stream_errors
    def Listen(self, request: pb.ListenRequest, context: grpc.ServicerContext) -> Iterator[bytes]:
        """Serialized AlertBatch messages, sent as they are (see ``add_to_server``)."""
        client = self._caller(context, "Listen")
        yield from self.front.listen(
            client,
            list(request.subscriptions),
            dict(request.after_seq),
            context.is_active,
        )

    @_stream_errors
    def Publish(
        self,
        request_iterator: Iterator[tuple[pb.PublishRequest, bytes]],
        context: grpc.ServicerContext,
    ) -> Iterator[pb.PublishResponse]:
        """Acknowledgements in request order; up to ``PIPELINE`` batches of the stream are
        begun (validated, sent to the shards) before the oldest is acknowledged.  Each
        request comes with its bytes (``KEEP_BYTES``)."""
        client = self._caller(context, "Publish")
        begun: queue.Queue[Ticket | Tickets | BaseException | None] = queue.Queue(PIPELINE)

        def hand(item: Ticket | Tickets | BaseException | None) -> bool:
            while context.is_active():
                try:
                    begun.put(item, timeout=0.5)
                    return True
                except queue.Full:
                    continue
            return False

        def read() -> None:
            try:
                for request, data in request_iterator:
                    if not hand(self.front.begin(client, request, data)):
                        return
            except BaseException as exc:
                hand(exc)
                return
            hand(None)

        threading.Thread(target=read, daemon=True, name="publish-reader").start()
        while True:
            try:
                item = begun.get(timeout=0.5)
            except queue.Empty:
                if context.is_active():
                    continue
                return  # cancelled: the reader stopped without a word, so stop waiting for one
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item.result()

    @_errors
    def PublishBatch(
        self, received: tuple[pb.PublishRequest, bytes], context: grpc.ServicerContext
    ) -> pb.PublishResponse:
        request, data = received
        return self.front.publish(self._caller(context, "PublishBatch"), request, data)

    @_errors
    def GetRouting(
        self, request: pb.GetRoutingRequest, context: grpc.ServicerContext
    ) -> pb.RoutingTable:
        return self.front.routing_table(self._caller(context, "GetRouting"))

    @_errors
    def Stats(self, request: pb.StatsRequest, context: grpc.ServicerContext) -> pb.StatsResponse:
        return self.front.stats(self._caller(context, "Stats"))


PRESERIALIZED = frozenset({"Listen"})
"""Methods whose servicer yields response messages already serialized: Listen's AlertBatch
messages are the stored alerts framed together (:mod:`cesar.server.front.alerts`)."""


KEEP_BYTES = frozenset({"Publish", "PublishBatch"})
"""Methods whose servicer takes each request with its bytes, ``(message, data)``: the front
reads a Publish request's events from its bytes (:mod:`cesar.server.wire.protocolumns`)."""


def _already_serialized(message: bytes) -> bytes:
    return message


def add_to_server(servicer: CesarServicer, server: grpc.Server) -> None:
    """Register ``servicer`` as ``cesar.v1.Cesar``, decoding each request itself.

    gRPC's generated registration decodes requests before the servicer runs
    and answers a message it cannot decode (invalid UTF-8 in a string, nesting
    beyond protobuf's limit) with INTERNAL; here the bytes reach the servicer's
    side and such a request gets INVALID_ARGUMENT naming its message type.
    The responses of ``PRESERIALIZED`` methods are sent as the servicer made them.
    """
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in pb.DESCRIPTOR.services_by_name["Cesar"].methods:
        request_type = getattr(pb, method.input_type.name)
        serialize = (
            _already_serialized
            if method.name in PRESERIALIZED
            else getattr(pb, method.output_type.name).SerializeToString
        )
        behaviour = getattr(servicer, method.name)
        keep = method.name in KEEP_BYTES
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _decoding_stream(behaviour, request_type, keep), response_serializer=serialize
            )
        elif method.server_streaming:
            handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                _decoding(behaviour, request_type, keep), response_serializer=serialize
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _decoding(behaviour, request_type, keep), response_serializer=serialize
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))


PIPELINE = 4
"""Batches of one Publish stream begun before the oldest is acknowledged."""

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Cesar"].full_name


def _decode(request_type: Any, data: bytes, context: grpc.ServicerContext, keep: bool) -> Any:
    try:
        message = request_type.FromString(data)
        return (message, data) if keep else message
    except DecodeError as exc:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"the request is not a valid {request_type.DESCRIPTOR.full_name}: {exc}",
        )


def _decoding(
    behaviour: Callable[[Any, grpc.ServicerContext], Any], request_type: Any, keep: bool
) -> Callable[[bytes, grpc.ServicerContext], Any]:
    def handle(data: bytes, context: grpc.ServicerContext) -> Any:
        return behaviour(_decode(request_type, data, context, keep), context)

    return handle


def _decoding_stream(
    behaviour: Callable[[Iterator[Any], grpc.ServicerContext], Any], request_type: Any, keep: bool
) -> Callable[[Iterator[bytes], grpc.ServicerContext], Any]:
    def handle(data: Iterator[bytes], context: grpc.ServicerContext) -> Any:
        return behaviour((_decode(request_type, item, context, keep) for item in data), context)

    return handle
