"""A stand-in server that only acknowledges: the feed's routing measured without the engines.

:class:`AckSink` serves the public ``cesar.v1.Cesar`` API over real gRPC with
a fixed routing table and stream list (taken from a real server), and answers
every PublishBatch at once: it counts the events each shard was sent and,
with ``keep``, keeps them (as Arrow tables) for tests that check where every
event went.  Idempotency keys are honoured as the real front does.  With
``hold``, closes (a PublishBatch with a watermark and no events) wait until it
is set, as a server still applying would: tests of how many closes the feed
keeps in flight.
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pyarrow as pa

from cesar.server.wire.transport import GRPC_OPTIONS
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import cesar_pb2_grpc


@dataclass
class Received:
    """What the sink was sent, per shard."""

    events: Counter[int] = field(default_factory=Counter)
    messages: Counter[int] = field(default_factory=Counter)
    tables: dict[int, list[pa.Table]] = field(default_factory=dict)
    log: list[tuple[str, int, pa.Table]] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    watermarks: dict[int, int] = field(default_factory=dict)
    duplicates: int = 0
    closing: int = 0
    """Closes (PublishBatch without events) received and not answered yet."""
    most_closing: int = 0
    """The most closes unanswered at once."""


class _Servicer(cesar_pb2_grpc.CesarServicer):
    def __init__(self, sink: AckSink) -> None:
        self.sink = sink

    def GetRouting(
        self, request: pb.GetRoutingRequest, context: grpc.ServicerContext
    ) -> pb.RoutingTable:
        return self.sink.routing

    def ListStreams(
        self, request: pb.ListStreamsRequest, context: grpc.ServicerContext
    ) -> pb.ListStreamsResponse:
        return pb.ListStreamsResponse(streams=self.sink.streams)

    def PublishBatch(
        self, request: pb.PublishRequest, context: grpc.ServicerContext
    ) -> pb.PublishResponse:
        if not request.arrow_events:
            received = self.sink.received
            with self.sink.lock:
                received.watermarks[request.shard] = request.watermark
                received.closing += 1
                received.most_closing = max(received.most_closing, received.closing)
            if self.sink.hold is not None:
                self.sink.hold.wait()
            with self.sink.lock:
                received.closing -= 1
            return pb.PublishResponse()
        table = pa.ipc.open_stream(request.arrow_events).read_all()
        received = self.sink.received
        with self.sink.lock:
            if request.idempotency_key in received.keys:
                received.duplicates += 1
                return pb.PublishResponse(accepted=table.num_rows, duplicate=True)
            received.keys.add(request.idempotency_key)
            received.events[request.shard] += table.num_rows
            received.messages[request.shard] += 1
            if self.sink.keep:
                received.tables.setdefault(request.shard, []).append(table)
                received.log.append((request.idempotency_key, request.shard, table))
        return pb.PublishResponse(accepted=table.num_rows)


class AckSink:
    """The acknowledging server on loopback, on ``port`` (0: a free one); see the module doc."""

    def __init__(
        self,
        routing: pb.RoutingTable,
        streams: list[pb.StreamInfo],
        keep: bool = False,
        port: int = 0,
        hold: threading.Event | None = None,
    ) -> None:
        self.routing = routing
        self.streams = streams
        self.keep = keep
        self.hold = hold
        """When given, closes are answered only once it is set (a server still applying)."""
        self.lock = threading.Lock()
        self.received = Received()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=GRPC_OPTIONS)
        cesar_pb2_grpc.add_CesarServicer_to_server(_Servicer(self), self.server)
        bound = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.address = f"127.0.0.1:{bound}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)
