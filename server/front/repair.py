"""``cesar repair-log``: take a stream's events after a time out of the event log, offline.

The way back from a wrong timestamp that was accepted (within ``--max-time-jump``):
with the server stopped, drop every logged event of the stream with ``t1``
after a given time; at the next start the replay rebuilds the shards without
them, so the stream's clock group is back at its last good event.  Alerts
already sent stay in the history (a client has seen them); each subscription's
seq goes on from where it was.  Batches keep their numbers and acknowledged
counts, so a retried idempotency key still answers as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from cesar.server.front.catalog import Catalog
from cesar.v1 import cesar_pb2 as pb


@dataclass(frozen=True)
class Repair:
    """What a repair changed: batches rewritten and events dropped."""

    batches: int
    events: int


def drop_events(catalog: Catalog, stream: str, after: int) -> Repair:
    """Drop from the log every event of ``stream`` with ``t1 > after``.  O(logged events)."""
    rewritten: list[tuple[int, bytes]] = []
    dropped = 0
    for number, payload in catalog.batches():
        batch = pb.PublishRequest.FromString(payload)
        keep = [e for e in batch.events if not (e.stream == stream and e.t1 > after)]
        if len(keep) < len(batch.events):
            dropped += len(batch.events) - len(keep)
            del batch.events[:]
            batch.events.extend(keep)
            rewritten.append((number, batch.SerializeToString()))
    catalog.rewrite_batches(rewritten)
    return Repair(len(rewritten), dropped)
