"""The ordered commit: batches applied by the shards are logged in number order.

Publishing is pipelined (docs/architecture.md): the front numbers a batch and
sends its epochs to the shards under its lock, then takes the next one while
the shards apply it.  :class:`Commits` logs the applied batches — with their
alerts, numbered per subscription by the registry — strictly in number
order, on its own thread, and finishes each one's :class:`Ticket`.  So the
event log, the alerts' seqs and the acknowledgements form the history one
batch at a time would have made.  A commit that fails leaves the shards
ahead of the log: the pool is marked failed and no later batch commits until
the front is reloaded.

One kind of batch is logged ahead of its turn (:meth:`Commits.hand`): a
piece the feed routed to a shard, without a watermark, that released no epoch —
its rows only entered the epoch gate, so it has no alerts, and waiting for the
apply of a close before it would hold the feed's next micro-batch behind that
apply.  Replay reads the log in number order, so a restart rebuilds the same
gate; and if a crash loses the earlier batch but not the piece, the earlier
one was never acknowledged: re-sent, it is judged as before, since a routed
row is late only by a watermark or an applied epoch of its shard, which the
piece moved neither (docs/architecture.md, "Durability and delivery").  Not
while a subscription or clock join is stored after the logged prefix
(:meth:`Commits.may_log_ahead`): replay restores it between the batches up to
its position and those after, and a gap left by a lost earlier batch would
put the piece before it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable

from cesar.server.front.admission import Refused
from cesar.server.front.alerts import Listeners
from cesar.server.front.catalog import Catalog
from cesar.server.front.registry import Registry
from cesar.server.host.metrics import Histogram
from cesar.server.shard.pool import Applying, ShardFailure, ShardPool
from cesar.v1 import cesar_pb2 as pb


class Ticket:
    """A batch begun: applied by the shards, then logged by the committer thread.

    :meth:`result` waits for it: the acknowledgement, or the ShardFailure that
    stopped it.
    """

    def __init__(
        self,
        number: int,
        key: str,
        arrived: Counter[str],
        payload: bytes,
        shard: int | None,
        response: pb.PublishResponse,
        refused: Refused | None = None,
        owner: str = "",
    ) -> None:
        self.number = number
        self.owner = owner
        """The client that published it."""
        self.refused = refused or Counter()
        """Its rejections by stream, field and kind (late, ahead, invalid)."""
        self.key = key
        self.arrived = arrived
        """Its accepted events, by stream."""
        self.accepted = arrived.total()
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
        ticket = cls(response.batch, "", Counter(), b"", None, response)
        ticket.finish()
        return ticket

    def finished(self) -> bool:
        """Whether the acknowledgement is ready (the batch is logged, or failed)."""
        return self._finished.is_set()

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


class Turnstile:
    """A first-come, first-served lock for the batches entering the front.

    Python's locks are not fair: a thread that releases one and takes it again at
    once (a huge request taken in turns) can keep a waiting thread out for all its
    turns.  Here each waiter is handed the turnstile in arrival order.

    >>> gate = Turnstile()
    >>> with gate:
    ...     gate.held
    True
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: deque[threading.Event] = deque()
        self.held = False

    def __enter__(self) -> None:
        with self._lock:
            if not self.held:
                self.held = True
                return
            handed = threading.Event()
            self._waiting.append(handed)
        handed.wait()

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()  # still held: handed to the next in line
            else:
                self.held = False


class Tickets:
    """The tickets of one request taken in turns: its acknowledgement merges theirs."""

    def __init__(self, tickets: list[Ticket]) -> None:
        self.tickets = tickets

    def result(self) -> pb.PublishResponse:
        """Every part's acceptances and rejections (by index in the request); the last part's
        batch number; a duplicate only if every part was.  Raises a part's ShardFailure."""
        merged = pb.PublishResponse(duplicate=True)
        for ticket in self.tickets:
            part = ticket.result()
            merged.accepted += part.accepted
            merged.rejected.extend(part.rejected)
            merged.batch = part.batch
            merged.duplicate &= part.duplicate
        merged.rejected.sort(key=lambda r: r.index)
        return merged


