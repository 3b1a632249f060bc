"""What each console endpoint answers, as JSON data: the front's state as a client may see it.

Every function takes the authenticated :class:`~cesar.server.front.auth.Client` and
shows only what its token may see, as the gRPC API does: a client its own
subscriptions and streams, an admin token everything.  A subscription of another
client is :class:`~cesar.server.front.errors.NotFound`, as if it did not exist.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from typing import Any

from cesar.automata.schema import StreamSchema, TimeUnit, parse_stream_spec
from cesar.server.console.sample import SampleRuns, recent_events
from cesar.server.front.alerts import Listening
from cesar.server.front.auth import Client
from cesar.server.front.catalog import SubscriptionRow
from cesar.server.front.errors import InvalidArgument, NotFound
from cesar.server.front.front import Front
from cesar.server.front.stats import activity, checkpoint_history
from cesar.server.front.stats import inflow as stream_inflow
from cesar.server.wire.client import message_data
from cesar.server.wire.convert import trusted_event
from cesar.server.wire.eventfile import event_record, iso_time
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2


def whoami(client: Client) -> dict[str, Any]:
    """The client a token stands for, and whether it sees everything."""
    return {"client": client.name, "admin": client.may("admin")}


def _plans(front: Front, client: Client) -> dict[str, str]:
    plans: dict[str, str] = {}
    for shard in front.stats(client).shards:
        plans.update(shard.plans)
    return plans


def _placement(row: SubscriptionRow) -> str:
    return f"key:{row.key_attribute}" if row.key_attribute else f"global@{row.shard}"


def _row(row: SubscriptionRow, plans: dict[str, str]) -> dict[str, Any]:
    return {
        "id": row.id,
        "owner": row.owner,
        "stream": row.stream,
        "output": row.output_spec,
        "query": row.query,
        "algebra": bool(row.algebra),
        "placement": _placement(row),
        "last_seq": row.last_seq,
        "created_ms": row.created_ms,
        "plan": plans.get(row.id, ""),
    }


def subscriptions(front: Front, client: Client) -> list[dict[str, Any]]:
    """The caller's subscriptions (an admin's: everyone's), oldest first."""
    plans = _plans(front, client)
    return [_row(row, plans) for row in _visible(front, client)]


def _visible(front: Front, client: Client) -> list[SubscriptionRow]:
    return front.subscriptions(None if client.may("admin") else client)


def _visible_row(front: Front, client: Client, sub_id: str) -> SubscriptionRow:
    """Subscription ``sub_id`` if the caller may see it; NotFound, as if it did not exist."""
    for row in _visible(front, client):
        if row.id == sub_id:
            return row
    raise NotFound(f"no subscription {sub_id!r} of yours")


def subscription(front: Front, client: Client, sub_id: str) -> dict[str, Any]:
    """One subscription: its row, its plan, its compiled form (``cesar explain --json``, the
    automata the page draws), its place in each shard's merged DAG (the template edges it
    uses and how many subscriptions share each: counts, never their ids), what it does now
    (:func:`runtime`) and its latest alerts and notices, newest first; NotFound unless the
    caller may see it."""
    row = _visible_row(front, client, sub_id)
    data = _row(row, _plans(front, client))
    if row.query:  # an admin reads every stream, so it compiles as its owner's did
        data["compiled"] = front.explain_data(client, row.query, own=row.stream)
    placed = front.place(row.id)
    data["dag"] = [
        {
            "shard": shard,
            "lane": edge.lane,
            "edge": edge.edge,
            "source": edge.source,
            "target": edge.target,
            "kind": edge.kind,
            "stream": edge.stream,
            "template": edge.template,
            "sharers": edge.sharers,
        }
        for shard, answer in placed
        for edge in answer.edges
    ]
    data["runtime"] = _runtime(placed)
    data.update(_activity(front, row.id))
    schema = parse_stream_spec(row.output_spec)
    data["recent"] = [
        _record(pb.Alert.FromString(payload), schema)
        for payload in front.listeners.recent(row.id, RECENT)
    ]
    return data


def runtime(front: Front, client: Client, sub_id: str) -> dict[str, Any]:
    """What a subscription is doing now, cheap enough to poll: its last seq, its events in
    and alert latency (:func:`_activity`) and, per shard running it, the partial matches it
    holds and the steps charged to it in the latest epoch, each beside its budget (0: none);
    NotFound unless the caller may see it."""
    row = _visible_row(front, client, sub_id)
    return {
        "id": sub_id,
        "last_seq": row.last_seq,
        "runtime": _runtime(front.place(sub_id)),
        **_activity(front, sub_id),
    }


def _activity(front: Front, sub_id: str) -> dict[str, Any]:
    """``events_in``: events accepted on the input streams it reads since the server
    started; ``latency_ms``: over the batches that gave it alerts, from the publish request
    to its alerts logged, the last, the mean and the peak (absent before its first alert)."""
    events, latency = activity(front, sub_id)
    data: dict[str, Any] = {"events_in": events}
    if latency is not None:
        data["latency_ms"] = {
            "last": round(latency.last * 1000, 1),
            "mean": round(latency.total / latency.batches * 1000, 1),
            "peak": round(latency.peak * 1000, 1),
            "batches": latency.batches,
        }
    return data


def _runtime(placed: list[tuple[int, shard_pb2.PlaceResponse]]) -> list[dict[str, Any]]:
    return [
        {
            "shard": shard,
            "held": round(answer.held, 1),
            "instance_limit": answer.instance_limit,
            "steps": answer.steps,
            "step_limit": answer.step_limit,
        }
        for shard, answer in placed
    ]


