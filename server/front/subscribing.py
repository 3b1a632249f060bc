"""Subscribing: check, parse and compile a client's queries, then place and register them.

:meth:`Front.subscribe_many <cesar.server.front.front.Front.subscribe_many>` runs
these stages in order:

1. :func:`prepare` (no lock, in a compile process:
   :class:`~cesar.server.front.compiling.Compiler`): the sizes, the name, the source
   parsed (:mod:`cesar.server.wire.source`) and compiled against the streams the
   client may read then — everything a stored subscription meets again when
   the server restarts, its wire encoding included (:func:`admit` builds the
   message its shards get).  A batch stops at its deadline and its compile budget
   (:data:`~cesar.server.front.limits.MAX_BATCH_COMPILE_SECONDS`) with nothing
   registered;
2. :func:`admit` (under the lock): an item whose idempotency key made a live
   subscription of the client's gets that subscription back (:func:`retried`); else the
   client's subscription limit, the
   stream name still free, compiled again only if a stream it reads changed
   meanwhile, placed (:func:`~cesar.server.front.placement.place`) and
   registered;
3. :func:`install_batches`: one InstallBatch per shard, in order.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from google.protobuf.message import Message

from cesar.automata.automaton import format_dot
from cesar.automata.compiler import CompiledQuery, compile_query
from cesar.automata.derived import check_inputs
from cesar.automata.errors import CelError
from cesar.automata.explain import explain, explain_data
from cesar.automata.partition import partition_keys
from cesar.automata.schema import SchemaError, StreamSchema, check_name
from cesar.automata.shape import QueryCache
from cesar.server.front import limits
from cesar.server.front.auth import Client
from cesar.server.front.catalog import SubscriptionRow
from cesar.server.front.errors import (
    AlreadyExists,
    DeadlineExceeded,
    FrontError,
    InvalidArgument,
    ResourceExhausted,
)
from cesar.server.front.placement import pinned_shard, place
from cesar.server.front.registry import Live, Registry
from cesar.server.wire.source import (
    Parsed,
    Source,
    SourceError,
    compile_source,
    install_request,
    parse_source,
)
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2


@dataclass(frozen=True)
class SubscribeItem:
    """One subscription to register: CEL ``text`` or an ``algebra`` message, its name, and
    the client's idempotency key for it (empty: none)."""

    text: str = ""
    name: str = ""
    algebra: pb.Algebra | None = None
    idempotency_key: str = ""

    def made(self, row: SubscriptionRow) -> bool:
        """Whether ``row`` is what this item asks for (a retry of the request that made it)."""
        algebra = b"" if self.algebra is None else self.algebra.SerializeToString()
        return (self.text, self.name or row.id, algebra) == (row.query, row.name, row.algebra)


@dataclass(frozen=True)
class Prepared:
    """A checked item, its source parsed, and its compiled form when compiled early."""

    item: SubscribeItem
    parsed: Parsed
    query: CompiledQuery | None = None


@dataclass(frozen=True)
class Admitted:
    """A registered subscription, its compiled query and what its shards get."""

    live: Live
    query: CompiledQuery
    install: shard_pb2.InstallRequest


NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
"""A word of a query's text that may name a stream (a pattern's event type may hold ``-``,
and reads the stream with ``_`` for it)."""


def named_streams(items: Iterable[SubscribeItem | str]) -> set[str]:
    """Every stream name the queries of ``items`` (or texts) can read: each word of a text,
    with ``-`` read as ``_`` too; each StreamRef of an algebra.  O(the queries' size)."""
    names: set[str] = set()
    for item in items:
        text = item if isinstance(item, str) else item.text
        for word in NAME.findall(text):
            names.update((word, word.replace("-", "_")))
        if not isinstance(item, str) and item.algebra is not None:
            names.update(_stream_refs(item.algebra))
    return names


def _stream_refs(message: Message) -> Iterator[str]:
    """The names of the StreamRef messages anywhere in ``message``."""
    if isinstance(message, pb.StreamRef):
        yield message.name
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        for one in value if field.is_repeated else [value]:
            yield from _stream_refs(one)


