"""The front: the server's operations, in one sequential history (docs/architecture.md).

:class:`Front` is the server's domain logic without gRPC: the servicers in
:mod:`cesar.server.front.service` translate messages and call it.  It
orchestrates named parts:

* the catalog (:mod:`cesar.server.front.catalog`), the SQLite store of streams,
  subscriptions, the event log and alerts;
* the :class:`~cesar.server.front.registry.Registry`, its in-memory mirror:
  streams, live subscriptions, routes, interest and tallies;
* :func:`~cesar.server.front.placement.place`, the policy that picks a new
  subscription's lane and shard;
* the :class:`~cesar.server.front.epochs.EpochGate`, which holds each shard's
  events until their epoch closes, so shards see whole epochs in order;
* the shards, reached through :class:`~cesar.server.shard.pool.ShardPool`, and
  the alert streams (:mod:`cesar.server.front.alerts`).

Publishing, subscribing and unsubscribing run one at a time under one lock,
so the event log, the subscriptions' positions in it and the alerts' seqs
form one sequential history — the one replayed on start.  Publishing is
pipelined: a batch is validated, numbered and sent to the shards under the
lock (:meth:`Front.begin`), the shards apply it with the lock free (each
shard takes its calls in order), and a committer thread logs the batches in
number order with their alerts and seqs, acknowledging each (:class:`Ticket`).
So the front checks and routes the next batch while the shards apply this
one, and the history is the same as if they had run one at a time.  Listen streams
(:mod:`cesar.server.front.alerts`) read committed alerts from their own SQLite
connections and never block that path.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.message import DecodeError

from cesar.automata.automaton import format_dot
from cesar.automata.compiler import CompiledQuery, compile_pattern, compile_query
from cesar.automata.errors import CelError
from cesar.automata.explain import explain
from cesar.automata.partition import partition_keys
from cesar.automata.pattern.ast import Pattern
from cesar.automata.pattern.parser import is_pattern, parse_pattern
from cesar.automata.schema import (
    Event,
    EventError,
    SchemaError,
    StreamSchema,
    check_name,
    parse_stream_spec,
)
from cesar.automata.shape import QueryCache, Shape, shape_of
from cesar.server.front import limits
from cesar.server.front.alerts import Listeners
from cesar.server.front.auth import Client
from cesar.server.front.catalog import (
    RESTORE,
    Catalog,
    CatalogError,
    StreamRow,
    SubscriptionRow,
)
from cesar.server.front.checkpoints import Checkpoints, SnapshotPolicy
from cesar.server.front.epochs import Arrival, EpochGate, Pending
from cesar.server.front.errors import (
    AlreadyExists,
    FailedPrecondition,
    FrontError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from cesar.server.front.pieces import Row, event_of, lane_table, rows_of
from cesar.server.front.pieces import destinations as piece_destinations
from cesar.server.front.placement import pinned_shard, place
from cesar.server.front.registry import Live, Registry, describe_stream
from cesar.server.host.metrics import Histogram
from cesar.server.host.rss import rss_bytes
from cesar.server.shard.pool import Applying, ShardFailure, ShardPool
from cesar.server.wire.algebra_proto import (
    AlgebraMessageError,
    compile_algebra,
    to_algebra,
)
from cesar.server.wire.arrowevents import Checked
from cesar.server.wire.arrowevents import check as check_arrow
from cesar.server.wire.arrowevents import decode as decode_arrow
from cesar.server.wire.arrowevents import encode as encode_arrow
from cesar.server.wire.arrowevents import read as read_arrow
from cesar.server.wire.convert import from_event, rejection, to_event, trusted_event
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2

log = logging.getLogger("cesar.front")

MAX_KEY_BYTES = 200
MAX_SUBSCRIBE_BATCH = 10_000


class ReplayError(RuntimeError):
    """The catalog cannot be replayed with this server's configuration."""


@dataclass(frozen=True)
class SubscribeItem:
    """One subscription to register: CEL ``text`` or an ``algebra`` message, and its name."""

    text: str = ""
    name: str = ""
    algebra: pb.Algebra | None = None


@dataclass(frozen=True)
class Prepared:
    """A checked item, its shape (CEL) or its syntax tree (a pattern), its compiled form when
    compiled early, and the PUBLISH name of its CEL query or pattern, if it has one."""

    item: SubscribeItem
    shape: Shape | None
    query: CompiledQuery | None
    publish: str | None
    pattern: Pattern | None = None


class Ticket:
    """A batch begun: applied by the shards, then logged by the committer thread.

    :meth:`result` waits for it: the acknowledgement, or the ShardFailure that
    stopped it.
    """

    def __init__(
        self,
        number: int,
        key: str,
        accepted: int,
        payload: bytes,
        shard: int | None,
        response: pb.PublishResponse,
        refused: Counter[tuple[str, str]] | None = None,
    ) -> None:
        self.number = number
        self.refused = refused or Counter()
        """Its rejections by field and kind (late, ahead, invalid)."""
        self.key = key
        self.accepted = accepted
        """How many of its events were accepted."""
        self.payload = payload
        self.shard = shard
        self.response = response
        self.applying: Applying | None = None
        self.error: ShardFailure | None = None
        self._finished = threading.Event()
        self.began = time.monotonic()

    @classmethod
    def done(cls, response: pb.PublishResponse) -> Ticket:
        """A ticket finished already (a duplicate batch)."""
        ticket = cls(response.batch, "", 0, b"", None, response)
        ticket.finish()
        return ticket

    def finish(self) -> None:
        self._finished.set()

    def fail(self, error: ShardFailure) -> None:
        self.error = error
        self._finished.set()

    def result(self) -> pb.PublishResponse:
        """The acknowledgement, once the batch is logged; raises its ShardFailure."""
        self._finished.wait()
        if self.error is not None:
            raise self.error
        return self.response