def streams(front: Front, client: Client, now: float | None = None) -> list[dict[str, Any]]:
    """The streams the caller may use, by name; an input stream with, since the server
    started, its events ``accepted`` and ``rejected`` by reason (``late``, ``ahead``, or
    ``invalid`` and the field), and once it has an event, its newest event's time
    (``newest``: ticks, and ISO 8601 in its zone) and how far that is behind the wall clock
    (``lag_seconds``, for a stream with a calendar unit), and its watermark (``settled``:
    the time through which its epochs are settled; an event at or before it is late)."""
    inflow = stream_inflow(front)
    rejected: dict[str, dict[str, int]] = {}
    for (stream, field, kind), count in sorted(inflow.rejected.items()):
        reason = f"invalid {field}" if kind == "invalid" else kind
        rejected.setdefault(stream, {})[reason] = count
    newest = inflow.newest
    clock = time.time() if now is None else now
    out = []
    for row, readers in front.stream_rows(client):
        item: dict[str, Any] = {
            "name": row.name,
            "spec": row.spec,
            "owner": row.owner,
            "subscription": row.subscription,
            "shared_with": readers,
        }
        out.append(item)
        if row.subscription:
            continue
        item["accepted"] = inflow.accepted[row.name]
        item["rejected"] = rejected.get(row.name, {})
        t1, settled = newest.get(row.name), inflow.settled.get(row.name)
        if t1 is None and settled is None:
            continue
        schema = parse_stream_spec(row.spec)
        if t1 is not None:
            seconds = schema.unit.seconds
            item["newest_t1"] = t1
            item["newest"] = iso_time(t1, schema.unit, schema.zone)
            item["lag_seconds"] = None if seconds is None else round(clock - float(t1 * seconds))
        if settled is not None:
            item["settled_t1"] = settled
            item["settled"] = iso_time(settled, schema.unit, schema.zone)
    return out


def shards(front: Front, client: Client) -> dict[str, Any]:
    """The counters the caller may see: the front's and each shard's (Stats; an admin's
    include each shard's backlog, ``events_waiting`` and ``applies_in_flight``), and for an
    admin the front's latest checkpoints, newest first (``checkpoints``: when, at which log
    position, bytes, milliseconds, and the log position compacted to)."""
    data = message_data(front.stats(client))
    if client.may("admin"):
        data["checkpoints"] = [
            {
                "at": iso_time(round(taken.at), TimeUnit.SEC, "UTC"),
                "position": taken.position,
                "bytes": taken.bytes,
                "ms": round(taken.seconds * 1000),
                "compacted_to": taken.compacted_to,
            }
            for taken in checkpoint_history(front)
        ]
    return data


def subscribed(front: Front, client: Client, query: str) -> dict[str, Any]:
    """Subscribe ``query`` for the caller, as ``cesar subscribe`` does; its row."""
    return _row(front.subscribe(client, query), {})


def tried(
    front: Front, client: Client, runs: SampleRuns, query: str, recent: bool
) -> dict[str, Any]:
    """A run of ``query`` (:mod:`cesar.server.console.sample`) on the bundled sample, or,
    with ``recent``, on the latest events of the input streams it reads, those the caller
    may read; InvalidArgument for a query that reads a stream a subscription publishes."""
    if not recent:
        return runs.run(query)
    reads = front.explain_data(client, query)["reads"]
    assert isinstance(reads, list)
    rows = {row["name"]: row for row in streams(front, client)}
    for name in reads:
        if rows[name]["subscription"]:
            raise InvalidArgument(
                f"the query reads {name}, which subscription {rows[name]['subscription']} "
                "publishes: a run on recent events reads the server's input streams only; "
                "run it on the sample, or subscribe it"
            )
    schemas = [parse_stream_spec(rows[name]["spec"]) for name in reads]
    return runs.run(query, (schemas, recent_events(front.catalog.path, frozenset(reads))))


def explained(front: Front, client: Client, query: str) -> dict[str, Any]:
    """``query`` compiled against the caller's streams, as ``cesar explain --json``;
    InvalidArgument with the line, column and caret when it does not compile."""
    return front.explain_data(client, query)


def alerts(
    front: Front,
    client: Client,
    subscriptions: list[str],
    after: Mapping[str, int],
    active: Callable[[], bool],
) -> tuple[Listening, Generator[dict[str, Any]]]:
    """The caller's alerts as ``cesar listen`` prints them (times in the stream's zone):
    after ``after``'s seqs first, then live ones, of ``subscriptions`` (empty: all of its own,
    including later ones); until ``active()`` is false.  One of the caller's Listen streams
    (``max_listens``), held until the returned stream is closed, read or not; the checks run
    at the call, the waiting as it is read."""
    listening = front.listen(client, subscriptions, after, active)
    return listening, _records(front, client, listening)


RECENT = 20
"""Alerts a subscription's page shows: its latest kept (the retention permitting)."""


def _record(alert: pb.Alert, schema: StreamSchema | None) -> dict[str, Any]:
    """An alert as ``cesar listen`` prints it (times in the stream's zone)."""
    record: dict[str, Any] = {"subscription": alert.subscription, "seq": alert.seq}
    if alert.notice:
        record["notice"] = alert.notice
        return record
    record.update(event_record(trusted_event(alert.event), schema))
    return record


def _records(front: Front, client: Client, batches: Listening) -> Generator[dict[str, Any]]:
    schemas: dict[str, StreamSchema] = {}
    for batch in batches:
        for alert in pb.AlertBatch.FromString(batch).alerts:
            if alert.subscription not in schemas:
                rows = front.subscriptions(client)
                schemas.update({r.id: parse_stream_spec(r.output_spec) for r in rows})
            yield _record(alert, schemas.get(alert.subscription))