class Commits:
    """Logs applied batches in number order; see the module docstring.

    ``lock`` is the front's: :meth:`commit` and :meth:`wait_turn` run under it.
    ``registry`` gives the front's current registry (it is rebuilt on reload).
    """

    def __init__(
        self,
        lock: threading.Lock,
        catalog: Catalog,
        shards: ShardPool,
        listeners: Listeners,
        counters: Counter[str],
        registry: Callable[[], Registry],
    ) -> None:
        self.catalog = catalog
        self.shards = shards
        self.listeners = listeners
        self.counters = counters
        self.registry = registry
        self.lock = lock
        self.turn = threading.Condition(lock)
        """Notified whenever a batch commits or the shards fail."""
        self.committed = 0
        """The number of the last batch logged with every batch before it."""
        self.ahead: set[int] = set()
        """The numbers of batches logged ahead of their turn, after :attr:`committed`."""
        self.stamped = 0
        """The position of the newest subscription or clock join stored (replay restores it
        between the batches numbered up to its position and those after)."""
        self.inflight: set[str] = set()
        """The idempotency keys of batches begun and not logged yet."""
        self.rejections: Refused = Counter()
        """Events rejected, by stream, field and kind."""
        self.arrived: Counter[str] = Counter()
        """Events accepted, by stream."""
        self.batch_seconds = Histogram()
        """Per batch, from its request to its acknowledgement (validated, applied, logged)."""
        self._queue: queue.SimpleQueue[Ticket] = queue.SimpleQueue()
        threading.Thread(target=self._run, daemon=True, name="committer").start()

    def reset(self, committed: int) -> None:
        """After a (re)load: everything up to batch ``committed`` is logged, nothing in flight."""
        self.committed = committed
        self.ahead.clear()
        self.stamped = 0
        self.inflight.clear()

    def may_log_ahead(self) -> bool:
        """Whether a batch may be logged ahead of its turn now (under the lock): not while a
        batch at or before the newest stored position is unlogged, or a crash that lost it
        would leave a gap there, and replay would take the batch logged ahead before the
        subscription or clock join it followed."""
        return self.stamped <= self.committed

    def unlogged(self, taken: int) -> int:
        """How many of the batches up to number ``taken`` are not logged yet (under the lock)."""
        return taken - self.committed - len(self.ahead)

    def put(self, ticket: Ticket) -> None:
        """Hand a batch sent to the shards to the committer (under the lock)."""
        if ticket.key:
            self.inflight.add(ticket.key)
        self._queue.put(ticket)

    def _run(self) -> None:
        """Log the batches in flight, in order, as their shards finish applying them."""
        while True:
            ticket = self._queue.get()
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
                    self.commit(ticket, alerts)
                except ShardFailure as exc:
                    ticket.fail(exc)

    def hand(self, ticket: Ticket, gate_only: bool) -> None:
        """Take a batch sent to the shards (under the lock): one that only entered the gate
        (``gate_only``: a routed piece without a watermark that released no epoch) is logged
        now, ahead of the batches in flight before it, if :meth:`may_log_ahead`; any other
        goes to the committer (:meth:`put`).  A failure to log it fails its ticket."""
        if not gate_only or not self.may_log_ahead():
            self.put(ticket)
        elif self.shards.failed is not None:
            ticket.fail(ShardFailure(self.shards.failed))
        else:
            try:
                self.commit(ticket, [])
            except ShardFailure as exc:
                ticket.fail(exc)

    def commit(self, ticket: Ticket, alerts: list[bytes]) -> None:
        """Log a batch with its alerts (its shards' serialized Apply responses; its turn: every
        earlier batch is logged, or it releases no epoch: :meth:`hand`) and finish its ticket;
        ShardFailure if it cannot be logged."""
        try:
            registry = self.registry()
            rows, touched = registry.sequence(alerts)
            self.catalog.commit_batch(
                ticket.number,
                ticket.key,
                ticket.accepted,
                ticket.payload,
                ticket.owner,
                rows,
                touched,
            )
        except Exception as exc:
            self.shards.failed = f"batch {ticket.number} was applied but not logged ({exc})"
            self.turn.notify_all()
            raise ShardFailure(self.shards.failed) from exc
        self.ahead.add(ticket.number)
        while self.committed + 1 in self.ahead:
            self.committed += 1
            self.ahead.remove(self.committed)
        self.inflight.discard(ticket.key)
        self.turn.notify_all()
        self.counters["events_accepted"] += ticket.accepted
        self.counters["events_rejected"] += len(ticket.response.rejected)
        self.rejections.update(ticket.refused)
        self.arrived.update(ticket.arrived)
        seconds = time.monotonic() - ticket.began
        self.batch_seconds.observe(seconds)
        registry.timed(touched, seconds)
        made = sum(last - first + 1 for _, first, last, _, _ in rows)
        self.counters["alerts"] += made
        self.counters["batches"] += 1
        if ticket.shard is not None:
            self.counters["routed_batches"] += 1
        if rows:
            self.listeners.notify(self.catalog.last_alert_id(), made)
        ticket.finish()

    def wait_turn(self) -> None:
        """Wait (holding the lock) until a batch in flight commits; ShardFailure if the shards
        failed meanwhile (no batch after the failure may commit)."""
        if self.shards.failed is not None:
            raise ShardFailure(self.shards.failed)
        self.turn.wait()
        if self.shards.failed is not None:
            raise ShardFailure(self.shards.failed)

    def drain(self, number: int) -> None:
        """Wait (holding the lock) until every batch before ``number`` is logged."""
        while self.committed < number - 1:
            self.wait_turn()
