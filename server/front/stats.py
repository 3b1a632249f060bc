"""Stats: what a client may see of the counters, and everything for an admin and the metrics;
the console's operator figures (:func:`inflow`, :func:`activity`, :func:`checkpoint_history`).

An admin's Stats (and the Prometheus endpoint, :mod:`cesar.server.front.metrics`)
shows the front's counters and every shard's.  Any other client sees what is
its own: its subscriptions, input streams, Listen streams, alerts and events
waiting in open epochs, and the plans of its own pattern subscriptions — never
server-wide figures nor other clients' subscription ids.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from cesar.server.front.auth import Client
from cesar.server.front.checkpoints import Taken
from cesar.server.front.errors import NotFound
from cesar.server.front.registry import Latency
from cesar.server.host.rss import rss_bytes
from cesar.v1 import cesar_pb2 as pb

if TYPE_CHECKING:
    from cesar.server.front.front import Front


class Inflow(NamedTuple):
    """Per input stream since the front started (:func:`inflow`)."""

    newest: dict[str, int]
    """Its newest accepted ``t1``; a stream without an event yet is absent."""
    settled: dict[str, int]
    """Its watermark: the ``t1`` through which its epochs are settled (closed by a
    watermark, or applied on a shard): a later event at or before it is late; a stream
    with none settled yet is absent."""
    accepted: Counter[str]
    """Its events accepted."""
    rejected: Counter[tuple[str, str, str]]
    """Its events rejected, by (stream, field, kind); stream ``""``: naming no input stream."""


FRONT_COUNTERS = (
    "events_accepted",
    "events_rejected",
    "alerts",
    "batches",
    "routed_batches",
    "duplicate_batches",
    "subscribes",
    "unsubscribes",
    "listens_opened",
)
"""The front's counters, each shown from the start, at 0 until it first counts."""


def seen_by(front: Front, client: Client) -> pb.StatsResponse:
    """What ``client`` may see (see the module docstring)."""
    if client.may("admin"):
        return everything(front)
    registry = front.registry
    with front.lock:
        own = [live for live in registry.live.values() if live.row.owner == client.name]
        ids = {live.row.id for live in own}
        counters = {
            "subscriptions": len(own),
            "streams": sum(
                1
                for row in registry.streams.values()
                if row.owner == client.name and not row.subscription
            ),
            "listens": front.listens[client.name],
            "alerts": sum(registry.last_seq[i] for i in ids),
            "open_epoch_events": front.gate.held_by(client.name),
        }
        asking = front.shards.stats()
    shards = _numbered(asking.answers())
    return pb.StatsResponse(
        front=counters,
        shards=[
            pb.ShardStats(shard=s.shard, plans={i: p for i, p in s.plans.items() if i in ids})
            for s in shards
        ],
    )


def everything(front: Front) -> pb.StatsResponse:
    """The front's counters and every shard's (an admin's Stats, and the metrics)."""
    with front.lock:
        counters = dict.fromkeys(FRONT_COUNTERS, 0) | dict(front.counters)
        checkpoints = front.checkpoints
        counters.update(
            subscriptions=len(front.registry.live),
            streams=len(front.registry.streams),
            batches_logged=front.batches,
            open_epoch_events=front.gate.pending_events(),
            listens=sum(front.listens.values()),
            rss_bytes=rss_bytes(),
            checkpoints=checkpoints.taken,
            checkpoint_position=checkpoints.last_position,
            checkpoint_bytes=checkpoints.bytes,
            checkpoint_ms=round(checkpoints.seconds * 1000),
            log_compacted_to=front.catalog.compacted(),
            batches_timed=front.commits.batch_seconds.count,
            batch_latency_us_total=round(front.commits.batch_seconds.sum * 1e6),
        )
        # read before the Stats calls, which queue behind the Apply calls in flight
        waiting = [front.gate.waiting(shard) for shard in range(front.shards.count)]
        in_flight = list(front.shards.in_flight)
        asking = front.shards.stats()
    shards = _numbered(asking.answers())
    for shard in shards:
        shard.counters["events_waiting"] = waiting[shard.shard]
        shard.counters["applies_in_flight"] = in_flight[shard.shard]
    return pb.StatsResponse(front=counters, shards=shards)


def _numbered(shards: list[pb.ShardStats]) -> list[pb.ShardStats]:
    """``shards`` (every shard's, in order) with their index set: a shard on its own does not
    know its place."""
    for index, shard in enumerate(shards):
        shard.shard = index
    return shards


def inflow(front: Front) -> Inflow:
    """Per input stream since the front started: the newest accepted ``t1`` (streams without
    an event yet absent), its watermark, the events accepted and the rejections (a copy).
    O(input streams × shards)."""
    with front.lock:
        bounds = {name: front.gate.front_bounds(name)[0] for name in front.registry.inputs}
        return Inflow(
            dict(front.admission.newest),
            {name: t1 for name, t1 in bounds.items() if t1 is not None},
            Counter(front.commits.arrived),
            Counter(front.commits.rejections),
        )


def checkpoint_history(front: Front) -> list[Taken]:
    """The latest checkpoints the front took, newest first."""
    with front.lock:
        return list(reversed(front.checkpoints.history))


def activity(front: Front, sub_id: str) -> tuple[int, Latency | None]:
    """Subscription ``sub_id``'s events in (accepted on the input streams it reads since the
    front started) and its alert latency so far (None: no alert yet); NotFound if it is gone.
    O(streams it reads)."""
    with front.lock:
        live = front.registry.live.get(sub_id)
        if live is None:
            raise NotFound(f"no subscription {sub_id}")
        latency = front.registry.latency.get(sub_id)
        events = sum(front.commits.arrived[stream] for stream in live.reads)
        return events, None if latency is None else replace(latency)