def check_batch(items: Sequence[SubscribeItem]) -> None:
    """InvalidArgument unless a batch holds 1 to MAX_SUBSCRIBE_BATCH items."""
    if not 1 <= len(items) <= limits.MAX_SUBSCRIBE_BATCH:
        raise InvalidArgument(
            f"a batch holds 1 to {limits.MAX_SUBSCRIBE_BATCH} subscriptions, not {len(items)}"
        )


def check_deadline(deadline: float | None, now: float | None = None) -> None:
    """DeadlineExceeded if ``deadline`` (monotonic) has passed: the caller gave up."""
    if deadline is not None and (time.monotonic() if now is None else now) > deadline:
        raise DeadlineExceeded(
            "the call's deadline passed before its subscriptions were stored; "
            "nothing was registered"
        )


def prepare(
    client: Client,
    item: SubscribeItem,
    schemas: Mapping[str, StreamSchema],
    likely_id: str,
    cache: QueryCache,
) -> Prepared | FrontError:
    """Check, parse and compile one item (named ``likely_id`` if unnamed), without the lock."""
    if bool(item.text) == (item.algebra is not None):
        return InvalidArgument("give exactly one of query (CEL text) and algebra")
    if len(item.idempotency_key.encode()) > limits.MAX_KEY_BYTES:
        return InvalidArgument(f"idempotency_key is longer than {limits.MAX_KEY_BYTES} bytes")
    size = len(item.text.encode()) if item.algebra is None else item.algebra.ByteSize()
    too_big = over_query_bytes(client, size + len(item.name.encode()), "query and name are")
    if too_big is not None:
        return too_big
    if item.name:
        try:
            check_name(item.name, "name")
        except SchemaError as exc:
            return InvalidArgument(str(exc))
    try:
        parsed = parse_source(Source(item.text, item.algebra))
    except SourceError as exc:
        return InvalidArgument(str(exc))
    prepared = Prepared(item, parsed)
    try:
        query = compile_prepared(prepared, item.name or likely_id, schemas, cache)
    except FrontError:
        return prepared  # it may read a stream defined meanwhile: compiled again under the lock
    return replace(prepared, query=query)


def over_query_bytes(client: Client, size: int, what: str) -> ResourceExhausted | None:
    """The error for ``size`` bytes of query past ``client``'s ``max_query_bytes``, or None."""
    if size <= client.limits.max_query_bytes:
        return None
    return ResourceExhausted(
        f"{what} {size} bytes; the limit for {client.name} is "
        f"{client.limits.max_query_bytes} (max_query_bytes)"
    )


def compile_prepared(
    prepared: Prepared, name: str, schemas: Mapping[str, StreamSchema], cache: QueryCache
) -> CompiledQuery:
    """Compile a prepared item; InvalidArgument if it does not compile."""
    try:
        return compile_source(prepared.parsed, schemas, name, cache)
    except SourceError as exc:
        raise InvalidArgument(str(exc)) from None


def admit(
    client: Client,
    prepared: Prepared,
    sub_id: str,
    schemas: Mapping[str, StreamSchema],
    registry: Registry,
    cache: QueryCache,
    position: int,
    counters: Counter[str],
) -> Admitted:
    """Check limits and names, place and register one subscription (under the lock), at log
    ``position``; nothing is registered if it fails."""
    owned = registry.owned[client.name]
    if owned >= client.limits.max_subscriptions:
        raise ResourceExhausted(
            f"{client.name} holds {owned} subscriptions, the limit (max_subscriptions)"
        )
    item = prepared.item
    stream = prepared.parsed.publish or item.name or sub_id
    registry.check_free(client, stream)
    query = prepared.query
    if (
        query is None
        or query.name != stream
        or any(registry.schema_for(client, s) is not schemas[s] for s in query.reads)
    ):
        counters["compiled_under_lock"] += 1
        query = compile_prepared(prepared, item.name or sub_id, registry.readable(client), cache)
    try:
        check_inputs(query.windows, registry.inputs)
    except CelError as exc:
        raise InvalidArgument(str(exc.with_source(item.text))) from None
    key, shard = place(query, registry)
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
        position=position,
        last_seq=0,
        algebra=b"" if item.algebra is None else item.algebra.SerializeToString(),
        idempotency_key=item.idempotency_key,
    )
    live = Live(row, query.reads, pinned_shard(query, key, registry.shards))
    try:
        steps = client.limits.max_client_steps_per_epoch
        install = install_request(query, live.lane, sub_id, registry.schemas, (client.name, steps))
    except SourceError as exc:
        raise InvalidArgument(str(exc)) from None
    registry.register(live, query)
    return Admitted(live, query, install)


