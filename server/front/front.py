"""The front: the server's operations, in one sequential history (docs/architecture.md).

:class:`Front` is the server's domain logic without gRPC: the servicers in
:mod:`cesar.server.front.service` translate messages and call it.  It holds
the lock and calls its parts in order:

* the catalog (:mod:`cesar.server.front.catalog`), the SQLite store of streams,
  subscriptions, the event log and alerts;
* the :class:`~cesar.server.front.registry.Registry`, its in-memory mirror:
  streams, live subscriptions, routes, interest, tallies and alert seqs;
* subscribing (:mod:`cesar.server.front.subscribing`): check, parse, compile,
  place and register, everything validated before it is stored;
* admission (:mod:`cesar.server.front.admission`): which events of a batch are
  taken and why the others are refused;
* the :class:`~cesar.server.front.epochs.EpochGate`, which holds each shard's
  events until their epoch closes, so shards see whole epochs in order;
* the ordered commit (:mod:`cesar.server.front.commits`), which logs applied
  batches in number order with their alerts;
* start-up (:mod:`cesar.server.front.startup`): the catalog, the latest
  checkpoint and the log replayed;
* the shards, reached through :class:`~cesar.server.shard.pool.ShardPool`, and
  the alert streams (:mod:`cesar.server.front.alerts`).

Publishing, subscribing and unsubscribing run one at a time under one lock,
so the event log, the subscriptions' positions in it and the alerts' seqs
form one sequential history — the one replayed on start.  Publishing is
pipelined: a batch is validated, numbered and sent to the shards under the
lock (:meth:`Front.begin`), the shards apply it with the lock free (each
shard takes its calls in order), and the committer logs the batches in number
order, acknowledging each (:class:`~cesar.server.front.commits.Ticket`).
So the front checks and routes the next batch while the shards apply this
one, and the history is the same as if they had run one at a time.  Listen streams
(:mod:`cesar.server.front.alerts`) read committed alerts from their own SQLite
connections and never block that path.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

import pyarrow as pa

from cesar.automata.automaton import format_dot
from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelError
from cesar.automata.explain import explain
from cesar.automata.partition import partition_keys
from cesar.automata.schema import Event, SchemaError, check_name, parse_stream_spec
from cesar.automata.shape import QueryCache
from cesar.server.front import limits
from cesar.server.front.admission import Admission, Incoming, turns
from cesar.server.front.alerts import Listeners
from cesar.server.front.auth import Client
from cesar.server.front.catalog import RESTORE, Catalog, CatalogError, StreamRow, SubscriptionRow
from cesar.server.front.checkpoints import Checkpoints, SnapshotPolicy
from cesar.server.front.commits import Commits, Ticket, Tickets, Turnstile
from cesar.server.front.epochs import Arrival, EpochGate, apply_requests
from cesar.server.front.errors import (
    FailedPrecondition,
    FrontError,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from cesar.server.front.pieces import destinations as piece_destinations
from cesar.server.front.pieces import rows_of
from cesar.server.front.registry import Live, Registry
from cesar.server.front.startup import load
from cesar.server.front.subscribing import (
    Admitted,
    SubscribeItem,
    admit,
    check_batch,
    check_deadline,
    install_batches,
    prepare_all,
)
from cesar.server.host.rss import rss_bytes
from cesar.server.shard.pool import Applying, ShardPool
from cesar.server.wire.arrowevents import Checked
from cesar.server.wire.arrowevents import encode as encode_arrow
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2

log = logging.getLogger("cesar.front")


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
        self.turnstile = Turnstile()
        self.closing = False
        self.counters: Counter[str] = Counter()
        self.listeners = Listeners(catalog.path, self.counters)
        self.registry = Registry(shards.count)
        self.gate = EpochGate(shards.count, self.registry.groups)
        self.max_time_jump = max_time_jump
        self.admission = Admission(self.registry, self.gate, max_time_jump)
        self.batches = 0
        """Batches are numbered in order under the lock; ``batches`` is the last begun."""
        self.commits = Commits(
            self.lock, catalog, shards, self.listeners, self.counters, lambda: self.registry
        )
        self.listens: Counter[str] = Counter()
        self.queries = QueryCache()

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        """Load the catalog and the latest usable checkpoint, install every subscription and
        replay the event log after the checkpoint (:func:`~cesar.server.front.startup.load`).

        Raises :class:`~cesar.server.front.catalog.CatalogError` for a catalog that
        cannot be read, naming the batch where the event log breaks, and
        :class:`~cesar.server.front.checkpoints.NoCheckpoint` when no checkpoint
        can be used and the log before them is compacted.
        """
        try:
            load(self)
        except sqlite3.DatabaseError as exc:
            raise CatalogError(f"{self.catalog.path} cannot be read ({exc}): {RESTORE}") from None

    # ---------------------------------------------------------------- streams

    def define_stream(self, client: Client, spec: str) -> StreamRow:
        """Declare an input stream."""
        try:
            schema = parse_stream_spec(spec)
        except SchemaError as exc:
            raise InvalidArgument(f"stream spec: {exc}") from None
        with self.lock:
            self._check_open()
            self.registry.check_free(client, schema.name)
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
            self.registry.share(stream, wanted)
        log.info("stream shared", extra={"stream": stream, "readers": wanted})
        return row, wanted

    # ---------------------------------------------------------- subscriptions

    def explain(self, client: Client, text: str, dot: bool) -> tuple[str, str, str | None]:
        """(explain text, DOT or "", key attribute or None) for a query of ``client``'s."""
        if len(text.encode()) > client.limits.max_query_bytes:
            raise ResourceExhausted(
                f"the query is {len(text.encode())} bytes; the limit for {client.name} is "
                f"{client.limits.max_query_bytes} (max_query_bytes)"
            )
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
        self,
        client: Client,
        text: str,
        name: str = "",
        algebra: pb.Algebra | None = None,
        deadline: float | None = None,
    ) -> SubscriptionRow:
        """Compile, place, store and install a subscription (CEL ``text`` or ``algebra``)."""
        item = SubscribeItem(text, name, algebra)
        (result,) = self.subscribe_many(client, [item], deadline)
        if isinstance(result, FrontError):
            raise result
        return result

    def subscribe_many(
        self, client: Client, items: Sequence[SubscribeItem], deadline: float | None = None
    ) -> list[SubscriptionRow | FrontError]:
        """Register ``items`` in order; each succeeds or fails on its own (its error returned).

        Queries are parsed and compiled before the lock is taken
        (:func:`~cesar.server.front.subscribing.prepare_all`), against the
        streams defined then and, for an unnamed query, under the id it will
        most likely get (the next ids in order); it is compiled again under the
        lock only if a stream it reads changed meanwhile or another batch took
        its id.  Once the client's ``deadline`` (monotonic) has passed, nothing
        of the batch is registered (DeadlineExceeded).  The admitted ones are
        stored in one transaction and installed with one call per shard.  Cost:
        one SQLite commit and one round trip per shard for the whole batch.
        """
        check_batch(items)
        with self.lock:
            schemas = self.registry.readable(client)
            first = self.catalog.next_subscription_number()
        prepared = prepare_all(client, items, schemas, first, self.queries, deadline)
        results: list[SubscriptionRow | FrontError] = []
        admitted: list[Admitted] = []
        with self.lock:
            self._check_open()
            number = self.catalog.next_subscription_number()
            registry = self.registry
            try:  # all or nothing: what was registered goes if anything unforeseen fails
                for ready in prepared:
                    if isinstance(ready, FrontError):
                        results.append(ready)
                        continue
                    try:
                        one = admit(
                            client,
                            ready,
                            f"s{number}",
                            schemas,
                            registry,
                            self.queries,
                            self.batches,
                            self.counters,
                        )
                    except FrontError as exc:
                        results.append(exc)
                        continue
                    number += 1
                    admitted.append(one)
                    results.append(one.live.row)
                groups = registry.groups
                joins = [
                    (self.batches, sorted(one.live.clock_streams))
                    for one in admitted
                    if len({groups.find(s) for s in one.live.clock_streams}) > 1
                ]
                check_deadline(deadline)
                if admitted:
                    streams = registry.streams
                    rows = [(one.live.row, streams[one.live.row.stream]) for one in admitted]
                    self.catalog.add_subscriptions(rows, joins)
            except BaseException:
                for one in reversed(admitted):
                    registry.unregister(one.live)
                raise
            for _position, joined in joins:
                groups.join(joined)
            if admitted:
                self.shards.install(install_batches(admitted, self.shards.count))
                self.counters["subscribes"] += len(admitted)
        for one in admitted:
            log.info(
                "subscribed",
                extra={
                    "subscription": one.live.row.id,
                    "owner": client.name,
                    "key": one.live.key,
                    "shard": one.live.row.shard,
                },
            )
        return results

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

    def begin(self, client: Client, request: pb.PublishRequest) -> Ticket | Tickets:
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
        so a large batch does not hold up other clients while it is read.  Its
        events are then taken in turns of about ``EVENTS_PER_TURN``, cut between
        epochs (:func:`~cesar.server.front.admission.turns`), each logged as a
        batch of its own (its idempotency key numbered), so other clients' batches
        go between them; a retried request skips the turns already logged.
        """
        if len(request.events) > limits.MAX_PUBLISH_EVENTS:
            raise ResourceExhausted(
                f"{len(request.events)} events in one request; the limit is "
                f"{limits.MAX_PUBLISH_EVENTS}: send smaller batches"
            )
        if len(request.idempotency_key.encode()) > limits.MAX_KEY_BYTES:
            raise InvalidArgument(f"idempotency_key is longer than {limits.MAX_KEY_BYTES} bytes")
        key = _scoped(client, request.idempotency_key)
        shard = request.shard if request.HasField("shard") else None
        if shard is not None and not client.may("feed"):
            raise PermissionDenied("batches routed to a shard come from the feed: scope=feed")
        if shard is None and not client.may("client"):
            raise PermissionDenied(
                "a feed token publishes batches it routed to one shard (GetRouting); "
                "events the front routes need scope=client"
            )
        if shard is not None and (request.shards != self.shards.count or shard >= request.shards):
            raise FailedPrecondition(
                f"the batch was routed for shard {shard} of {request.shards}; this server has "
                f"{self.shards.count} shards: fetch the routing table again (GetRouting)"
            )
        with self.lock:
            self._check_open()
            inputs = dict(self.registry.inputs)
        if shard is not None and request.arrow_events and not request.events:
            checked = Admission.check_piece(request, inputs)
            return self._turn(key, request, shard, checked)
        # the registry's streams are read a key at a time, not copied: one per subscription
        incoming = Admission.incoming(request, inputs, self.registry.streams)
        parts = turns(incoming, limits.EVENTS_PER_TURN)
        if len(parts) == 1:
            return self._turn(key, request, shard, incoming)
        last = len(parts) - 1
        return Tickets(
            [
                self._turn(
                    f"{key}#{n}/{last}" if key else "",
                    request if n == last else pb.PublishRequest(),
                    shard,
                    part,
                    request.shards,
                )
                for n, part in enumerate(parts)
            ]
        )

    def _turn(
        self,
        key: str,
        request: pb.PublishRequest,
        shard: int | None,
        checked: Checked | list[Incoming],
        shards: int = 0,
    ) -> Ticket:
        """Take one batch under the lock: its events (or a routed piece's ``checked`` rows)
        admitted, numbered, sent to the shards and handed to the committer; its watermark
        is ``request``'s.  Batches enter in the order they arrive (:class:`Turnstile`), and
        at most ``BATCHES_IN_FLIGHT`` are sent to the shards and not yet logged: a batch waits
        for the shards' backlog of those, not of every turn a huge request has begun."""
        with self.turnstile, self.lock:
            self._check_open()
            while self.batches - self.commits.committed >= limits.BATCHES_IN_FLIGHT:
                self.commits.wait_turn()  # the shards are behind: queue here, in arrival order
            if key:
                while key in self.commits.inflight:
                    self.commits.wait_turn()
                found = self.catalog.find_batch(key)
                if found is not None:
                    self.counters["duplicate_batches"] += 1
                    return Ticket.done(
                        pb.PublishResponse(accepted=found[1], duplicate=True, batch=found[0])
                    )
            if isinstance(checked, Checked):
                assert shard is not None
                response, table, refused = self.admission.accept_piece(request, checked, shard)
                arrivals = self.piece_arrivals(table, shard)
                logged = pb.PublishRequest(arrow_events=encode_arrow(table.drop_columns("index")))
            else:
                response, accepted, refused = self.admission.accept(
                    request.watermark, checked, shard
                )
                arrivals = self.arrivals(accepted, shard)
                logged = pb.PublishRequest(events=[to_event(e) for e in accepted])
            logged.watermark = request.watermark
            if shard is not None:
                logged.shard, logged.shards = shard, request.shards or shards
            self.batches += 1
            number = response.batch = self.batches
            response.accepted = len(arrivals)
            payload = logged.SerializeToString()
            ticket = Ticket(number, key, len(arrivals), payload, shard, response, refused)
            if self.checkpoints.due(number):
                # the snapshots must hold exactly the batches up to this one: nothing in flight
                self.commits.drain(number)
                alerts = self.advance(arrivals, request.watermark or None, shard).result()
                self.commits.commit(ticket, alerts)
                self.checkpoints.take(
                    number, {"gate": self.gate.to_data(), "newest": self.admission.to_data()}
                )
            else:
                ticket.applying = self.advance(arrivals, request.watermark or None, shard)
                self.commits.put(ticket)
        return ticket

    def arrivals(self, accepted: list[Event], shard: int | None) -> list[Arrival]:
        """The accepted events with the (shard, lane) pairs each goes to."""
        return [(event, self.registry.destinations(event, shard)) for event in accepted]

    def piece_arrivals(self, table: pa.Table, shard: int) -> list[Arrival]:
        """A routed piece's accepted rows with the lanes of ``shard`` each goes to."""
        lanes = piece_destinations(table, self.registry.routing, shard)
        return list(zip(rows_of(table), lanes, strict=True))

    def advance(
        self, arrivals: list[Arrival], watermark: int | None, shard: int | None
    ) -> Applying:
        """Pass ``arrivals`` (in (t1, arrival) order) through the epoch gate; send the shards
        the epochs now ready (their alerts: the result).

        Each shard's epochs go in requests of bounded size
        (:func:`~cesar.server.front.epochs.apply_requests`).
        """
        released = self.gate.advance(arrivals, watermark, shard)
        requests = [apply_requests(ready) for ready in released]
        return self.shards.apply_later(requests)

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
            for sub, seq in after_seq.items():
                last = self.registry.last_seq[sub]
                if seq > last:
                    raise OutOfRange(
                        f"after_seq {seq} of {sub} is past its last alert (seq {last}): "
                        "nothing would ever come; resume from a seq you received"
                    )
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

    def stats(self, client: Client) -> pb.StatsResponse:
        """What ``client`` may see of the counters: everything for an admin
        (:meth:`server_stats`); for any other client, its own subscriptions, streams,
        Listen streams and alerts, and the plans of its own pattern subscriptions."""
        if client.may("admin"):
            return self.server_stats()
        with self.lock:
            own = [live for live in self.registry.live.values() if live.row.owner == client.name]
            ids = {live.row.id for live in own}
            front = {
                "subscriptions": len(own),
                "streams": sum(
                    1
                    for row in self.registry.streams.values()
                    if row.owner == client.name and not row.subscription
                ),
                "listens": self.listens[client.name],
                "alerts": sum(self.registry.last_seq[i] for i in ids),
            }
            shards = self.shards.stats()
        return pb.StatsResponse(
            front=front,
            shards=[
                pb.ShardStats(shard=s.shard, plans={i: p for i, p in s.plans.items() if i in ids})
                for s in shards
            ],
        )

    def server_stats(self) -> pb.StatsResponse:
        """Front counters and every shard's counters (an admin's Stats, and the metrics)."""
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
            self.admission = Admission(self.registry, self.gate, self.max_time_jump)
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


def _scoped(client: Client, key: str) -> str:
    """``key`` as stored: prefixed by its client, unambiguously ("" stays "")."""
    return f"{len(client.name)}:{client.name}:{key}" if key else ""
