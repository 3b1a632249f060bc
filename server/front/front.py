"""The front: the server's operations, in one sequential history (docs/architecture.md).

:class:`Front` is the server's domain logic without gRPC: the servicers in
:mod:`cesar.server.front.service` translate messages and call it.  It holds the
lock and calls its parts in order: the catalog (SQLite), the
:class:`~cesar.server.front.registry.Registry` (its in-memory mirror),
:mod:`~cesar.server.front.streams`, :mod:`~cesar.server.front.subscribing`,
:mod:`~cesar.server.front.admission`, the epoch gate
(:mod:`~cesar.server.front.epochs`), the ordered commit
(:mod:`~cesar.server.front.commits`), :mod:`~cesar.server.front.startup`,
:mod:`~cesar.server.front.stats`, the shards
(:class:`~cesar.server.shard.pool.ShardPool`) and the alert streams
(:mod:`~cesar.server.front.alerts`).

Publishing, subscribing and unsubscribing run one at a time under one lock,
so the event log, the subscriptions' positions in it and the alerts' seqs
form one sequential history — the one replayed on start.  Publishing is
pipelined: a batch is validated, numbered and sent to the shards under the
lock (:meth:`Front.begin`), the shards apply it with the lock free, and the
committer logs the batches in number order, acknowledging each.  Listen streams
read committed alerts from their own SQLite connections and never block that path.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from cesar.automata.schema import Event
from cesar.automata.shape import QueryCache
from cesar.server.front import limits, streams
from cesar.server.front.admission import Admission, check_held, check_request
from cesar.server.front.alerts import Listeners, Listening
from cesar.server.front.auth import Client, Clients
from cesar.server.front.catalog import RESTORE, Catalog, CatalogError, StreamRow, SubscriptionRow
from cesar.server.front.checkpoints import Checkpoints, SnapshotPolicy
from cesar.server.front.columns import in_turns, request_table
from cesar.server.front.commits import Commits, Ticket, Tickets, Turnstile
from cesar.server.front.compiling import Compiler
from cesar.server.front.epochs import Arrival, EpochGate, apply_requests
from cesar.server.front.errors import (
    FailedPrecondition,
    FrontError,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unavailable,
)
from cesar.server.front.pieces import blocks, front_destinations
from cesar.server.front.pieces import destinations as piece_destinations
from cesar.server.front.registry import Live, Registry
from cesar.server.front.startup import load
from cesar.server.front.stats import everything, seen_by
from cesar.server.front.subscribing import (
    SubscribeItem,
    admit_all,
    check_batch,
    check_deadline,
    install_batches,
    named_streams,
)
from cesar.server.shard.pool import Applying, ShardPool
from cesar.server.wire.arrowevents import Checked
from cesar.server.wire.arrowevents import encode as encode_arrow
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
        replayed: frozenset[str] = frozenset(),
        clients: Clients | None = None,
    ) -> None:
        self.catalog = catalog
        self.clients = clients
        """The token table: each client's limits, read again for its stored subscriptions at
        start (None: no limits of clients)."""
        self.shards = shards
        self.checkpoints = Checkpoints(snapshots or SnapshotPolicy(0, 0), catalog, shards)
        self.lock = threading.Lock()
        self.turnstile = Turnstile()
        self.closing = False
        self.counters: Counter[str] = Counter()
        self.listeners = Listeners(catalog.path, self.counters)
        self.registry = Registry(shards.count)
        self.gate = EpochGate(shards.count, self.registry.groups, self.registry.unit_of)
        self.max_time_jump = max_time_jump
        self.replayed = replayed
        self.compiler = Compiler()
        """Compiling runs in these processes, off the event path."""
        self.admission = Admission(self.registry, self.gate, max_time_jump, replayed)
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
        """Declare an input stream (:func:`~cesar.server.front.streams.define`)."""
        schema = streams.parse_spec(spec)
        with self.lock:
            self._check_open()
            row = streams.define(client, schema, self.registry, self.catalog)
        log.info("stream defined", extra={"stream": row.name, "owner": client.name})
        return row

    def stream_rows(self, client: Client, after: str = "") -> list[tuple[StreamRow, list[str]]]:
        """The streams ``client`` may use named after ``after``, by name, with their readers."""
        with self.lock:
            return streams.listed(client, after, self.registry)

    def delete_stream(self, client: Client, name: str) -> None:
        """Remove an input stream ``client`` defined, once no subscription reads it."""
        with self.lock:
            self._check_open()
            streams.delete(client, name, self.registry, self.catalog)
        log.info("stream deleted", extra={"stream": name, "owner": client.name})

    def share_stream(
        self, client: Client, stream: str, readers: Sequence[str]
    ) -> tuple[StreamRow, list[str]]:
        """Let exactly ``readers`` (other clients) read ``client``'s published ``stream``."""
        wanted = streams.checked_readers(client, readers)
        with self.lock:
            self._check_open()
            row = streams.share(client, stream, wanted, self.registry, self.catalog)
        log.info("stream shared", extra={"stream": stream, "readers": wanted})
        return row, wanted

    # ---------------------------------------------------------- subscriptions

    def explain(self, client: Client, text: str, dot: bool) -> tuple[str, str, str | None]:
        """(explain text, DOT or "", key attribute or None) for a query of ``client``'s
        (:func:`~cesar.server.front.subscribing.explained`)."""
        with self.lock:
            schemas = self.registry.readable(client)
        return self.compiler.explained(client, text, schemas.named(named_streams([text])), dot)

    def explain_data(self, client: Client, text: str, own: str = "") -> dict[str, object]:
        """``cesar explain --json`` of a query of ``client``'s; ``own`` names the stream the
        query already publishes (a live subscription's), left out of the streams it reads."""
        with self.lock:
            schemas = self.registry.readable(client).named(named_streams([text]))
        schemas.pop(own, None)
        return self.compiler.explained_data(client, text, schemas)

    def subscribe(
        self,
        client: Client,
        text: str,
        name: str = "",
        algebra: pb.Algebra | None = None,
        deadline: float | None = None,
        idempotency_key: str = "",
    ) -> SubscriptionRow:
        """Compile, place, store and install a subscription (CEL ``text`` or ``algebra``);
        the one ``idempotency_key`` made, if it made one."""
        item = SubscribeItem(text, name, algebra, idempotency_key)
        (result,) = self.subscribe_many(client, [item], deadline)
        if isinstance(result, FrontError):
            raise result
        return result

    def subscribe_many(
        self, client: Client, items: Sequence[SubscribeItem], deadline: float | None = None
    ) -> list[SubscriptionRow | FrontError]:
        """Register ``items`` in order; each succeeds or fails on its own (its error returned).

        Queries are parsed and compiled before the lock is taken, in the compile processes
        (:meth:`~cesar.server.front.compiling.Compiler.prepare_all`), against the
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
        named = schemas.named(named_streams(items))  # not every stream the client owns
        prepared = self.compiler.prepare_all(client, items, named, first, deadline)
        with self.lock:
            self._check_open()
            registry = self.registry
            results, admitted = admit_all(
                client,
                prepared,
                self.catalog.next_subscription_number(),
                schemas,
                registry,
                self.queries,
                self.batches,
                self.counters,
            )
            try:  # all or nothing: what was registered goes if anything unforeseen fails
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
                    self.commits.stamped = self.batches
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
        """Remove one of ``client``'s subscriptions: gone from the registry and the catalog
        when this returns; its shards' Remove is sent in order behind their calls in flight,
        not waited for under the lock (an apply in flight would hold every other call)."""
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

    def place(self, sub_id: str) -> list[tuple[int, shard_pb2.PlaceResponse]]:
        """Per shard running ``sub_id``, where it sits: the template edges of its merged DAG
        it uses, what it holds, the steps charged to it (the caller has checked that the
        client may see it); NotFound if it is gone."""
        with self.lock:
            live = self.registry.live.get(sub_id)
            if live is None:
                raise NotFound(f"no subscription {sub_id}")
            shards = list(live.shards(self.shards.count))
            asking = self.shards.place(sub_id, shards)
        return list(zip(shards, asking.answers(), strict=True))

    def subscriptions(self, client: Client | None) -> list[SubscriptionRow]:
        """``client``'s subscriptions (None: everyone's), oldest first, with their latest seq."""
        with self.lock:
            return [
                replace(live.row, last_seq=self.registry.last_seq[live.row.id])
                for live in self.registry.live.values()
                if client is None or live.row.owner == client.name
            ]

    # ----------------------------------------------------------------- publish

    def publish(
        self, client: Client, request: pb.PublishRequest, data: bytes | None = None
    ) -> pb.PublishResponse:
        """Validate, apply, log and sequence one batch of ``client``'s; the acknowledgement
        (once it is logged).  See :meth:`begin`."""
        return self.begin(client, request, data).result()

    def begin(
        self, client: Client, request: pb.PublishRequest, data: bytes | None = None
    ) -> Ticket | Tickets:
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
        epochs (:func:`~cesar.server.front.columns.in_turns`), each logged as a
        batch of its own (its idempotency key numbered), so other clients' batches
        go between them; a retried request skips the turns already logged.  ``data``, the
        request's bytes as received, is where its events are read from (the message is
        serialized again when it is not given).
        """
        key, shard = check_request(client, request, self.shards.count)
        with self.lock:
            self._check_open()
            inputs = dict(self.registry.inputs)
        # the registry's streams are read a key at a time, not copied: one per subscription
        checked = request_table(request, inputs, self.registry.streams, data)
        if shard is not None and request.arrow_events and not request.events:
            return self._turn(key, request, shard, checked, client)  # a routed piece: whole
        parts = in_turns(checked, limits.EVENTS_PER_TURN)
        if len(parts) == 1:
            return self._turn(key, request, shard, parts[0], client)
        last = len(parts) - 1
        return Tickets(
            [
                self._turn(
                    f"{key}#{n}/{last}" if key else "",
                    request if n == last else pb.PublishRequest(),
                    shard,
                    part,
                    client,
                    request.shards,
                    first=n == 0,
                )
                for n, part in enumerate(parts)
            ]
        )

    def _turn(
        self,
        key: str,
        request: pb.PublishRequest,
        shard: int | None,
        checked: Checked,
        client: Client,
        shards: int = 0,
        first: bool = True,
    ) -> Ticket:
        """Take one batch of ``client``'s under the lock: its ``checked`` rows admitted,
        numbered, sent to the shards and handed to the committer; its watermark is
        ``request``'s. The ``first`` turn of a request checks the client's events waiting in
        open epochs (:func:`.admission.check_held`), after its idempotency key: a retried batch
        already logged is a duplicate whatever the client holds now. Batches enter in the
        order they arrive (:class:`Turnstile`), and at most ``BATCHES_IN_FLIGHT`` are sent
        to the shards and not yet logged: a batch waits for the shards' backlog of those,
        not of every turn a huge request has begun."""
        with self.turnstile, self.lock:
            self._check_open()
            while self.commits.unlogged(self.batches) >= limits.BATCHES_IN_FLIGHT:
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
            if first and checked.table.num_rows:
                check_held(client, self.gate)
            owner = client.name
            response, table, refused = self.admission.accept(request, checked, shard)
            arrivals = self.table_arrivals(table, shard)
            logged = pb.PublishRequest(arrow_events=encode_arrow(table.drop_columns("index")))
            logged.watermark = request.watermark
            if shard is not None:
                logged.shard, logged.shards = shard, request.shards or shards
            self.batches += 1
            number = response.batch = self.batches
            response.accepted = table.num_rows
            payload = logged.SerializeToString()
            counts = pc.value_counts(table.column("stream"))  # one Arrow pass, not a row each
            arrived = Counter(dict(zip(*(c.to_pylist() for c in counts.flatten()), strict=True)))
            ticket = Ticket(number, key, arrived, payload, shard, response, refused, owner)
            if self.checkpoints.due(number):
                # the snapshots must hold exactly the batches up to this one: nothing in flight
                self.commits.drain(number)
                alerts = self.advance(arrivals, request.watermark or None, shard, owner).result()
                self.commits.commit(ticket, alerts)
                self._checkpoint(number)
            else:
                ticket.applying = self.advance(arrivals, request.watermark or None, shard, owner)
                only_gate = shard is not None and not request.watermark
                self.commits.hand(ticket, only_gate and not ticket.applying.sent)
        return ticket

    def checkpoint_if_due(self) -> bool:
        """Take the checkpoint whose time has come though no batch commits to check it (an idle
        server would otherwise keep its log uncompacted, and replay all of it after a crash);
        True if one was taken.  Waits for the batches in flight to be logged first."""
        with self.turnstile, self.lock:
            number = self.batches
            if self.closing or self.shards.failed is not None:
                return False
            if not self.checkpoints.due(number):
                return False
            self.commits.drain(number + 1)
            self._checkpoint(number)
            return True

    def _checkpoint(self, number: int) -> None:
        """Take a checkpoint at batch ``number`` (every batch up to it applied and logged),
        with the front's own state: the epoch gate and each stream's newest time."""
        self.checkpoints.take(
            number, {"gate": self.gate.to_data(), "newest": self.admission.to_data()}
        )

    def arrivals(self, accepted: list[Event], shard: int | None) -> list[Arrival]:
        """The accepted events with the (shard, lane) pairs each goes to."""
        return [(event, self.registry.destinations(event, shard)) for event in accepted]

    def table_arrivals(self, table: pa.Table, shard: int | None) -> Sequence[Arrival]:
        """A batch's accepted rows in blocks, each with the (shard, lane) it goes to: the
        front's own routing (``shard`` None), or the lanes of the shard the feed routed them
        to (:func:`~cesar.server.front.pieces.blocks`)."""
        if shard is None:
            registry = self.registry
            routes = front_destinations(table, registry)
        else:
            routes = piece_destinations(table, self.registry.routing, shard)
        return blocks(table, routes)

    def advance(
        self, arrivals: Sequence[Arrival], watermark: int | None, shard: int | None, owner: str
    ) -> Applying:
        """Pass ``owner``'s ``arrivals`` (in (t1, arrival) order) through the epoch gate; send
        the shards the epochs now ready (their alerts: the result).

        Each shard's epochs go in requests of bounded size
        (:func:`~cesar.server.front.epochs.apply_requests`).
        """
        released = self.gate.advance(arrivals, watermark, shard, owner)
        requests = [apply_requests(ready) for ready in released]
        return self.shards.apply_later(requests)

    # ------------------------------------------------------------------ listen

    def listen(
        self,
        client: Client,
        subscriptions: Sequence[str],
        after_seq: Mapping[str, int],
        active: Callable[[], bool],
    ) -> Listening:
        """Alerts of ``client``'s subscriptions, as serialized AlertBatch messages: resumed
        ones first, then live ones.  The checks (ownership, seqs, the client's Listen
        streams) run now; the stream counts as one of the client's until it ends or is
        closed, read or not (:class:`Listening`)."""
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
        batches = self.listeners.stream(client.name, wanted, after_seq, active)
        return Listening(batches, lambda: self._listened(client.name))

    def _listened(self, name: str) -> None:
        with self.lock:
            self.listens[name] -= 1

    # ----------------------------------------------------------- routing, stats

    def routing_table(self, client: Client) -> pb.RoutingTable:
        """The routing table for the feed (a token with the feed scope)."""
        if not client.may("feed"):
            raise PermissionDenied("the routing table is for the feed: use a token with scope=feed")
        with self.lock:
            return self.registry.routing_table()

    def stats(self, client: Client) -> pb.StatsResponse:
        """What ``client`` may see of the counters (:func:`~cesar.server.front.stats.seen_by`)."""
        return seen_by(self, client)

    def server_stats(self) -> pb.StatsResponse:
        """Every counter (:func:`~cesar.server.front.stats.everything`)."""
        return everything(self)

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
            self.gate = EpochGate(self.shards.count, self.registry.groups, self.registry.unit_of)
            self.admission = Admission(self.registry, self.gate, self.max_time_jump, self.replayed)
            self.start()

    def stop_intake(self) -> None:
        """Later calls get UNAVAILABLE and Listen streams end."""
        self.closing = True
        self.listeners.close()

    def close(self) -> None:
        """Stop intake, then checkpoint and close the catalog; stop the compile processes."""
        self.stop_intake()
        with self.lock:
            self.catalog.close()
        self.compiler.close()
