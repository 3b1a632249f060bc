"""A shard's lanes and the alerts they send out, within each subscription's budget.

A :class:`Lane` is one engine and the subscriptions it runs; :func:`emit` turns an
epoch's outputs into the alerts of an Apply response (:class:`Responses`), at most
``max_alerts_per_epoch`` alerts and ``max_alert_bytes_per_epoch`` bytes per subscription
and epoch on this shard, with one notice per episode over a limit (:meth:`Lane.settle`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from cesar.server.engine.engine import Engine, Output
from cesar.server.engine.matches import Match
from cesar.server.wire.alertbytes import (
    EventWriter,
    event_body,
    head,
    notice_body,
    shard_alerts,
)

CALM_EPOCHS: Final = 64
"""Epochs of a capped subscription's alerts within the limits that end its episode."""
RESPONSE_BYTES: Final = 16 << 20
"""About the most alert bytes one Apply response message carries."""


class Sink:
    """Where one output stream of a lane sends its alerts: its subscription, its stream's
    field (an alert's event starts with it), and the current epoch's tally while :func:`emit`
    runs (alerts made, bytes sent, alerts dropped; all 0 between epochs)."""

    def __init__(self, subscription: str, stream_field: bytes) -> None:
        self.subscription = subscription
        self.stream_field = stream_field
        self.made = 0
        self.size = 0
        self.dropped = 0


@dataclass
class Lane:
    """One engine and the subscriptions it runs; ``streams`` maps output stream → subscription.

    ``capped`` holds the subscriptions over an alert limit since their notice, each with
    the epochs of alerts since then that stayed within the limits; ``writer`` writes its
    alerts' events; ``sinks`` holds the :class:`Sink` of each stream that has alerted (made
    from ``streams`` on its first alert, forgotten with the stream).
    """

    engine: Engine
    streams: dict[str, str] = field(default_factory=dict)
    capped: dict[str, int] = field(default_factory=dict)
    writer: EventWriter = field(default_factory=EventWriter)
    sinks: dict[str, Sink] = field(default_factory=dict)

    def add(self, stream: str, subscription: str) -> None:
        """Send the alerts of output ``stream`` to ``subscription``."""
        self.streams[stream] = subscription
        self.sinks.pop(stream, None)

    def remove(self, stream: str) -> None:
        """Forget output ``stream`` (its subscription was removed)."""
        del self.streams[stream]
        self.sinks.pop(stream, None)

    def sink(self, stream: str) -> Sink:
        """The :class:`Sink` of output ``stream``, made on its first alert.  O(1)."""
        found = self.sinks.get(stream)
        if found is None:
            found = self.sinks[stream] = Sink(self.streams[stream], head(stream))
        return found

    def settle(self, subscription: str, over: bool) -> bool:
        """Note an epoch in which ``subscription`` made alerts, ``over`` a limit or not;
        whether it starts an episode (the one notice).  An episode ends after
        :data:`CALM_EPOCHS` epochs within the limits, so a subscription hovering at a limit
        is told once, not at every crossing."""
        if over:
            starts = subscription not in self.capped
            self.capped[subscription] = 0
            return starts
        if subscription in self.capped:
            self.capped[subscription] += 1
            if self.capped[subscription] >= CALM_EPOCHS:
                del self.capped[subscription]
        return False


class Responses:
    """Apply's answer: per subscription, the bodies of its alerts in order
    (:mod:`cesar.server.wire.alertbytes`), in serialized ``ApplyResponse`` messages of about
    :data:`RESPONSE_BYTES` at most, written without a protobuf message in between."""

    def __init__(self) -> None:
        self._done: list[bytes] = []
        self._bodies: dict[str, list[bytes]] = {}
        self._size = 0

    def add(self, subscription: str, body: bytes) -> None:
        """Append an alert of ``subscription``: its serialized event or notice field."""
        if self._size and self._size + len(body) > RESPONSE_BYTES:
            self._flush()
        self._size += len(body)
        bodies = self._bodies.get(subscription)
        if bodies is None:
            self._bodies[subscription] = [body]
        else:
            bodies.append(body)

    def messages(self) -> list[bytes]:
        """The serialized responses, in order (at least one, maybe empty)."""
        self._flush()
        return self._done or [b""]

    def _flush(self) -> None:
        if self._bodies:
            self._done.append(
                b"".join(
                    shard_alerts(subscription, bodies)
                    for subscription, bodies in self._bodies.items()
                )
            )
        self._bodies, self._size = {}, 0


def emit(
    lane: Lane,
    outputs: Output,
    out: Responses,
    count_limit: int | None,
    byte_limit: int | None,
) -> int:
    """An epoch's alerts into ``out``, within each subscription's budget on this shard: at
    most ``count_limit`` alerts and ``byte_limit`` bytes (None: no limit); the rest are
    dropped, with one notice per episode (:meth:`Lane.settle`); how many were dropped.  A
    match shared by many subscriptions is written once, and each alert is its stream's field
    before those bytes (:class:`~cesar.server.wire.alertbytes.EventWriter`).  O(alerts): one
    look-up of its stream's :class:`Sink` an alert, which keeps the epoch's tally."""
    sinks, writer = lane.sinks, lane.writer
    touched: list[Sink] = []  # the sinks with alerts this epoch, in order of their first
    try:
        for item in outputs:
            streams = item.streams() if isinstance(item, Match) else [item.stream]
            rest: bytes | None = None  # written once, when first sent
            for stream in streams:
                sink = sinks.get(stream)
                if sink is None:
                    sink = lane.sink(stream)
                if not sink.made:
                    touched.append(sink)
                sink.made += 1
                if sink.dropped:
                    sink.dropped += 1
                    continue
                if rest is None:
                    rest = writer.rest(item.t0, item.t1, item.values)
                total = sink.size + len(sink.stream_field) + len(rest)
                if (count_limit is not None and sink.made > count_limit) or (
                    byte_limit is not None and total > byte_limit
                ):
                    sink.dropped = 1
                    continue
                sink.size = total
                out.add(sink.subscription, event_body(sink.stream_field, rest))
        dropped = 0
        for sink in touched:
            dropped += sink.dropped
            if lane.settle(sink.subscription, sink.dropped > 0):
                notice = (
                    f"{sink.made} alerts in one epoch; only the first {count_limit} of "
                    f"each epoch, within {byte_limit} bytes, are sent (one notice until "
                    f"{CALM_EPOCHS} epochs of its alerts pass within the limits)"
                )
                out.add(sink.subscription, notice_body(notice))
        return dropped
    finally:
        for sink in touched:
            sink.made = sink.size = sink.dropped = 0
