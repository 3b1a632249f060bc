"""The asyncio client: :class:`AsyncClient` and its :class:`AsyncListener`, the blocking
client's calls as coroutines over ``grpc.aio``.

>>> import asyncio
>>> async def made() -> str:
...     async with AsyncClient("127.0.0.1:1") as client:   # connects at the first call
...         return type(client).__name__
>>> asyncio.run(made())
'AsyncClient'
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import grpc

from cesar.automata.schema import StreamSchema
from cesar.client.blocking import TIMEOUT
from cesar.client.calls import (
    PUBLISH_BATCH,
    publish_requests,
    published,
    stream_schema,
    subscribe_requests,
)
from cesar.client.errors import CesarError, error, from_rpc
from cesar.client.listening import Following
from cesar.client.model import Alert, Published, Stream, Subscription
from cesar.client.resume import RETRY_EVERY, After, Positions, starts
from cesar.server.wire.client import message_data
from cesar.server.wire.transport import GRPC_OPTIONS
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import cesar_pb2_grpc


class AsyncClient:
    """:class:`~cesar.client.Client`'s calls as coroutines; the same arguments, answers and
    errors.  Use it in an ``async with`` block, or ``await`` :meth:`close`."""

    def __init__(
        self,
        target: str = "127.0.0.1:50051",
        token: str | None = None,
        tls_ca: Path | None = None,
        timeout: float = TIMEOUT,
    ) -> None:
        if tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=tls_ca.read_bytes())
            self.channel = grpc.aio.secure_channel(target, credentials, options=GRPC_OPTIONS)
        else:
            self.channel = grpc.aio.insecure_channel(target, options=GRPC_OPTIONS)
        self.stub = cesar_pb2_grpc.CesarStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self.timeout = timeout
        self._schemas: dict[str, StreamSchema] = {}

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection."""
        await self.channel.close()

    async def _call(self, method: str, request: Any) -> Any:
        call = getattr(self.stub, method)
        try:
            return await call(
                request, metadata=self.metadata, timeout=self.timeout, wait_for_ready=True
            )
        except grpc.RpcError as exc:
            raise from_rpc(exc) from None

    async def define_stream(self, spec: str) -> Stream:
        """See :meth:`Client.define_stream <cesar.client.Client.define_stream>`."""
        return Stream.of(await self._call("DefineStream", pb.DefineStreamRequest(spec=spec)))

    async def streams(self) -> list[Stream]:
        """See :meth:`Client.streams <cesar.client.Client.streams>`."""
        found: list[Stream] = []
        token = ""
        while True:
            page = await self._call("ListStreams", pb.ListStreamsRequest(page_token=token))
            found.extend(Stream.of(info) for info in page.streams)
            token = page.next_page_token
            if not token:
                return found

    async def delete_stream(self, name: str) -> None:
        """See :meth:`Client.delete_stream <cesar.client.Client.delete_stream>`."""
        await self._call("DeleteStream", pb.DeleteStreamRequest(name=name))

    async def share(self, stream: str, readers: Sequence[str]) -> Stream:
        """See :meth:`Client.share <cesar.client.Client.share>`."""
        request = pb.ShareStreamRequest(stream=stream, readers=list(readers))
        return Stream.of(await self._call("ShareStream", request))

    async def schema(self, stream: str) -> StreamSchema:
        """See :meth:`Client.schema <cesar.client.Client.schema>`."""
        if stream not in self._schemas:
            self._schemas.update({s.name: stream_schema(s.spec) for s in await self.streams()})
        if stream not in self._schemas:
            raise error("NOT_FOUND", f"no stream {stream!r} that you may use")
        return self._schemas[stream]

    async def subscribe(
        self, query: str, name: str = "", idempotency_key: str = ""
    ) -> Subscription:
        """See :meth:`Client.subscribe <cesar.client.Client.subscribe>`."""
        request = pb.SubscribeRequest(query=query, name=name, idempotency_key=idempotency_key)
        return Subscription.of(await self._call("Subscribe", request))

    async def subscribe_many(
        self, queries: Sequence[str], idempotency_keys: Sequence[str] | None = None
    ) -> list[Subscription | CesarError]:
        """See :meth:`Client.subscribe_many <cesar.client.Client.subscribe_many>`."""
        results: list[Subscription | CesarError] = []
        for request in subscribe_requests(queries, idempotency_keys):
            response = await self._call("SubscribeBatch", request)
            results.extend(
                Subscription.of(r.subscription)
                if r.HasField("subscription")
                else error(r.failure.code, r.failure.message)
                for r in response.results
            )
        return results

    async def unsubscribe(self, subscription: str) -> None:
        """See :meth:`Client.unsubscribe <cesar.client.Client.unsubscribe>`."""
        await self._call("Unsubscribe", pb.UnsubscribeRequest(id=subscription))

    async def subscriptions(self) -> list[Subscription]:
        """See :meth:`Client.subscriptions <cesar.client.Client.subscriptions>`."""
        response = await self._call("ListSubscriptions", pb.ListSubscriptionsRequest())
        return [Subscription.of(row) for row in response.subscriptions]

    async def explain(self, query: str, dot: bool = False) -> str:
        """See :meth:`Client.explain <cesar.client.Client.explain>`."""
        response = await self._call("Explain", pb.ExplainRequest(query=query, dot=dot))
        return str(response.dot if dot else response.text)

    async def publish(
        self,
        stream: str,
        events: Iterable[Mapping[str, Any]],
        close: bool = True,
        idempotency_key: str = "",
        batch: int = PUBLISH_BATCH,
    ) -> Published:
        """See :meth:`Client.publish <cesar.client.Client.publish>`."""
        schema = await self.schema(stream)
        requests = publish_requests(schema, events, batch, close, idempotency_key)
        try:
            call = self.stub.Publish(iter(requests), metadata=self.metadata, wait_for_ready=True)
            answers = [answer async for answer in call]
        except grpc.RpcError as exc:
            raise from_rpc(exc) from None
        return published(stream, requests, answers, batch)

    async def listen(
        self,
        subscriptions: Sequence[str] | None = None,
        after: After = None,
        checkpoint: Path | None = None,
        reconnect_for: float = 30.0,
        timeout: float | None = None,
    ) -> AsyncListener:
        """See :meth:`Client.listen <cesar.client.Client.listen>`."""
        last = {s.id: s.last_seq for s in await self.subscriptions()}
        seqs = starts(last, subscriptions, after, checkpoint)
        positions = Positions(seqs, checkpoint)
        return AsyncListener(self, subscriptions, positions, reconnect_for, timeout)

    async def stats(self) -> dict[str, Any]:
        """See :meth:`Client.stats <cesar.client.Client.stats>`."""
        return message_data(await self._call("Stats", pb.StatsRequest()))


