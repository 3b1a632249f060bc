"""``cesar repair-log``: take a stream's events after a time out of the event log, offline.

The way back from a wrong timestamp that was accepted (within ``--max-time-jump``):
with the server stopped, drop every logged event of the stream with ``t1``
after a given time; at the next start the replay rebuilds the shards without
them, so the stream's clock group is back at its last good event (from a
checkpoint taken before them, or the start of the log).  Alerts
already sent stay in the history (a client has seen them); each subscription's
seq goes on from where it was.  Batches keep their numbers and acknowledged
counts, so a retried idempotency key still answers as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc

from cesar.automata.schema import StreamSchema, parse_stream_spec
from cesar.server.front.catalog import Catalog
from cesar.server.host import snapshots
from cesar.server.host.snapshots import SnapshotError
from cesar.server.wire.arrowevents import encode as encode_arrow
from cesar.server.wire.arrowevents import read as read_arrow
from cesar.v1 import cesar_pb2 as pb


@dataclass(frozen=True)
class Repair:
    """What a repair changed: batches rewritten and events dropped."""

    batches: int
    events: int


class RepairError(RuntimeError):
    """The events cannot be dropped; the message says why."""


def input_schema(catalog: Catalog, stream: str) -> StreamSchema:
    """The schema of the input stream ``stream``; RepairError naming the input streams if the
    catalog has no such one."""
    inputs = {row.name: row for row in catalog.streams() if not row.subscription}
    if stream not in inputs:
        known = ", ".join(sorted(inputs)) or "none"
        raise RepairError(f"no input stream {stream} in the catalog (its input streams: {known})")
    return parse_stream_spec(inputs[stream].spec)


def drop_events(catalog: Catalog, stream: str, after: int) -> Repair:
    """Drop from the log every event of ``stream`` with ``t1 > after``.  O(logged events).

    A checkpoint taken once such an event had arrived holds it in its run state:
    it is forgotten, so the next start replays from an older one.  Raises
    :class:`RepairError`, changing nothing, when every checkpoint holds one and
    the log before them is compacted (the events are nowhere to be dropped from),
    and when ``stream`` is no input stream of the catalog.
    """
    input_schema(catalog, stream)
    stale = []
    for position, _shards, blob in catalog.checkpoints():
        try:
            newest = snapshots.decode(blob, position)["newest"]
        except SnapshotError:
            continue
        if newest.get(stream, after) > after:
            stale.append(position)
    compacted = catalog.compacted()
    if compacted and len(stale) == len(catalog.checkpoints()):
        raise RepairError(
            f"every checkpoint already holds events of {stream} after t1 = {after} and the "
            f"event log up to batch {compacted} is compacted: they can no longer be dropped "
            "(restore DATA_DIR from a backup taken before them)"
        )
    catalog.remove_checkpoints(stale)
    rewritten: list[tuple[int, bytes]] = []
    dropped = 0
    for number, payload, _ in catalog.batches():
        batch = pb.PublishRequest.FromString(payload)
        keep = [e for e in batch.events if not (e.stream == stream and e.t1 > after)]
        gone = len(batch.events) - len(keep)
        if gone:
            del batch.events[:]
            batch.events.extend(keep)
        if batch.arrow_events:  # the rows a front logs (its own batches, the feed's pieces)
            table = read_arrow(batch.arrow_events)
            drop = pc.and_(
                pc.equal(table.column("stream"), stream), pc.greater(table.column("t1"), after)
            )
            rows = pc.sum(drop).as_py() or 0
            if rows:
                gone += rows
                batch.arrow_events = encode_arrow(table.filter(pc.invert(drop)))
        if gone:
            dropped += gone
            rewritten.append((number, batch.SerializeToString()))
    catalog.rewrite_batches(rewritten)
    return Repair(len(rewritten), dropped)
