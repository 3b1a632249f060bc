"""A shard's lanes and the alerts they send out, within each subscription's budget.

A :class:`Lane` is one engine and the subscriptions it runs; :func:`emit` turns an
epoch's outputs into the alerts of an Apply response (:class:`Responses`), at most
``max_alerts_per_epoch`` alerts and ``max_alert_bytes_per_epoch`` bytes per subscription
and epoch on this shard, with one notice per episode over a limit (:meth:`Lane.settle`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cesar.automata.schema import Event
from cesar.server.engine.engine import Engine, Output
from cesar.server.engine.matches import Match
from cesar.server.wire.convert import to_event
from cesar.v1 import cesar_pb2, shard_pb2

CALM_EPOCHS = 64
"""Epochs of a capped subscription's alerts within the limits that end its episode."""
RESPONSE_BYTES = 16 << 20
"""About the most alert bytes one Apply response message carries."""


@dataclass
class Lane:
    """One engine and the subscriptions it runs; ``streams`` maps output stream → subscription.

    ``capped`` holds the subscriptions over an alert limit since their notice, each with
    the epochs of alerts since then that stayed within the limits.
    """

    engine: Engine
    streams: dict[str, str] = field(default_factory=dict)
    capped: dict[str, int] = field(default_factory=dict)

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
    """Apply's answer: alerts in order, in messages of about :data:`RESPONSE_BYTES` at most."""

    def __init__(self) -> None:
        self.messages = [shard_pb2.ApplyResponse()]
        self._size = 0

    def add(self, alert: shard_pb2.ShardAlert) -> None:
        """Append ``alert`` (a notice)."""
        self._room(alert.ByteSize())
        self.messages[-1].alerts.append(alert)

    def add_event(self, subscription: str, event: cesar_pb2.Event, size: int) -> None:
        """Append an alert of ``subscription`` publishing ``event`` (``size``: its bytes),
        copying the event once, into the response."""
        self._room(size)
        self.messages[-1].alerts.add(subscription=subscription, event=event)

    def _room(self, size: int) -> None:
        """Start a new response if ``size`` more bytes would pass RESPONSE_BYTES."""
        if self._size and self._size + size > RESPONSE_BYTES:
            self.messages.append(shard_pb2.ApplyResponse())
            self._size = 0
        self._size += size


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
    match shared by many subscriptions is converted once and copied into each alert."""
    made: dict[str, int] = {}
    sizes: dict[str, int] = {}
    dropped: dict[str, int] = {}
    for item in outputs:
        if isinstance(item, Match):
            streams, event = item.streams(), Event("", item.t0, item.t1, item.values)
        else:
            streams, event = [item.stream], item
        shared: cesar_pb2.Event | None = None  # converted once, when first sent
        for stream in streams:
            subscription = lane.streams[stream]
            count = made[subscription] = made.get(subscription, 0) + 1
            if subscription in dropped:
                dropped[subscription] += 1
                continue
            if shared is None:
                shared = to_event(event)
            shared.stream = stream
            size = shared.ByteSize()
            total = sizes.get(subscription, 0) + size
            if (count_limit is not None and count > count_limit) or (
                byte_limit is not None and total > byte_limit
            ):
                dropped[subscription] = 1
                continue
            sizes[subscription] = total
            out.add_event(subscription, shared, size)
    for subscription in made:
        if lane.settle(subscription, subscription in dropped):
            out.add(
                shard_pb2.ShardAlert(
                    subscription=subscription,
                    notice=f"{made[subscription]} alerts in one epoch; only the first "
                    f"{count_limit} of each epoch, within {byte_limit} bytes, are sent "
                    f"(one notice until {CALM_EPOCHS} epochs of its alerts pass within "
                    "the limits)",
                )
            )
    return sum(dropped.values())
