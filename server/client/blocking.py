"""The blocking client: :class:`Client` and its :class:`Listener`.

>>> client = Client("127.0.0.1:1", token="t")   # connects at the first call
>>> client.close()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from cesar.automata.schema import StreamSchema
from cesar.client.calls import (
    PUBLISH_BATCH,
    publish_requests,
    published,
    stream_schema,
    subscribe_requests,
)
from cesar.client.delivery import Sink
from cesar.client.errors import CesarError, error, from_rpc
from cesar.client.listening import Following
from cesar.client.model import Alert, Published, Stream, Subscription
from cesar.client.resume import RETRY_EVERY, After, Positions, starts
from cesar.server.wire.client import Connection, message_data
from cesar.v1 import cesar_pb2 as pb

TIMEOUT = 60.0
"""Seconds a call may take by default, waiting for a server that is starting included."""


class Client:
    """A connection to a cesar server at ``target`` (HOST:PORT), with a bearer ``token`` and,
    with ``tls_ca`` (PEM root certificates), TLS.

    Every call waits for a server that is not up yet (one restarting answers once it has
    replayed its log) for up to ``timeout`` seconds, and raises a
    :class:`~cesar.client.errors.CesarError` that keeps the server's reason.
    Use it in a ``with`` block, or :meth:`close` it.  ``connection``: an open one to use
    instead (the CLI's), in place of ``target``, ``token`` and ``tls_ca``.
    """

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        token: str | None = None,
        tls_ca: Path | None = None,
        timeout: float = TIMEOUT,
        connection: Connection | None = None,
    ) -> None:
        self.connection = connection or Connection.open(target, token, tls_ca)
        self.timeout = timeout
        self._schemas: dict[str, StreamSchema] = {}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self.connection.close()

    def _call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        call = getattr(self.connection.stub, method)
        try:
            return call(
                request,
                metadata=self.connection.metadata,
                timeout=self.timeout if timeout is None else timeout,
                wait_for_ready=True,
            )
        except grpc.RpcError as exc:
            raise from_rpc(exc) from None

    # ------------------------------------------------------------------ streams

    def define_stream(self, spec: str) -> Stream:
        """Declare an input stream, e.g. ``Stock(Name:string,Price:float)[min]``."""
        return Stream.of(self._call("DefineStream", pb.DefineStreamRequest(spec=spec)))

    def streams(self) -> list[Stream]:
        """Every stream the caller may use, sorted by name (all pages)."""
        found: list[Stream] = []
        token = ""
        while True:
            page = self._call("ListStreams", pb.ListStreamsRequest(page_token=token))
            found.extend(Stream.of(info) for info in page.streams)
            token = page.next_page_token
            if not token:
                return found

    def delete_stream(self, name: str) -> None:
        """Remove an input stream the caller defined."""
        self._call("DeleteStream", pb.DeleteStreamRequest(name=name))

    def share(self, stream: str, readers: Sequence[str]) -> Stream:
        """Let exactly ``readers`` (client names) read a stream the caller publishes."""
        request = pb.ShareStreamRequest(stream=stream, readers=list(readers))
        return Stream.of(self._call("ShareStream", request))

    def schema(self, stream: str) -> StreamSchema:
        """The schema of ``stream`` (asked of the server once, then kept)."""
        if stream not in self._schemas:
            self._schemas.update({s.name: stream_schema(s.spec) for s in self.streams()})
        if stream not in self._schemas:
            raise error("NOT_FOUND", f"no stream {stream!r} that you may use")
        return self._schemas[stream]

    # ------------------------------------------------------------ subscriptions

    def subscribe(self, query: str, name: str = "", idempotency_key: str = "") -> Subscription:
        """Register a CEL query or a pattern.  With ``idempotency_key``, a retry of the same
        request returns the subscription it made instead of making another."""
        request = pb.SubscribeRequest(query=query, name=name, idempotency_key=idempotency_key)
        return Subscription.of(self._call("Subscribe", request))

    def subscribe_many(
        self, queries: Sequence[str], idempotency_keys: Sequence[str] | None = None
    ) -> list[Subscription | CesarError]:
        """Register many queries, 10,000 a call; per query its subscription or the error it
        met (each succeeds or fails on its own)."""
        results: list[Subscription | CesarError] = []
        for request in subscribe_requests(queries, idempotency_keys):
            response = self._call("SubscribeBatch", request)
            results.extend(
                Subscription.of(r.subscription)
                if r.HasField("subscription")
                else error(r.failure.code, r.failure.message)
                for r in response.results
            )
        return results

    def unsubscribe(self, subscription: str) -> None:
        """Remove one of the caller's subscriptions."""
        self._call("Unsubscribe", pb.UnsubscribeRequest(id=subscription))

    def subscriptions(self) -> list[Subscription]:
        """The caller's subscriptions, oldest first."""
        response = self._call("ListSubscriptions", pb.ListSubscriptionsRequest())
        return [Subscription.of(row) for row in response.subscriptions]

    def explain(self, query: str, dot: bool = False) -> str:
        """What ``query`` compiles to, as ``cesar explain`` prints it (Graphviz DOT: ``dot``)."""
        response = self._call("Explain", pb.ExplainRequest(query=query, dot=dot))
        return str(response.dot if dot else response.text)

    # ----------------------------------------------------------------- events

    def publish(
        self,
        stream: str,
        events: Iterable[Mapping[str, Any]],
        close: bool = True,
        idempotency_key: str = "",
        batch: int = PUBLISH_BATCH,
    ) -> Published:
        """Publish ``events`` of ``stream``: each its attributes and ``t1`` (``t0`` too when it
        lasts), times as ticks or datetimes.

        Sent ``batch`` at a time over one Publish stream, each acknowledged once durable
        and applied; with ``close`` the last closes its epoch, so its alerts come now.
        With ``idempotency_key`` a retried call applies nothing twice.  Returns the sum:
        rejections indexed from the first event of the call.  An event that cannot be
        sent at all (no time, a value of another Python type) is a ValueError or
        TypeError before anything is sent.
        """
        schema = self.schema(stream)
        requests = publish_requests(schema, events, batch, close, idempotency_key)
        try:
            answers = self.connection.stub.Publish(
                iter(requests), metadata=self.connection.metadata, wait_for_ready=True
            )
            return published(stream, requests, answers, batch)
        except grpc.RpcError as exc:
            raise from_rpc(exc) from None

    # ----------------------------------------------------------------- alerts

    def listen(
        self,
        subscriptions: Sequence[str] | None = None,
        after: After = None,
        checkpoint: Path | None = None,
        reconnect_for: float = 30.0,
        timeout: float | None = None,
    ) -> Listener:
        """Alerts of ``subscriptions`` (default: all of the caller's), resumed per subscription
        (:mod:`cesar.client.resume`) and through restarts of the server; see :class:`Listener`."""
        last = {s.id: s.last_seq for s in self.subscriptions()}
        seqs = starts(last, subscriptions, after, checkpoint)
        return Listener(self, subscriptions, Positions(seqs, checkpoint), reconnect_for, timeout)

    def stats(self) -> dict[str, Any]:
        """The server's counters (an admin token's: every one; a client's: its own)."""
        return message_data(self._call("Stats", pb.StatsRequest()))


class Listener(Following):
    """Alerts as they are made, as an iterator that reconnects and resumes.

    Iterate it for alerts one by one, or :meth:`batches` for the alerts of each
    message.  An alert (a batch) counts as done (its seq moves :attr:`positions` on, and
    the checkpoint file) when the next one is asked for, or at :meth:`ack`; so a program
    that stops half-way gets the rest again when it resumes: at least once, with no gap
    (remove duplicates by ``(subscription, seq)``).

    When the server goes away (a restart, a network cut) it says so once
    (``on_lost``, and a warning on the ``cesar.client`` logger) and reconnects for up to
    ``reconnect_for`` seconds, then raises :class:`~cesar.client.errors.Unavailable`.
    Iteration ends after ``timeout`` seconds, if given, or at :meth:`close`.
    """

    def __init__(
        self,
        client: Client,
        subscriptions: Sequence[str] | None,
        positions: Positions,
        reconnect_for: float,
        timeout: float | None,
    ) -> None:
        super().__init__(subscriptions, positions, reconnect_for, timeout)
        self.client = client

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Alert]:
        for batch in self.batches():
            for alert in batch:
                yield alert
                self.ack([alert])

    def deliver(self, sink: Sink | Callable[[list[Alert]], None], count: int | None = None) -> int:
        """Hand each batch to ``sink`` (a :mod:`~cesar.client.delivery` sink or a callable),
        counting it done once ``sink`` returns, until ``count`` alerts, the timeout or
        :meth:`close`; the number delivered."""
        handle = sink if callable(sink) else sink.deliver
        delivered = 0
        for batch in self.batches():
            chosen = batch if count is None else batch[: count - delivered]
            handle(chosen)
            self.ack(chosen)
            delivered += len(chosen)
            if count is not None and delivered >= count:
                break
        return delivered

    def batches(self) -> Iterator[list[Alert]]:
        """The alerts of each Listen message, resumed and reconnected (class docstring)."""
        connection = self.client.connection
        try:
            while not self._closed:
                request, left = self.request()
                self._call = connection.stub.Listen(
                    request, metadata=connection.metadata, timeout=left
                )
                error = None
                try:
                    for message in self._call:
                        self.reconnect.heard()
                        batch = [self._alert(a) for a in message.alerts]
                        yield batch
                        self.ack(batch)
                except grpc.RpcError as exc:
                    error = exc
                if not self.broke(error):
                    return
                time.sleep(RETRY_EVERY)
        finally:
            self.positions.save()

    def _alert(self, message: pb.Alert) -> Alert:
        if not self.knows(message.subscription):
            specs = {s.id: s.output_spec for s in self.client.subscriptions()}
            self.learn(specs, message.subscription)
        return self.alert(message)