class AsyncListener(Following):
    """:class:`~cesar.client.Listener` for asyncio: ``async for`` alerts, or
    :meth:`batches`; the same resuming, reconnecting and acknowledging."""

    def __init__(
        self,
        client: AsyncClient,
        subscriptions: Sequence[str] | None,
        positions: Positions,
        reconnect_for: float,
        timeout: float | None,
    ) -> None:
        super().__init__(subscriptions, positions, reconnect_for, timeout)
        self.client = client

    async def __aenter__(self) -> AsyncListener:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def __aiter__(self) -> AsyncIterator[Alert]:
        async for batch in self.batches():
            for alert in batch:
                yield alert
                self.ack([alert])

    async def batches(self) -> AsyncIterator[list[Alert]]:
        """The alerts of each Listen message, resumed and reconnected."""
        client = self.client
        try:
            while not self._closed:
                request, left = self.request()
                self._call = client.stub.Listen(request, metadata=client.metadata, timeout=left)
                error = None
                try:
                    async for message in self._call:
                        self.reconnect.heard()
                        batch = [await self._alert(a) for a in message.alerts]
                        yield batch
                        self.ack(batch)
                except asyncio.CancelledError:
                    if not self._closed:
                        raise
                    return
                except grpc.RpcError as exc:
                    error = exc
                if not self.broke(error):
                    return
                await asyncio.sleep(RETRY_EVERY)
        finally:
            self.positions.save()

    async def _alert(self, message: pb.Alert) -> Alert:
        if not self.knows(message.subscription):
            specs = {s.id: s.output_spec for s in await self.client.subscriptions()}
            self.learn(specs, message.subscription)
        return self.alert(message)
