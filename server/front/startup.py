"""Start-up: the catalog's streams and subscriptions, the latest checkpoint, then the log replayed.

:func:`load` rebuilds a front's state from its catalog.  Subscriptions are
installed in the order they were stored, each once the log is replayed up to
the position it was stored at, so it sees exactly the events it saw before;
clock groups are joined at the positions they were joined.  The latest usable
checkpoint (:mod:`cesar.server.front.checkpoints`) lets the replay start from
its position instead of the log's beginning: the subscriptions it holds are
installed, then its run state is restored in the shards, and the front's epoch
gate and stream times from its data.  Every subscription is compiled and
encoded as it was when it was accepted (:mod:`cesar.server.front.subscribing`
checked both before storing it).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from cesar.server.front.catalog import RESTORE, CatalogError, SubscriptionRow
from cesar.server.front.placement import pinned_shard
from cesar.server.front.registry import Live
from cesar.server.front.subscribing import Admitted, install_batches
from cesar.server.wire.arrowevents import read as read_arrow
from cesar.server.wire.convert import trusted_event
from cesar.server.wire.source import (
    Source,
    SourceError,
    compile_source,
    install_request,
    parse_source,
)
from cesar.v1 import cesar_pb2 as pb

if TYPE_CHECKING:
    from cesar.server.front.front import Front

log = logging.getLogger("cesar.front")


class ReplayError(RuntimeError):
    """The catalog cannot be replayed with this server's configuration."""


PROGRESS_EVERY = 5.0
"""Seconds between two ``replaying`` log lines while the log is replayed at start."""


def load(front: Front) -> None:
    """Load ``front``'s catalog and latest usable checkpoint, install every subscription and
    replay the event log after the checkpoint (see the module docstring)."""
    started = time.monotonic()
    catalog, registry = front.catalog, front.registry
    for stream in catalog.streams():
        if not stream.subscription:
            registry.add_stream(stream)
    shares = catalog.shares()
    chosen = front.checkpoints.choose()
    start = 0 if chosen is None else chosen[0]
    log_rows = iter(catalog.batches(after=start))
    joins = iter(catalog.clock_joins())
    join = next(joins, None)
    replayed = start
    last = catalog.batch_count()
    log.info(
        "loading catalog",
        extra={"checkpoint": start, "batches_to_replay": last - start},
    )
    told = started

    def replay_to(position: int | None) -> None:
        """Replay the log up to batch ``position`` (None: all), joining clock groups
        at the positions where they were joined."""
        nonlocal replayed, join, told
        while True:
            while join is not None and join[0] <= replayed:
                registry.groups.join(join[1])
                join = next(joins, None)
            if position is not None and replayed >= position:
                return
            row = next(log_rows, None)
            if row is None:
                return
            replay(front, *row)
            replayed = row[0]
            if time.monotonic() - told >= PROGRESS_EVERY:
                told = time.monotonic()
                log.info("replaying", extra={"batch": replayed, "of": last})

    def install(restored: list[Admitted]) -> None:
        front.shards.install(install_batches(restored, front.shards.count))
        restored.clear()

    restored: list[Admitted] = []
    resumed = chosen is None
    for sub in catalog.subscriptions():
        if not resumed and sub.position >= start:
            replay_to(start)  # the clock joins up to the checkpoint
            install(restored)
            resume(front, chosen)
            resumed = True
        if replayed < sub.position:
            install(restored)
        replay_to(sub.position)
        restored.append(restore(front, sub))
    install(restored)
    if not resumed:
        replay_to(start)
        resume(front, chosen)
    for shared, readers in shares.items():
        if shared in registry.streams:
            registry.share(shared, readers)
    replay_to(None)
    front.batches = catalog.batch_count()
    front.commits.reset(front.batches)
    front.listeners.notify(catalog.last_alert_id())
    log.info(
        "catalog loaded",
        extra={
            "streams": len(registry.streams),
            "subscriptions": len(registry.live),
            "checkpoint": start,
            "batches_replayed": front.batches - start,
            "seconds": round(time.monotonic() - started, 3),
        },
    )


def resume(front: Front, chosen: tuple[int, dict[str, Any]] | None) -> None:
    """With the subscriptions a checkpoint holds installed: restore its run state in the
    shards and the front's gate and stream times."""
    if chosen is None:
        return
    position, state = chosen
    front.gate.restore(state["gate"])
    front.admission.restore(state["newest"])
    instances = front.shards.resume()
    log.info("checkpoint restored", extra={"position": position, "instances": instances})


def restore(front: Front, row: SubscriptionRow) -> Admitted:
    """Compile and register a stored subscription; the caller installs it on the shards."""
    registry = front.registry
    try:
        algebra = pb.Algebra.FromString(row.algebra) if row.algebra else None
        parsed = parse_source(Source(row.query, algebra))
        query = compile_source(parsed, registry.schemas, row.name or row.id, front.queries)
        count = front.shards.count
        key = row.key_attribute or None
        live = Live(
            replace(row, shard=row.shard % count), query.reads, pinned_shard(query, key, count)
        )
        steps = (
            0
            if front.clients is None
            else front.clients.limits_of(row.owner).max_client_steps_per_epoch
        )
        request = install_request(query, live.lane, row.id, registry.schemas, (row.owner, steps))
    except (DecodeError, SourceError) as exc:
        raise CatalogError(
            f"subscription {row.id} of the catalog cannot be loaded ({exc}): {RESTORE}"
        ) from None
    registry.register(live, query)
    registry.groups.join(live.clock_streams)
    return Admitted(live, query, request)


def replay(front: Front, number: int, payload: bytes, owner: str) -> None:
    """Apply logged batch ``number`` of ``owner``'s again, as it was accepted (its events
    waiting in open epochs count in ``owner``'s budget again; it is not checked)."""
    try:
        batch = pb.PublishRequest.FromString(payload)
    except DecodeError as exc:
        raise CatalogError(
            f"batch {number} of the event log cannot be read ({exc}): {RESTORE}"
        ) from None
    shard = batch.shard if batch.HasField("shard") else None
    if shard is not None and batch.shards != front.shards.count:
        raise ReplayError(
            f"the event log holds batches the feed routed for {batch.shards} shards; "
            f"start the server with --shards {batch.shards}"
        )
    if batch.arrow_events:  # logged as accepted, in (t1, arrival) order
        arrivals = front.table_arrivals(read_arrow(batch.arrow_events), shard)
    else:  # a batch a front before columns logged as protobuf events
        arrivals = front.arrivals([trusted_event(e) for e in batch.events], shard)
    for item, _ in arrivals:  # every accepted row is in a block, those going nowhere too
        front.admission.saw(item.stream, item.t1)
    front.advance(arrivals, batch.watermark or None, shard, owner).result()