class Front:
    """The server's state and operations; see the module docstring."""

    def __init__(
        self,
        catalog: Catalog,
        shards: ShardPool,
        max_time_jump: int = limits.MAX_TIME_JUMP_SECONDS,
        snapshots: SnapshotPolicy | None = None,
    ) -> None:
        self.catalog = catalog
        self.shards = shards
        self.checkpoints = Checkpoints(snapshots or SnapshotPolicy(0, 0), catalog, shards)
        self.lock = threading.Lock()
        self.closing = False
        self.counters: Counter[str] = Counter()
        self.rejections: Counter[tuple[str, str]] = Counter()
        """Events rejected, by field and kind (:meth:`_accept`)."""
        self.batch_seconds = Histogram()
        """Per batch, from its request to its acknowledgement (validated, applied, logged)."""
        self.listeners = Listeners(catalog.path, self.counters)
        self.registry = Registry(shards.count)
        self.gate = EpochGate(shards.count, self.registry.groups)
        self.batches = 0
        self.committed = 0
        """Batches are numbered in order under the lock, applied by the shards with the lock
        free, and logged in order: ``committed`` is the last logged; ``turn`` wakes those
        waiting for theirs; ``inflight`` holds the idempotency keys of batches not logged yet."""
        self.turn = threading.Condition(self.lock)
        self.inflight: set[str] = set()
        self.commits: queue.SimpleQueue[Ticket] = queue.SimpleQueue()
        threading.Thread(target=self._committer, daemon=True, name="committer").start()
        self.listens: Counter[str] = Counter()
        self.newest: dict[str, int] = {}
        self.max_time_jump = max_time_jump
        self.queries = QueryCache()

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Load the catalog and the latest usable checkpoint, install every subscription and
        replay the event log after the checkpoint.

        Raises :class:`~cesar.server.front.catalog.CatalogError` for a catalog that
        cannot be read, naming the batch where the event log breaks, and
        :class:`~cesar.server.front.checkpoints.NoCheckpoint` when no checkpoint
        can be used and the log before them is compacted.
        """
        try:
            self._load()
        except sqlite3.DatabaseError as exc:
            raise CatalogError(f"{self.catalog.path} cannot be read ({exc}): {RESTORE}") from None

    def _load(self) -> None:
        started = time.monotonic()
        for stream in self.catalog.streams():
            if not stream.subscription:
                self.registry.add_stream(stream)
        shares = self.catalog.shares()
        chosen = self.checkpoints.choose()
        start = 0 if chosen is None else chosen[0]
        log_rows = iter(self.catalog.batches(after=start))
        joins = iter(self.catalog.clock_joins())
        join = next(joins, None)
        replayed = start

        def replay_to(position: int | None) -> None:
            """Replay the log up to batch ``position`` (None: all), joining clock groups
            at the positions where they were joined."""
            nonlocal replayed, join
            while True:
                while join is not None and join[0] <= replayed:
                    self.registry.groups.join(join[1])
                    join = next(joins, None)
                if position is not None and replayed >= position:
                    return
                row = next(log_rows, None)
                if row is None:
                    return
                self._replay(*row)
                replayed = row[0]

        restored: list[tuple[Live, CompiledQuery]] = []
        resumed = chosen is None
        for sub in self.catalog.subscriptions():
            if not resumed and sub.position >= start:
                replay_to(start)  # the clock joins up to the checkpoint
                self._install(restored)
                restored = []
                self._resume(chosen)
                resumed = True
            if replayed < sub.position:
                self._install(restored)
                restored = []
            replay_to(sub.position)
            restored.append(self._restore(sub))
        self._install(restored)
        if not resumed:
            replay_to(start)
            self._resume(chosen)
        self.registry.shares = {s: c for s, c in shares.items() if s in self.registry.streams}
        replay_to(None)
        self.batches = self.committed = self.catalog.batch_count()
        self.inflight.clear()
        self.listeners.notify(self.catalog.last_alert_id())
        log.info(
            "catalog loaded",
            extra={
                "streams": len(self.registry.streams),
                "subscriptions": len(self.registry.live),
                "checkpoint": start,
                "batches_replayed": self.batches - start,
                "seconds": round(time.monotonic() - started, 3),
            },
        )

    def _resume(self, chosen: tuple[int, dict[str, Any]] | None) -> None:
        """With the subscriptions a checkpoint holds installed: restore its run state in the
        shards and the front's gate and stream times."""
        if chosen is None:
            return
        position, state = chosen
        self.gate.restore(state["gate"])
        self.newest = dict(state["newest"])
        instances = self.shards.resume()
        log.info("checkpoint restored", extra={"position": position, "instances": instances})

    def _restore(self, row: SubscriptionRow) -> tuple[Live, CompiledQuery]:
        """Compile and register a stored subscription; the caller installs it on the shards."""
        query = self._compile_source(row.query, row.algebra, row.name or row.id)
        count = self.shards.count
        key = row.key_attribute or None
        live = Live(
            replace(row, shard=row.shard % count), query.reads, pinned_shard(query, key, count)
        )
        self.registry.register(live, query)
        self.registry.groups.join(live.clock_streams)
        return live, query

    def _replay(self, number: int, payload: bytes) -> None:
        try:
            batch = pb.PublishRequest.FromString(payload)
        except DecodeError as exc:
            raise CatalogError(
                f"batch {number} of the event log cannot be read ({exc}): {RESTORE}"
            ) from None
        shard = batch.shard if batch.HasField("shard") else None
        if shard is not None and batch.shards != self.shards.count:
            raise ReplayError(
                f"the event log holds batches the feed routed for {batch.shards} shards; "
                f"start the server with --shards {batch.shards}"
            )
        if batch.arrow_events:  # a routed piece, logged as accepted
            assert shard is not None
            table = read_arrow(batch.arrow_events)
            arrivals = self._piece_arrivals(table, shard)
        else:
            arrivals = self._arrivals([trusted_event(e) for e in batch.events], shard)
        for item, _ in arrivals:
            self._saw(item.stream, item.t1)
        self._advance(arrivals, batch.watermark or None, shard).result()

    # ---------------------------------------------------------------- streams

    def define_stream(self, client: Client, spec: str) -> StreamRow:
        """Declare an input stream."""
        try:
            schema = parse_stream_spec(spec)
        except SchemaError as exc:
            raise InvalidArgument(f"stream spec: {exc}") from None
        with self.lock:
            self._check_open()
            self._check_free(client, schema.name)
            defined = sum(
                1
                for r in self.registry.streams.values()
                if r.owner == client.name and not r.subscription
            )
            if defined >= client.limits.max_streams:
                raise ResourceExhausted(f"{client.name} has defined {defined} streams, the limit")
            row = StreamRow(schema.name, schema.spec(), client.name, "")
            self.catalog.add_stream(row)
            self.registry.add_stream(row)
        log.info("stream defined", extra={"stream": row.name, "owner": client.name})
        return row

    def _check_free(self, client: Client, name: str) -> None:
        """AlreadyExists if ``name`` is taken; who holds it only if the caller may see it."""
        taken = self.registry.streams.get(name)
        if taken is None:
            return
        if self.registry.may_read(client, taken):
            raise AlreadyExists(f"stream {name} exists ({describe_stream(taken)})")
        raise AlreadyExists(f"stream {name} exists (another client's)")

    def stream_rows(self, client: Client, after: str = "") -> list[tuple[StreamRow, list[str]]]:
        """The streams ``client`` may use named after ``after``, by name, with their readers."""
        with self.lock:
            rows = [
                r
                for r in self.registry.streams.values()
                if r.name > after and self.registry.may_read(client, r)
            ]
            return [
                (row, sorted(self.registry.shares.get(row.name, ())))
                for row in sorted(rows, key=lambda r: r.name)
            ]

    def _own_stream(self, client: Client, name: str, published: bool) -> StreamRow:
        """``client``'s (an admin: anyone's) published or input stream ``name``; else NotFound."""
        row = self.registry.streams.get(name)
        if (
            row is None
            or bool(row.subscription) != published
            or not (row.owner == client.name or client.may("admin"))
        ):
            kind = "published" if published else "input"
            raise NotFound(f"no {kind} stream {name} of yours")
        return row

    def delete_stream(self, client: Client, name: str) -> None:
        """Remove an input stream ``client`` defined, once no subscription reads it."""
        with self.lock:
            self._check_open()
            self._own_stream(client, name, published=False)
            readers = self.registry.readers_of(name)
            if readers:
                raise FailedPrecondition(
                    f"{len(readers)} subscriptions read {name}; they must be removed first"
                )
            self.catalog.remove_stream(name)
            self.registry.remove_stream(name)
        log.info("stream deleted", extra={"stream": name, "owner": client.name})

    def share_stream(
        self, client: Client, stream: str, readers: Sequence[str]
    ) -> tuple[StreamRow, list[str]]:
        """Let exactly ``readers`` (other clients) read ``client``'s published ``stream``."""
        wanted = sorted(set(readers) - {client.name})
        if len(wanted) > limits.MAX_READERS:
            raise ResourceExhausted(
                f"a stream is shared with at most {limits.MAX_READERS} clients, not {len(wanted)}"
            )
        for reader in wanted:
            try:
                check_name(reader, "client name")
            except SchemaError as exc:
                raise InvalidArgument(str(exc)) from None
        with self.lock:
            self._check_open()
            row = self._own_stream(client, stream, published=True)
            dropped = self.registry.shares.get(stream, set()) - set(wanted)
            still = sorted(
                {self.registry.live[r].row.owner for r in self.registry.readers_of(stream)}
                & dropped
            )
            if still:
                raise FailedPrecondition(
                    f"clients {', '.join(still)} have subscriptions reading {stream}; "
                    "they must remove them before the stream stops being shared with them"
                )
            self.catalog.set_shares(stream, wanted)
            if wanted:
                self.registry.shares[stream] = set(wanted)
            else:
                self.registry.shares.pop(stream, None)
        log.info("stream shared", extra={"stream": stream, "readers": wanted})
        return row, wanted

    # ---------------------------------------------------------- subscriptions

    def _compile_source(self, text: str, algebra: bytes, name: str) -> CompiledQuery:
        """Compile a stored subscription — CEL ``text``, or a serialized Algebra message when
        ``algebra`` is not empty — against every stream."""
        try:
            if is_pattern(text):
                return compile_query(text, self.registry.schemas, name)
            if not algebra:
                return self.queries.compile(shape_of(text), self.registry.schemas, name)
            return compile_algebra(pb.Algebra.FromString(algebra), self.registry.schemas, name)
        except (CelError, AlgebraMessageError) as exc:
            raise InvalidArgument(str(exc)) from None

    def explain(self, client: Client, text: str, dot: bool) -> tuple[str, str, str | None]:
        """(explain text, DOT or "", key attribute or None) for a query of ``client``'s."""
        with self.lock:
            schemas = self.registry.readable(client)
        try:
            query = compile_query(text, schemas, "query")
        except CelError as exc:
            raise InvalidArgument(str(exc)) from None
        keys = partition_keys(query.automata, schemas)
        return (
            explain(query, schemas),
            format_dot(query.automata) if dot else "",
            min(keys) if keys else None,
        )

    def subscribe(
        self, client: Client, text: str, name: str = "", algebra: pb.Algebra | None = None
    ) -> SubscriptionRow:
        """Compile, place, store and install a subscription (CEL ``text`` or ``algebra``)."""
        (result,) = self.subscribe_many(client, [SubscribeItem(text, name, algebra)])
        if isinstance(result, FrontError):
            raise result
        return result

    def subscribe_many(
        self, client: Client, items: Sequence[SubscribeItem]
    ) -> list[SubscriptionRow | FrontError]:
        """Register ``items`` in order; each succeeds or fails on its own (its error returned).

        Queries are parsed and compiled before the lock is taken, against the
        streams defined then and, for an unnamed query, under the id it will
        most likely get (the next ids in order); it is compiled again under the
        lock only if a stream it reads changed meanwhile or another batch took
        its id.  The admitted ones are stored in one transaction and installed
        with one call per shard.  Cost: one SQLite commit and one round trip per
        shard for the whole batch.
        """
        if not 1 <= len(items) <= MAX_SUBSCRIBE_BATCH:
            raise InvalidArgument(
                f"a batch holds 1 to {MAX_SUBSCRIBE_BATCH} subscriptions, not {len(items)}"
            )
        with self.lock:
            schemas = self.registry.readable(client)
            number = self.catalog.next_subscription_number()
        prepared: list[Prepared | FrontError] = []
        for item in items:
            checked = self._prepare(client, item, schemas, f"s{number}")
            number += not isinstance(checked, FrontError)
            prepared.append(checked)
        results: list[SubscriptionRow | FrontError] = []
        admitted: list[tuple[Live, CompiledQuery]] = []
        with self.lock:
            self._check_open()
            number = self.catalog.next_subscription_number()
            try:  # all or nothing: what was registered goes if anything unforeseen fails
                for ready in prepared:
                    if isinstance(ready, FrontError):
                        results.append(ready)
                        continue
                    try:
                        live, query = self._admit(client, ready, f"s{number}", schemas)
                    except FrontError as exc:
                        results.append(exc)
                        continue
                    number += 1
                    admitted.append((live, query))
                    results.append(live.row)
                groups = self.registry.groups
                joins = [
                    (self.batches, sorted(live.clock_streams))
                    for live, _ in admitted
                    if len({groups.find(s) for s in live.clock_streams}) > 1
                ]
                if admitted:
                    streams = self.registry.streams
                    rows = [(live.row, streams[live.row.stream]) for live, _ in admitted]
                    self.catalog.add_subscriptions(rows, joins)
            except BaseException:
                for live, _ in reversed(admitted):
                    self.registry.unregister(live)
                raise
            for _position, joined in joins:
                groups.join(joined)
            if admitted:
                self._install(admitted)
                self.counters["subscribes"] += len(admitted)
        for live, _ in admitted:
            log.info(
                "subscribed",
                extra={
                    "subscription": live.row.id,
                    "owner": client.name,
                    "key": live.key,
                    "shard": live.row.shard,
                },
            )
        return results

    def _prepare(
        self,
        client: Client,
        item: SubscribeItem,
        schemas: Mapping[str, StreamSchema],
        likely_id: str,
    ) -> Prepared | FrontError:
        """Check, parse and compile one item (named ``likely_id`` if unnamed), without the lock."""
        if bool(item.text) == (item.algebra is not None):
            return InvalidArgument("give exactly one of query (CEL text) and algebra")
        size = len(item.text.encode()) if item.algebra is None else item.algebra.ByteSize()
        size += len(item.name.encode())
        if size > client.limits.max_query_bytes:
            return ResourceExhausted(
                f"query and name are {size} bytes; the limit for {client.name} is "
                f"{client.limits.max_query_bytes}"
            )
        if item.name:
            try:
                check_name(item.name, "name")
            except SchemaError as exc:
                return InvalidArgument(str(exc))
        try:
            if item.algebra is not None:
                prepared = Prepared(item, None, None, None)
            elif is_pattern(item.text):
                tree = parse_pattern(item.text)
                prepared = Prepared(item, None, None, tree.publish, tree)
            else:
                shape = shape_of(item.text)
                prepared = Prepared(item, shape, None, shape.publish)
        except CelError as exc:
            return InvalidArgument(str(exc))
        try:
            query = self._compile_prepared(prepared, item.name or likely_id, schemas)
        except FrontError:
            return prepared  # it may read a stream defined meanwhile: compiled again under the lock
        return replace(prepared, query=query)

    def _compile_prepared(
        self, prepared: Prepared, name: str, schemas: Mapping[str, StreamSchema]
    ) -> CompiledQuery:
        item = prepared.item
        try:
            if prepared.shape is not None:
                return self.queries.compile(prepared.shape, schemas, name)
            if item.algebra is None:
                return compile_pattern(item.text, schemas, name, parsed=prepared.pattern)
            return compile_algebra(item.algebra, schemas, name)
        except (CelError, AlgebraMessageError) as exc:
            raise InvalidArgument(str(exc)) from None

    def _admit(
        self,
        client: Client,
        prepared: Prepared,
        sub_id: str,
        schemas: Mapping[str, StreamSchema],
    ) -> tuple[Live, CompiledQuery]:
        """Check limits and names, place and register one subscription (under the lock)."""
        owned = self.registry.owned[client.name]
        if owned >= client.limits.max_subscriptions:
            raise ResourceExhausted(f"{client.name} holds {owned} subscriptions, the limit")
        item = prepared.item
        stream = prepared.publish or item.name or sub_id
        self._check_free(client, stream)
        query = prepared.query
        registry = self.registry
        if (
            query is None
            or query.name != stream
            or any(registry.schema_for(client, s) is not schemas[s] for s in query.reads)
        ):
            self.counters["compiled_under_lock"] += 1
            query = self._compile_prepared(prepared, item.name or sub_id, registry.readable(client))
        key, shard = place(query, self.registry)
        row = SubscriptionRow(
            id=sub_id,
            owner=client.name,
            query=item.text,
            name=item.name or sub_id,
            stream=query.name,
            output_spec=query.output.spec(),
            key_attribute=key or "",
            shard=shard,
            created_ms=int(time.time() * 1000),
            position=self.batches,
            last_seq=0,
            algebra=b"" if item.algebra is None else item.algebra.SerializeToString(),
        )
        live = Live(row, query.reads, pinned_shard(query, key, self.shards.count))
        self.registry.register(live, query)
        return live, query

    def _install(self, admitted: Sequence[tuple[Live, CompiledQuery]]) -> None:
        """Install registered subscriptions on their shards: one call per shard, in order."""
        batches = [shard_pb2.InstallBatch() for _ in range(self.shards.count)]
        for live, query in admitted:
            request = shard_pb2.InstallRequest(
                lane=live.lane,
                subscription=live.row.id,
                name=query.name,
                stream_specs=[self.registry.schemas[s].spec() for s in sorted(query.reads)],
                algebra=None if query.algebra is None else to_algebra(query.algebra),
                shape_text=query.text,
            )
            for target in live.shards(self.shards.count):
                batches[target].subscriptions.append(request)
        self.shards.install(batches)

    def unsubscribe(self, client: Client, sub_id: str) -> None:
        """Remove one of ``client``'s subscriptions."""
        with self.lock:
            self._check_open()
            live = self._owned(client, sub_id, remove=True)
            readers = self.registry.readers_of(live.row.stream)
            if readers:
                owners = {r: self.registry.live[r].row.owner for r in readers}
                own = [r for r in readers if owners[r] == client.name]
                others = sorted({o for o in owners.values() if o != client.name})
                names = ", ".join(
                    [f"your {r}" for r in own] + [f"subscriptions of client {o}" for o in others]
                )
                raise FailedPrecondition(
                    f"subscription {sub_id} publishes {live.row.stream}, which {names} "
                    "read; they must be removed first"
                )
            self.shards.remove(
                live.shards(self.shards.count),
                shard_pb2.RemoveRequest(lane=live.lane, subscription=sub_id),
            )
            self.registry.unregister(live)
            self.catalog.remove_subscription(sub_id)
            self.counters["unsubscribes"] += 1
        log.info("unsubscribed", extra={"subscription": sub_id, "owner": client.name})

    def _owned(self, client: Client, sub_id: str, remove: bool = False) -> Live:
        live = self.registry.live.get(sub_id)
        if live is None:
            raise NotFound(f"no subscription {sub_id}")
        if live.row.owner != client.name:
            if remove:
                raise PermissionDenied(f"subscription {sub_id} belongs to another client")
            raise NotFound(f"no subscription {sub_id}")
        return live

    def subscriptions(self, client: Client) -> list[SubscriptionRow]:
        """``client``'s subscriptions, oldest first, with their latest seq."""
        with self.lock:
            return [
                replace(live.row, last_seq=self.registry.last_seq[live.row.id])
                for live in self.registry.live.values()
                if live.row.owner == client.name
            ]

    # ----------------------------------------------------------------- publish

    def publish(self, client: Client, request: pb.PublishRequest) -> pb.PublishResponse:
        """Validate, apply, log and sequence one batch of ``client``'s; the acknowledgement
        (once it is logged).  See :meth:`begin`."""
        return self.begin(client, request).result()

    def begin(self, client: Client, request: pb.PublishRequest) -> Ticket:
        """Validate one batch of ``client``'s and send the shards its ready epochs; the
        ticket whose :meth:`~Ticket.result` is the acknowledgement, once it is logged.

        Batches are numbered and sent to the shards in the order they begin; while
        the shards apply one, the next begins; the committer thread logs them in
        order (with their alerts and seqs) as they finish, and finishes their tickets.

        Without ``request.shard`` the front routes each event; with it (the
        feed's batches) every event is for that shard and only its epochs count.
        An idempotency key is ``client``'s own: another client's equal key is
        another batch.  A request holds at most ``MAX_PUBLISH_EVENTS`` events
        and Arrow rows; they are decoded and validated before the lock is taken,
        so a large batch does not hold up other clients while it is read.
        """
        if len(request.events) > limits.MAX_PUBLISH_EVENTS:
            raise ResourceExhausted(
                f"{len(request.events)} events in one request; the limit is "
                f"{limits.MAX_PUBLISH_EVENTS}: send smaller batches"
            )
        if len(request.idempotency_key.encode()) > MAX_KEY_BYTES:
            raise InvalidArgument(f"idempotency_key is longer than {MAX_KEY_BYTES} bytes")
        key = _scoped(client, request.idempotency_key)
        shard = request.shard if request.HasField("shard") else None
        if shard is not None and not client.may("feed"):
            raise PermissionDenied("batches routed to a shard come from the feed: scope=feed")
        if shard is not None and (request.shards != self.shards.count or shard >= request.shards):
            raise FailedPrecondition(
                f"the batch was routed for shard {shard} of {request.shards}; this server has "
                f"{self.shards.count} shards: fetch the routing table again (GetRouting)"
            )
        piece = shard is not None and bool(request.arrow_events) and not request.events
        with self.lock:
            self._check_open()
            inputs = dict(self.registry.inputs)
        if piece:
            checked = self._check_piece(request, inputs)
        else:  # the registry's streams are read a key at a time, not copied: one per subscription
            incoming = list(self._incoming(request, inputs, self.registry.streams))
        with self.lock:
            self._check_open()
            if key:
                while key in self.inflight:
                    self._wait_turn()
                found = self.catalog.find_batch(key)
                if found is not None:
                    self.counters["duplicate_batches"] += 1
                    return Ticket.done(
                        pb.PublishResponse(accepted=found[1], duplicate=True, batch=found[0])
                    )
            if piece:
                assert shard is not None
                response, table, refused = self._accept_piece(request, checked, shard)
                arrivals = self._piece_arrivals(table, shard)
                logged = pb.PublishRequest(arrow_events=encode_arrow(table.drop_columns("index")))
            else:
                response, accepted, refused = self._accept(request, incoming, shard)
                arrivals = self._arrivals(accepted, shard)
                logged = pb.PublishRequest(events=[to_event(e) for e in accepted])
            logged.watermark = request.watermark
            if shard is not None:
                logged.shard, logged.shards = shard, request.shards
            self.batches += 1
            number = response.batch = self.batches
            response.accepted = len(arrivals)
            payload = logged.SerializeToString()
            ticket = Ticket(number, key, len(arrivals), payload, shard, response, refused)
            if self.checkpoints.due(number):
                # the snapshots must hold exactly the batches up to this one: nothing in flight
                while self.committed < number - 1:
                    self._wait_turn()
                alerts = self._advance(arrivals, request.watermark or None, shard).result()
                self._commit(ticket, alerts)
                self.checkpoints.take(
                    number, {"gate": self.gate.to_data(), "newest": dict(self.newest)}
                )
            else:
                ticket.applying = self._advance(arrivals, request.watermark or None, shard)
                if key:
                    self.inflight.add(key)
                self.commits.put(ticket)
        return ticket

    def _committer(self) -> None:
        """Log the batches in flight, in order, as their shards finish applying them."""
        while True:
            ticket = self.commits.get()
            assert ticket.applying is not None
            try:
                alerts = ticket.applying.result()  # the lock is free: the next batch goes on
            except ShardFailure as exc:
                with self.lock:
                    self.turn.notify_all()
                ticket.fail(exc)
                continue
            with self.lock:
                if self.shards.failed is not None:  # an earlier batch failed: none after commits
                    ticket.fail(ShardFailure(self.shards.failed))
                    continue
                try:
                    self._commit(ticket, alerts)
                except ShardFailure as exc:
                    ticket.fail(exc)

    def _wait_turn(self) -> None:
        """Wait (holding the lock) until a batch in flight commits; ShardFailure if the shards
        failed meanwhile (no batch after the failure may commit)."""
        if self.shards.failed is not None:
            raise ShardFailure(self.shards.failed)
        self.turn.wait()
        if self.shards.failed is not None:
            raise ShardFailure(self.shards.failed)

    def _accept(
        self,
        request: pb.PublishRequest,
        incoming: list[tuple[Event | EventError, int | None]],
        shard: int | None,
    ) -> tuple[pb.PublishResponse, list[Event], Counter[tuple[str, str]]]:
        """Sort and check a batch's decoded events; the response (rejections), the accepted
        events in (t1, arrival) order, and the rejections by field and kind (late: behind its
        shard's settled epochs; ahead: beyond the time jump; invalid: not fit for its stream)."""
        response = pb.PublishResponse()
        refused: Counter[tuple[str, str]] = Counter()
        valid: list[tuple[int, int, int, Event]] = []
        for index, (item, arrival) in enumerate(incoming):
            if isinstance(item, EventError):
                response.rejected.append(rejection(index, item))
                refused[response.rejected[-1].field, "invalid"] += 1
            else:
                valid.append((item.t1, index if arrival is None else arrival, index, item))
        valid.sort(key=lambda item: (item[0], item[1]))
        accepted: list[Event] = []
        now = time.time()
        limits: dict[str, int | None] = {}
        aheads = [self._too_far_ahead(event, now, limits) for *_, event in valid]
        if request.watermark:
            fine: dict[str, int] = {}
            for (t1, *_, event), ahead in zip(valid, aheads, strict=True):
                if ahead is None:
                    fine[event.stream] = max(fine.get(event.stream, t1), t1)
            self._check_watermark(request.watermark, fine, now)
        for (t1, _order, index, event), ahead in zip(valid, aheads, strict=True):
            if ahead is not None:
                response.rejected.append(pb.Rejection(index=index, field="t1", reason=ahead))
                refused["t1", "ahead"] += 1
                continue
            settled = self.gate.settled(t1, event.stream, shard)
            if settled is not None:
                reason = _late_reason(t1, settled, shard)
                response.rejected.append(pb.Rejection(index=index, field="t1", reason=reason))
                refused["t1", "late"] += 1
                continue
            accepted.append(event)
            self._saw(event.stream, event.t1)
        response.rejected.sort(key=lambda r: r.index)
        return response, accepted, refused

    def _check_piece(
        self, request: pb.PublishRequest, inputs: Mapping[str, StreamSchema]
    ) -> Checked:
        """A routed piece's rows checked at once (:func:`~cesar.server.wire.arrowevents.check`)."""
        try:
            return check_arrow(read_arrow(request.arrow_events, limits.MAX_PUBLISH_EVENTS), inputs)
        except EventError as exc:
            raise InvalidArgument(f"arrow_events: {exc.reason}") from None

    def _accept_piece(
        self, request: pb.PublishRequest, checked: Checked, shard: int
    ) -> tuple[pb.PublishResponse, pa.Table, Counter[tuple[str, str]]]:
        """:meth:`_accept` for a routed piece, in Arrow: the response, the accepted rows in
        (t1, arrival) order, and the rejections by field and kind.

        Python runs once per stream and once per rejected row, never per accepted row.
        """
        response = pb.PublishResponse()
        refused: Counter[tuple[str, str]] = Counter()
        failed: list[tuple[int, pb.Rejection, str]] = [
            (index, rejection(index, error), "invalid") for index, error in checked.errors
        ]
        table = checked.table
        table = table.take(pc.sort_indices(table, [("t1", "ascending"), ("arrival", "ascending")]))
        streams = table.column("stream")
        t1s = table.column("t1").to_numpy()
        index = table.column("index").to_numpy()
        now = time.time()
        keep = np.ones(table.num_rows, bool)
        fine: dict[str, int] = {}
        late: list[tuple[str, np.ndarray]] = []
        for name in pc.unique(streams).to_pylist():
            mine = np.asarray(pc.equal(streams, name).to_numpy(zero_copy_only=False), bool)
            limit = self._time_limit(name, now)
            ahead = np.zeros_like(mine)
            if limit is not None:
                ahead = mine & (t1s > limit)
                for i in np.flatnonzero(ahead).tolist():
                    reason = self._ahead_reason(int(t1s[i]), limit)
                    failed.append((int(index[i]), pb.Rejection(field="t1", reason=reason), "ahead"))
            ok = mine & ~ahead
            if ok.any():
                fine[name] = int(t1s[ok].max())
            late.append((name, ok))
            keep &= ~ahead
        if request.watermark:
            self._check_watermark(request.watermark, fine, now)
        for name, ok in late:
            bound = self.gate.routed_bound(name, shard)
            behind = np.zeros_like(ok)
            if bound is not None:
                behind = ok & (t1s <= bound)
                for i in np.flatnonzero(behind).tolist():
                    reason = _late_reason(int(t1s[i]), bound, shard)
                    failed.append((int(index[i]), pb.Rejection(field="t1", reason=reason), "late"))
            keep &= ~behind
            accepted = ok & ~behind
            if accepted.any():
                self._saw(name, int(t1s[accepted].max()))
        for i, message, kind in sorted(failed, key=lambda item: item[0]):
            message.index = i
            response.rejected.append(message)
            refused[message.field, kind] += 1
        return response, table.filter(pa.array(keep)), refused

    def _arrivals(self, accepted: list[Event], shard: int | None) -> list[Arrival]:
        """The accepted events with the (shard, lane) pairs each goes to."""
        return [(event, self.registry.destinations(event, shard)) for event in accepted]

    def _piece_arrivals(self, table: pa.Table, shard: int) -> list[Arrival]:
        """A routed piece's accepted rows with the lanes of ``shard`` each goes to."""
        lanes = piece_destinations(table, self.registry.routing, shard)
        return list(zip(rows_of(table), lanes, strict=True))

    def _commit(self, ticket: Ticket, alerts: list[shard_pb2.ShardAlert]) -> None:
        """Log a batch with its alerts (its turn: every earlier batch is logged) and finish its
        ticket.  A commit that fails leaves the shards ahead of the log: the front stops
        taking batches (ShardFailure) until it is reloaded."""
        try:
            rows, touched = self._sequence(alerts)
            self.catalog.commit_batch(
                ticket.number, ticket.key, ticket.accepted, ticket.payload, rows, touched
            )
        except Exception as exc:
            self.shards.failed = f"batch {ticket.number} was applied but not logged ({exc})"
            self.turn.notify_all()
            raise ShardFailure(self.shards.failed) from exc
        self.committed = ticket.number
        self.inflight.discard(ticket.key)
        self.turn.notify_all()
        self.counters["events_accepted"] += ticket.accepted
        self.counters["events_rejected"] += len(ticket.response.rejected)
        self.rejections.update(ticket.refused)
        self.batch_seconds.observe(time.monotonic() - ticket.began)
        self.counters["alerts"] += len(rows)
        self.counters["batches"] += 1
        if ticket.shard is not None:
            self.counters["routed_batches"] += 1
        if rows:
            self.listeners.notify(self.catalog.last_alert_id())
        ticket.finish()

    def _saw(self, stream: str, t1: int) -> None:
        """Note an accepted (or replayed) event's time: its stream's newest ``t1``."""
        self.newest[stream] = max(self.newest.get(stream, t1), t1)

    def _check_watermark(self, watermark: int, fine: Mapping[str, int], now: float) -> None:
        """InvalidArgument if ``watermark`` is beyond every stream's time bound.

        A watermark closes epochs of every stream; one far in the future would
        make every later event late, as a wrong timestamp would.  It may be at
        most ``max_time_jump`` ahead of some input stream's newest event (this
        request's included: ``fine``, the newest ``t1`` per stream of its events in
        time) or, for a stream in a real time unit, of the clock.
        """
        latest = [
            limit
            for name in self.registry.inputs
            if (limit := self._time_limit(name, now)) is not None
        ]
        latest += [t1 + self._bound(stream) for stream, t1 in fine.items()]
        if latest and watermark > max(latest):
            raise InvalidArgument(
                f"watermark {watermark} is more than {self.max_time_jump} s ahead of every "
                f"stream's newest event and the clock (at most {max(latest)}): a wrong "
                "timestamp or unit? (cesar serve --max-time-jump)"
            )

    def _bound(self, stream: str) -> int:
        """``max_time_jump`` in ``stream``'s unit (ticks for the abstract tick)."""
        seconds = self.registry.inputs[stream].unit.seconds
        return self.max_time_jump if seconds is None else int(self.max_time_jump / seconds)

    def _time_limit(self, stream: str, now: float) -> int | None:
        """The latest ``t1`` ``stream`` accepts now (None: no event and no clock yet)."""
        seconds = self.registry.inputs[stream].unit.seconds
        marks = [self.newest[stream]] if stream in self.newest else []
        if seconds is not None:
            marks.append(int(now / seconds))
        return max(marks) + self._bound(stream) if marks else None

    def _too_far_ahead(self, event: Event, now: float, limits: dict[str, int | None]) -> str | None:
        """Why ``event`` is refused as too far in the future, or None.

        Its ``t1`` may be at most ``max_time_jump`` seconds ahead of the newest
        event of its stream and, for a stream in a real time unit, of the wall
        clock — so one mistaken timestamp (2^63-1, or milliseconds in a ``[min]``
        stream) cannot make every later event late.  For the abstract tick the
        bound is that many ticks past the stream's newest event.
        """
        stream = event.stream
        if stream in limits:
            limit = limits[stream]
        else:
            limit = limits[stream] = self._time_limit(stream, now)
        if limit is None or event.t1 <= limit:
            return None
        return self._ahead_reason(event.t1, limit)

    def _ahead_reason(self, t1: int, limit: int) -> str:
        return (
            f"t1 = {t1} jumps more than {self.max_time_jump} s ahead of the stream's newest "
            f"event and the clock (at most t1 = {limit} in its unit): a wrong "
            "timestamp or unit? (cesar serve --max-time-jump)"
        )

    @staticmethod
    def _incoming(
        request: pb.PublishRequest,
        inputs: Mapping[str, StreamSchema],
        streams: Mapping[str, StreamRow],
    ) -> Iterator[tuple[Event | EventError, int | None]]:
        """The request's events (then its Arrow rows), each validated or its error, with arrival.

        ``inputs`` are the input streams' schemas, ``streams`` every stream by name: one a
        subscription publishes is written by it alone.
        """
        for message in request.events:
            row = streams.get(message.stream)
            producer = None if row is None else row.subscription
            if producer:
                error = EventError(
                    None,
                    "stream",
                    f"{message.stream} is published by subscription {producer}; "
                    "only it writes there",
                )
                yield error, None
                continue
            try:
                yield from_event(message, inputs), None
            except EventError as exc:
                yield exc, None
        if request.arrow_events:
            room = limits.MAX_PUBLISH_EVENTS - len(request.events)
            try:
                yield from decode_arrow(request.arrow_events, inputs, room)
            except EventError as exc:
                raise InvalidArgument(f"arrow_events: {exc.reason}") from None

    def _advance(
        self, arrivals: list[Arrival], watermark: int | None, shard: int | None
    ) -> Applying:
        """Pass ``arrivals`` (in (t1, arrival) order) through the epoch gate; send the shards
        the epochs now ready (their alerts: the result).

        A lane whose ready items are all rows of routed pieces gets them as one
        Arrow table; any other lane, as events.
        """
        released = self.gate.advance(arrivals, watermark, shard)
        requests = [shard_pb2.ApplyRequest() for _ in range(self.shards.count)]
        for k, ready in enumerate(released):
            lanes: dict[str, list[Pending]] = {}
            for item in ready:
                lanes.setdefault(item.lane, []).append(item)
            for lane, items in lanes.items():
                group = requests[k].lanes.add(lane=lane)
                rows = [item.event for item in items if isinstance(item.event, Row)]
                if len(rows) == len(items):
                    group.arrow = encode_arrow(lane_table(rows))
                else:
                    group.events.extend(to_event(event_of(item.event)) for item in items)
        return self.shards.apply_later(requests)

    def _sequence(
        self, alerts: list[shard_pb2.ShardAlert]
    ) -> tuple[list[tuple[str, int, str, bytes]], dict[str, int]]:
        rows = []
        touched: dict[str, int] = {}
        for alert in alerts:
            sub = alert.subscription
            if sub not in self.registry.live:
                continue  # removed while the batch was being applied
            seq = self.registry.last_seq[sub] + 1
            self.registry.last_seq[sub] = touched[sub] = seq
            message = pb.Alert(subscription=sub, seq=seq, notice=alert.notice)
            if alert.HasField("event"):
                message.event.CopyFrom(alert.event)
            rows.append((sub, seq, self.registry.live[sub].row.owner, message.SerializeToString()))
        return rows, touched

    # ------------------------------------------------------------------ listen

    def listen(
        self,
        client: Client,
        subscriptions: Sequence[str],
        after_seq: Mapping[str, int],
        active: Callable[[], bool],
    ) -> Iterator[bytes]:
        """Alerts of ``client``'s subscriptions, as serialized AlertBatch messages: resumed
        ones first, then live ones."""
        with self.lock:
            wanted = set(subscriptions)
            for sub in wanted | set(after_seq):
                self._owned(client, sub)
            if self.listens[client.name] >= client.limits.max_listens:
                raise ResourceExhausted(
                    f"{client.name} has {self.listens[client.name]} Listen streams open, the limit"
                )
            self.listens[client.name] += 1
            self.counters["listens_opened"] += 1
        try:
            yield from self.listeners.stream(client.name, wanted, after_seq, active)
        finally:
            with self.lock:
                self.listens[client.name] -= 1

    # ----------------------------------------------------------- routing, stats

    def routing_table(self, client: Client) -> pb.RoutingTable:
        """The routing table for the feed (a token with the feed scope)."""
        if not client.may("feed"):
            raise PermissionDenied("the routing table is for the feed: use a token with scope=feed")
        with self.lock:
            return self.registry.routing_table()

    def stats(self) -> pb.StatsResponse:
        """Front counters and every shard's counters."""
        with self.lock:
            front = dict(self.counters)
            front.update(
                subscriptions=len(self.registry.live),
                streams=len(self.registry.streams),
                batches_logged=self.batches,
                open_epoch_events=self.gate.pending_events(),
                listens=sum(self.listens.values()),
                rss_bytes=rss_bytes(),
                checkpoints=self.checkpoints.taken,
                checkpoint_position=self.checkpoints.last_position,
                checkpoint_bytes=self.checkpoints.bytes,
                checkpoint_ms=round(self.checkpoints.seconds * 1000),
                log_compacted_to=self.catalog.compacted(),
            )
            shards = self.shards.stats()
        return pb.StatsResponse(front=front, shards=shards)

    # --------------------------------------------------------------- shutdown

    def _check_open(self) -> None:
        if self.closing:
            raise Unavailable("the server is shutting down")
        if self.shards.failed is not None:
            raise Unavailable(
                f"a shard failed ({self.shards.failed}); the server is reconnecting and "
                "reloading its shards: retry (an unacknowledged batch was not applied)"
            )

    def reload(self) -> None:
        """Rebuild every shard and the front's state from the catalog (the latest checkpoint
        and the log after it), after a shard was lost and is reachable again."""
        with self.lock:
            self.shards.failed = None
            self.registry = Registry(self.shards.count)
            self.gate = EpochGate(self.shards.count, self.registry.groups)
            self.newest = {}
            self.start()

    def stop_intake(self) -> None:
        """Later calls get UNAVAILABLE and Listen streams end."""
        self.closing = True
        self.listeners.close()

    def close(self) -> None:
        """Stop intake, then checkpoint and close the catalog."""
        self.stop_intake()
        with self.lock:
            self.catalog.close()


def _late_reason(t1: int, settled: int, shard: int | None) -> str:
    """Why an event at ``t1`` is late: epochs up to ``settled`` are being processed."""
    where = "" if shard is None else f" on shard {shard}"
    return f"late: t1 = {t1}, but events up to t1 = {settled} are already being processed{where}"


def _scoped(client: Client, key: str) -> str:
    """``key`` as stored: prefixed by its client, unambiguously ("" stays "")."""
    return f"{len(client.name)}:{client.name}:{key}" if key else ""
