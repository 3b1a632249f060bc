"""Routing events to shards: lanes, key bytes and the hash (docs/design.md).

A shard runs one engine per *lane*.  Subscriptions key-partitioned on
attribute ``K`` share the lane ``key:K`` on every shard, and an event reaches
that lane on shard ``crc32(key_bytes(event[K])) mod shards``; global
subscriptions share the lane ``global`` of the one shard each is placed on,
which receives the events of the streams they read that satisfy their *static
interest* (:func:`cesar.automata.partition.static_interest`; GetRouting lists
it).  The Spark feed routes by the same rule (GetRouting gives the table), so :func:`key_bytes` is
specified exactly:

* a string: its UTF-8 bytes;
* a bool: ``true`` or ``false``;
* an int, or a float with an integral value: its decimal digits (so ``7`` and
  ``7.0``, equal in every predicate, go to the same shard);
* any other float: Python's ``repr`` (the shortest round-tripping form).

>>> key_bytes("IBM"), key_bytes(7), key_bytes(7.0), key_bytes(0.5)
(b'IBM', b'7', b'7', b'0.5')
>>> shard_of("IBM", 2)
1
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from cesar.automata.schema import Value

GLOBAL = "global"


def key_lane(attribute: str) -> str:
    """The lane of subscriptions key-partitioned on ``attribute``."""
    return f"key:{attribute}"


def key_bytes(value: Value) -> bytes:
    """The bytes a key value hashes as (see the module docstring)."""
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value)).encode()
    if isinstance(value, (int, float)):
        return repr(value).encode()
    return value.encode()


def shard_of(value: Value, shards: int) -> int:
    """The shard a key value belongs to: ``crc32(key_bytes(value)) mod shards``."""
    return zlib.crc32(key_bytes(value)) % shards


@dataclass
class StreamRoute:
    """Where one stream's events go: key lanes reading it and global shards reading it."""

    keys: dict[str, int] = field(default_factory=dict)
    global_shards: dict[int, int] = field(default_factory=dict)


@dataclass
class RoutingTable:
    """Reference-counted routes per stream; ``version`` grows with every change."""

    shards: int
    streams: dict[str, StreamRoute] = field(default_factory=dict)
    version: int = 0

    def add(self, streams: frozenset[str], key: str | None, shard: int) -> None:
        """Route ``streams`` to the lane of a new subscription (key, or global on ``shard``)."""
        for stream in streams:
            route = self.streams.setdefault(stream, StreamRoute())
            if key is None:
                route.global_shards[shard] = route.global_shards.get(shard, 0) + 1
            else:
                route.keys[key] = route.keys.get(key, 0) + 1
        self.version += 1

    def remove(self, streams: frozenset[str], key: str | None, shard: int) -> None:
        """Undo one :meth:`add` with the same arguments."""
        for stream in streams:
            route = self.streams[stream]
            table: dict[object, int] = route.global_shards if key is None else route.keys  # type: ignore[assignment]
            slot: object = shard if key is None else key
            table[slot] -= 1
            if not table[slot]:
                del table[slot]
            if not route.keys and not route.global_shards:
                del self.streams[stream]
        self.version += 1

    def key_destinations(self, stream: str, values: dict[str, Value]) -> list[tuple[int, str]]:
        """The (shard, key lane) pairs an event of ``stream`` with ``values`` goes to."""
        route = self.streams.get(stream)
        if route is None:
            return []
        return [(shard_of(values[key], self.shards), key_lane(key)) for key in route.keys]
