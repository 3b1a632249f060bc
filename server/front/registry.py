"""The front's registry: streams, live subscriptions, routes and tallies, mirroring the catalog.

A :class:`Registry` is the in-memory picture of what the catalog
(:mod:`cesar.server.front.catalog`) stores, kept so that the front never reads
SQLite on the request path:

* every stream (input streams and those subscriptions PUBLISH) and its schema;
* every :class:`Live` subscription, its latest alert seq, and who reads each stream;
* the routing table (:mod:`cesar.server.wire.routing`) and, for global
  subscriptions, the static conjuncts each needs of each stream (its
  *interest*, probed per event and sent to the feed);
* the tallies placement and limits read: subscriptions per client, per key
  lane and, for global ones, per shard;
* each subscription's alert latency (:class:`Latency`), for the console;
* the clock groups (:class:`~cesar.server.engine.clocks.StreamGroups`): the
  front joins them when a subscription is stored, and on start from the catalog.

It holds no lock and does no I/O: the front calls it under its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from cesar.automata.compiler import CompiledQuery
from cesar.automata.normal import Conjunct, static_atoms
from cesar.automata.partition import static_interest
from cesar.automata.schema import Event, StreamSchema, Value, parse_stream_spec
from cesar.index.static import ConjunctIndex
from cesar.server.engine.clocks import StreamGroups
from cesar.server.front.auth import Client
from cesar.server.front.catalog import StreamRow, SubscriptionRow
from cesar.server.front.errors import AlreadyExists
from cesar.server.wire.alertbytes import Run, numbered
from cesar.server.wire.algebra_proto import to_predicate
from cesar.server.wire.arrowroute import Mask, compile_interest
from cesar.server.wire.routing import GLOBAL, RoutingTable, key_lane
from cesar.v1 import cesar_pb2 as pb

ARROW_INTEREST_SUBSCRIPTIONS = 1_000
"""Up to this many global subscriptions, the front evaluates their static interest over a
batch's columns (:meth:`Registry.interest_masks`); beyond, it probes the interest index row by
row, so that compiling the interest again after each subscription stays cheap."""

ARROW_INTEREST_FILTERS = 64
"""A shard's interest in a stream is evaluated in Arrow when it needs at most this many
filters (each a pass over the rows), its equalities of one attribute with strings counting
as one (``is_in``): 64 filters cost 5.5–6.0 µs an event where probing the rows one by one
cost 24 (perf/RESULTS.md, session 17), and the cost grows with the filters."""


@dataclass(slots=True)
class Latency:
    """A subscription's alert latency since the server started: for the batches that gave it
    alerts, each from its publish request to its alerts logged (seconds)."""

    last: float = 0.0
    total: float = 0.0
    peak: float = 0.0
    batches: int = 0

    def observe(self, seconds: float) -> None:
        """One more batch that gave alerts, ``seconds`` from request to log."""
        self.last = seconds
        self.total += seconds
        self.peak = max(self.peak, seconds)
        self.batches += 1


@dataclass(frozen=True)
class Live:
    """A live subscription: its catalog row and what it reads."""

    row: SubscriptionRow
    reads: frozenset[str]
    pinned: int | None = None
    """The one shard a key-partitioned subscription pinned to a key value runs on."""

    def shards(self, count: int) -> Sequence[int]:
        """The shards it runs on, of ``count``."""
        if self.pinned is not None:
            return [self.pinned]
        return range(count) if self.key else [self.row.shard]

    @property
    def key(self) -> str | None:
        """The attribute it is key-partitioned on, or None (global)."""
        return self.row.key_attribute or None

    @property
    def clock_streams(self) -> frozenset[str]:
        """The streams that share its clock group: those it reads and the one it publishes."""
        return self.reads | {self.row.stream}

    @property
    def lane(self) -> str:
        """The engine lane it runs in on its shards."""
        return key_lane(self.row.key_attribute) if self.row.key_attribute else GLOBAL


def may_read(client: Client, row: StreamRow, shares: Mapping[str, Collection[str]]) -> bool:
    """Whether ``client`` may use the stream: an input stream, its own, or shared with it.

    A published stream is its owner's; another client reads it only when the
    owner shared it (``shares``: stream → clients).  An admin reads everything.
    """
    return (
        not row.subscription
        or row.owner == client.name
        or client.name in shares.get(row.name, ())
        or client.may("admin")
    )


class Readable(Mapping[str, StreamSchema]):
    """The streams one client may read, as :meth:`Registry.readable` found them."""

    def __init__(
        self,
        client: Client,
        streams: dict[str, StreamRow],
        schemas: dict[str, StreamSchema],
        shares: dict[str, frozenset[str]],
        inputs: dict[str, StreamSchema],
    ) -> None:
        self._client = client
        self._streams = streams
        self._schemas = schemas
        self._shares = shares
        self._inputs = inputs

    def named(self, names: Iterable[str]) -> dict[str, StreamSchema]:
        """The input streams, and those of ``names`` the client may read: all that a query
        naming no other stream can read, without the published streams it does not name
        (a client may own thousands).  O(input streams + names)."""
        out = dict(self._inputs)
        for name in names:
            if name not in out and self._readable(name):
                out[name] = self._schemas[name]
        return out

    def _readable(self, name: str) -> bool:
        row = self._streams.get(name)
        return row is not None and may_read(self._client, row, self._shares)

    def __getitem__(self, name: str) -> StreamSchema:
        if not self._readable(name):
            raise KeyError(name)
        return self._schemas[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._readable(name)

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._streams if self._readable(name))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def subscription_number(sub_id: str) -> int:
    """``s12`` → 12, for ordering subscription ids."""
    return int(sub_id[1:])


def describe_stream(row: StreamRow) -> str:
    """Who a stream belongs to, for error messages."""
    if row.subscription:
        return f"published by subscription {row.subscription} of client {row.owner}"
    return f"an input stream defined by client {row.owner}"


class Registry:
    """Streams, live subscriptions, routes and tallies; see the module docstring.

    Methods: :meth:`add_stream`, :meth:`register`, :meth:`unregister`, :meth:`share`,
    :meth:`sequence`, :meth:`destinations`, :meth:`interest`, :meth:`check_valid`.
    """

    def __init__(self, shards: int) -> None:
        self.shards = shards
        self.streams: dict[str, StreamRow] = {}
        self.schemas: dict[str, StreamSchema] = {}
        self.inputs: dict[str, StreamSchema] = {}
        self.live: dict[str, Live] = {}
        self.last_seq: dict[str, int] = {}
        self.owner_of: dict[str, str] = {}
        """Each live subscription's owner (its row's), for numbering alerts
        (:func:`~cesar.server.wire.alertbytes.numbered`)."""
        self.latency: dict[str, Latency] = {}
        self.readers: dict[str, set[str]] = {}
        self.owned: Counter[str] = Counter()
        self.keys: dict[tuple[str, str], str] = {}
        self.lanes: Counter[str | None] = Counter()
        self.global_load: Counter[int] = Counter()
        self.routing = RoutingTable(shards)
        self.statics: dict[str, dict[str, tuple[Conjunct, ...]]] = {}
        self.shares: dict[str, set[str]] = {}
        self.groups = StreamGroups()
        self._interest: ConjunctIndex[tuple[str, str]] = ConjunctIndex()
        self._masks: dict[str, dict[int, Mask] | None] = {}
        """Per stream, its global interest compiled for Arrow (:meth:`interest_masks`),
        dropped when a global subscription reading it comes or goes."""

    def add_stream(self, row: StreamRow, schema: StreamSchema | None = None) -> None:
        """Enter a stream (an input stream when ``row.subscription`` is empty).

        Raises SchemaError, changing nothing, if ``row.spec`` is not a valid spec.
        """
        schema = schema or parse_stream_spec(row.spec)
        self.streams[row.name] = row
        self.schemas[row.name] = schema
        if not row.subscription:
            self.inputs[row.name] = schema

    def remove_stream(self, name: str) -> None:
        """Forget an input stream."""
        del self.streams[name], self.schemas[name], self.inputs[name]

    def check_free(self, client: Client, name: str) -> None:
        """AlreadyExists if stream ``name`` is taken; who holds it only if ``client`` may see it."""
        taken = self.streams.get(name)
        if taken is None:
            return
        if self.may_read(client, taken):
            raise AlreadyExists(f"stream {name} exists ({describe_stream(taken)})")
        raise AlreadyExists(f"stream {name} exists (another client's)")

    def share(self, stream: str, readers: Collection[str]) -> None:
        """Let exactly ``readers`` read the published ``stream`` (none: its owner alone)."""
        if readers:
            self.shares[stream] = set(readers)
        else:
            self.shares.pop(stream, None)

    def sequence(self, responses: Sequence[bytes]) -> tuple[list[Run], dict[str, int]]:
        """Number a batch's alerts, in order, from the shards' serialized ApplyResponse
        messages (:func:`~cesar.server.wire.alertbytes.numbered`): the rows to log (a
        subscription's alerts of the batch framed together, at most
        :data:`~cesar.server.wire.alertbytes.ROW_ALERTS` and about
        :data:`~cesar.server.wire.alertbytes.ROW_BYTES` a row) and each touched
        subscription's new last seq.  Alerts of subscriptions removed while the batch was
        applied are left out.  O(bytes), compiled: no message is built."""
        return numbered(responses, self.last_seq, self.owner_of)

    def timed(self, touched: Collection[str], seconds: float) -> None:
        """The subscriptions ``touched`` got alerts from a batch ``seconds`` after its
        request: their :class:`Latency`.  O(len(touched))."""
        for sub in touched:
            self.latency.setdefault(sub, Latency()).observe(seconds)

    def may_read(self, client: Client, row: StreamRow) -> bool:
        """Whether ``client`` may use the stream (:func:`may_read`)."""
        return may_read(client, row, self.shares)

    def schema_for(self, client: Client, name: str) -> StreamSchema | None:
        """The schema of stream ``name`` if it exists and ``client`` may read it.  O(1)."""
        row = self.streams.get(name)
        return self.schemas[name] if row is not None and self.may_read(client, row) else None

    def unit_of(self, stream: str) -> str | None:
        """The time unit of input ``stream`` (its name, e.g. ``MIN``), or None if unknown."""
        schema = self.inputs.get(stream)
        return None if schema is None else schema.unit.name

    def readable(self, client: Client) -> Readable:
        """The schemas of the streams ``client`` may read now, by name: a snapshot that later
        changes to the registry do not touch.  O(streams), copied in C; a lookup is O(1)."""
        shares = {name: frozenset(clients) for name, clients in self.shares.items()}
        return Readable(
            client, self.streams.copy(), self.schemas.copy(), shares, self.inputs.copy()
        )

    def register(self, live: Live, query: CompiledQuery) -> None:
        """Enter a subscription: routes, interest, tallies, its published stream.

        All or nothing: everything that can fail is checked before anything changes.
        """
        sub_id = live.row.id
        assert sub_id not in self.live and live.row.stream not in self.streams
        output = query.output
        self.routing.add(live.reads, live.key, live.row.shard)
        if live.key is None:
            statics = static_interest(query.automata)
            self.statics[sub_id] = statics
            for stream, conjuncts in statics.items():
                atoms = tuple(static_atoms(c) for c in conjuncts)
                self._interest.add((sub_id, stream), stream, atoms)
                self._masks.pop(stream, None)
        self._count(live, 1)
        if live.row.idempotency_key:
            self.keys[live.row.owner, live.row.idempotency_key] = sub_id
        self.live[sub_id] = live
        self.last_seq[sub_id] = live.row.last_seq
        self.owner_of[sub_id] = live.row.owner
        self.add_stream(
            StreamRow(live.row.stream, live.row.output_spec, live.row.owner, sub_id), output
        )

    def unregister(self, live: Live) -> None:
        """Undo :meth:`register`."""
        sub_id = live.row.id
        self.routing.remove(live.reads, live.key, live.row.shard)
        for stream in self.statics.pop(sub_id, {}):
            self._interest.remove((sub_id, stream))
            self._masks.pop(stream, None)
        self._count(live, -1)
        if live.row.idempotency_key:
            del self.keys[live.row.owner, live.row.idempotency_key]
        del self.live[sub_id]
        del self.last_seq[sub_id]
        del self.owner_of[sub_id]
        self.latency.pop(sub_id, None)
        del self.streams[live.row.stream]
        del self.schemas[live.row.stream]
        self.shares.pop(live.row.stream, None)

    def _count(self, live: Live, delta: int) -> None:
        self.owned[live.row.owner] += delta
        for stream in live.reads:
            readers = self.readers.setdefault(stream, set())
            if delta > 0:
                readers.add(live.row.id)
            else:
                readers.discard(live.row.id)
        self.lanes[live.key] += delta
        if live.key is None:
            self.global_load[live.row.shard] += delta

    def readers_of(self, stream: str) -> list[str]:
        """The live subscriptions reading ``stream``, oldest first."""
        return sorted(self.readers.get(stream, ()), key=subscription_number)

    def producers(self, reads: frozenset[str]) -> list[Live]:
        """The live subscriptions publishing the streams of ``reads``, by stream name."""
        return [
            self.live[self.streams[s].subscription]
            for s in sorted(reads)
            if self.streams[s].subscription
        ]

    def destinations(self, event: Event, shard: int | None) -> list[tuple[int, str]]:
        """The (shard, lane) pairs ``event`` goes to (only ``shard``'s when given)."""
        values = dict(event.values)
        destinations = self.routing.key_destinations(event.stream, values)
        destinations.extend((k, GLOBAL) for k in self.interested(event.stream, values))
        if shard is None:
            return destinations
        return [(k, lane) for k, lane in destinations if k == shard]

    def interested(self, stream: str, values: Mapping[str, Value]) -> list[int]:
        """The shards, in order, whose global subscriptions' static interest admits an event
        of ``stream`` with ``values`` (its global lane takes it)."""
        interested = self._interest.probe(stream, values)
        return sorted({self.live[s].row.shard for s, _ in interested})

    def interest_masks(self, stream: str) -> dict[int, Mask] | None:
        """Per global shard, the static interest in ``stream`` as an Arrow filter admitting at
        least the rows :meth:`interested` names (:func:`compile_interest`); None when the
        server has more than :data:`ARROW_INTEREST_SUBSCRIPTIONS` global subscriptions or
        a shard's interest needs more than :data:`ARROW_INTEREST_FILTERS` filters (then the
        front probes row by row).  Compiled when first asked after a change, O(global
        subscriptions); then O(1)."""
        if stream in self._masks:
            return self._masks[stream]
        masks: dict[int, Mask] | None = None
        if len(self.statics) <= ARROW_INTEREST_SUBSCRIPTIONS:
            masks = {}
            for shard, predicates in self._interest_predicates(stream).items():
                mask = compile_interest(predicates, stream, ARROW_INTEREST_FILTERS)
                if mask is None:
                    masks = None
                    break
                masks[shard] = mask
        self._masks[stream] = masks
        return masks

    def routing_table(self) -> pb.RoutingTable:
        """The routing table as GetRouting gives it: per stream, key attributes and each
        global shard's interest.  O(subscriptions) for the interest."""
        table = pb.RoutingTable(shards=self.routing.shards, version=self.routing.version)
        for stream in sorted(self.routing.streams):
            route = self.routing.streams[stream]
            table.streams.add(
                stream=stream,
                key_attributes=sorted(route.keys),
                global_shards=sorted(route.global_shards),
                global_interest=[
                    pb.GlobalInterest(shard=shard, conjuncts=predicates)
                    for shard, predicates in self._interest_predicates(stream).items()
                ],
            )
        return table

    def interest(self, stream: str) -> dict[int, list[Conjunct]]:
        """Per global shard, the distinct static conjuncts its subscriptions need of ``stream``."""
        shards: dict[int, dict[Conjunct, None]] = {}
        for sub, statics in self.statics.items():
            for conjunct in statics.get(stream, ()):
                shards.setdefault(self.live[sub].row.shard, {})[conjunct] = None
        return {shard: list(conjuncts) for shard, conjuncts in sorted(shards.items())}

    def _interest_predicates(self, stream: str) -> dict[int, list[pb.Predicate]]:
        """:meth:`interest` as the protobuf predicates GetRouting and the Arrow filters take."""
        return {
            shard: [to_predicate(c.pred()) for c in conjuncts]
            for shard, conjuncts in self.interest(stream).items()
        }

    def check_valid(self) -> None:
        """Assert that the tallies, readers, streams and interest agree with the live set."""
        assert set(self.live) == set(self.last_seq) >= set(self.latency)
        assert self.owner_of == {sub_id: live.row.owner for sub_id, live in self.live.items()}
        owned: Counter[str] = Counter(live.row.owner for live in self.live.values())
        assert +self.owned == owned
        lanes: Counter[str | None] = Counter(live.key for live in self.live.values())
        assert +self.lanes == lanes
        load: Counter[int] = Counter(
            live.row.shard for live in self.live.values() if live.key is None
        )
        assert +self.global_load == load
        for stream, readers in self.readers.items():
            assert readers == {s for s, live in self.live.items() if stream in live.reads}
        for sub_id, live in self.live.items():
            assert self.streams[live.row.stream].subscription == sub_id
            assert (sub_id in self.statics) == (live.key is None)
        assert self.keys == {
            (live.row.owner, live.row.idempotency_key): sub_id
            for sub_id, live in self.live.items()
            if live.row.idempotency_key
        }
        published = {row.subscription for row in self.streams.values() if row.subscription}
        assert published == set(self.live)
        assert set(self.schemas) == set(self.streams) >= set(self.inputs)
        for stream in self.shares:
            assert self.streams[stream].subscription, f"{stream} is shared but not published"
        self._interest.check_valid()
        self.groups.check_valid()
        keys: Mapping[str, dict[str, tuple[Conjunct, ...]]] = self.statics
        assert len(self._interest) == sum(len(s) for s in keys.values())