def explained(
    client: Client, text: str, schemas: Mapping[str, StreamSchema], dot: bool
) -> tuple[str, str, str | None]:
    """(explain text, DOT or "", key attribute or None) for ``text`` over ``schemas``; at
    most ``max_query_bytes``, as a subscription."""
    query = _compiled_to_explain(client, text, schemas)
    keys = partition_keys(query.automata, schemas)
    return (
        explain(query, schemas),
        format_dot(query.automata) if dot else "",
        min(keys) if keys else None,
    )


def explained_data(
    client: Client, text: str, schemas: Mapping[str, StreamSchema]
) -> dict[str, object]:
    """``cesar explain --json`` of ``text`` over ``schemas``; at most ``max_query_bytes``;
    InvalidArgument (line, column, caret) if it does not compile."""
    return explain_data(_compiled_to_explain(client, text, schemas), schemas)


def _compiled_to_explain(
    client: Client, text: str, schemas: Mapping[str, StreamSchema]
) -> CompiledQuery:
    """``text`` compiled to be explained: at most ``max_query_bytes``; InvalidArgument (line,
    column, caret) if it does not compile."""
    too_big = over_query_bytes(client, len(text.encode()), "the query is")
    if too_big is not None:
        raise too_big
    try:
        return compile_query(text, schemas, "query")
    except CelError as exc:
        raise InvalidArgument(str(exc)) from None


def admit_all(
    client: Client,
    prepared: Sequence[Prepared | FrontError],
    first: int,
    schemas: Mapping[str, StreamSchema],
    registry: Registry,
    cache: QueryCache,
    position: int,
    counters: Counter[str],
) -> tuple[list[SubscriptionRow | FrontError], list[Admitted]]:
    """:func:`admit` each prepared item in order as ``s<first>``, ``s<first+1>``, ...; each
    item's row or error, and the admitted.  All or nothing on an unforeseen error."""
    results: list[SubscriptionRow | FrontError] = []
    admitted: list[Admitted] = []
    number = first
    try:
        for ready in prepared:
            if isinstance(ready, FrontError):
                results.append(ready)
                continue
            again = registry.keys.get((client.name, ready.item.idempotency_key))
            if again is not None:
                results.append(retried(ready.item, registry.live[again].row))
                continue
            try:
                one = admit(
                    client, ready, f"s{number}", schemas, registry, cache, position, counters
                )
            except FrontError as exc:
                results.append(exc)
                continue
            number += 1
            admitted.append(one)
            results.append(one.live.row)
    except BaseException:
        for one in reversed(admitted):
            registry.unregister(one.live)
        raise
    return results, admitted


def retried(item: SubscribeItem, row: SubscriptionRow) -> SubscriptionRow | FrontError:
    """``row`` again for a retry of the request that made it, AlreadyExists for another
    request under its idempotency key."""
    if item.made(row):
        return row
    return AlreadyExists(
        f"idempotency_key {item.idempotency_key!r} made subscription {row.id} from another "
        "request (query, algebra or name); a key stands for one request"
    )


def install_batches(admitted: Sequence[Admitted], shards: int) -> list[shard_pb2.InstallBatch]:
    """Per shard, the installs of ``admitted`` it runs, in order."""
    batches = [shard_pb2.InstallBatch() for _ in range(shards)]
    for one in admitted:
        for target in one.live.shards(shards):
            batches[target].subscriptions.append(one.install)
    return batches
