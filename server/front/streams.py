"""Streams: define, list, delete and share them, each check before the catalog and registry move.

The front calls these under its lock (and :func:`parse_spec` and
:func:`checked_readers`, which need no state, before taking it).  Input streams
are anyone's to read and their definer's to delete; a stream a subscription
publishes is its owner's, read by others only once shared with them
(:func:`~cesar.server.front.registry.may_read`).
"""

from __future__ import annotations

from collections.abc import Sequence

from cesar.automata.schema import SchemaError, StreamSchema, check_name, parse_stream_spec
from cesar.server.front import limits
from cesar.server.front.auth import Client
from cesar.server.front.catalog import Catalog, StreamRow
from cesar.server.front.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from cesar.server.front.registry import Registry


def parse_spec(spec: str) -> StreamSchema:
    """The schema of a stream spec; InvalidArgument saying what is wrong."""
    try:
        return parse_stream_spec(spec)
    except SchemaError as exc:
        raise InvalidArgument(f"stream spec: {exc}") from None


def define(client: Client, schema: StreamSchema, registry: Registry, catalog: Catalog) -> StreamRow:
    """Declare ``client``'s input stream ``schema``: its name free, within ``max_streams``."""
    registry.check_free(client, schema.name)
    defined = sum(
        1 for r in registry.streams.values() if r.owner == client.name and not r.subscription
    )
    if defined >= client.limits.max_streams:
        raise ResourceExhausted(
            f"{client.name} has defined {defined} streams, the limit (max_streams)"
        )
    row = StreamRow(schema.name, schema.spec(), client.name, "")
    catalog.add_stream(row)
    registry.add_stream(row)
    return row


def listed(client: Client, after: str, registry: Registry) -> list[tuple[StreamRow, list[str]]]:
    """The streams ``client`` may use named after ``after``, by name, with their readers."""
    rows = [r for r in registry.streams.values() if r.name > after and registry.may_read(client, r)]
    return [
        (row, sorted(registry.shares.get(row.name, ())))
        for row in sorted(rows, key=lambda r: r.name)
    ]


def owned(client: Client, name: str, published: bool, registry: Registry) -> StreamRow:
    """``client``'s (an admin: anyone's) published or input stream ``name``; else NotFound."""
    row = registry.streams.get(name)
    if (
        row is None
        or bool(row.subscription) != published
        or not (row.owner == client.name or client.may("admin"))
    ):
        kind = "published" if published else "input"
        raise NotFound(f"no {kind} stream {name} of yours")
    return row


def delete(client: Client, name: str, registry: Registry, catalog: Catalog) -> None:
    """Remove an input stream ``client`` defined, once no subscription reads it."""
    owned(client, name, False, registry)
    readers = registry.readers_of(name)
    if readers:
        raise FailedPrecondition(
            f"{len(readers)} subscriptions read {name}; they must be removed first"
        )
    catalog.remove_stream(name)
    registry.remove_stream(name)


def checked_readers(client: Client, readers: Sequence[str]) -> list[str]:
    """The other clients a stream is to be shared with, each a valid name, at most
    ``MAX_READERS``."""
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
    return wanted


def share(
    client: Client, stream: str, wanted: list[str], registry: Registry, catalog: Catalog
) -> StreamRow:
    """Let exactly ``wanted`` read ``client``'s published ``stream``; FailedPrecondition while
    a client left out still has subscriptions reading it."""
    row = owned(client, stream, True, registry)
    dropped = registry.shares.get(stream, set()) - set(wanted)
    still = sorted({registry.live[r].row.owner for r in registry.readers_of(stream)} & dropped)
    if still:
        raise FailedPrecondition(
            f"clients {', '.join(still)} have subscriptions reading {stream}; "
            "they must remove them before the stream stops being shared with them"
        )
    catalog.set_shares(stream, wanted)
    registry.share(stream, wanted)
    return row
