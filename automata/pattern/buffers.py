"""Buffers of a lazy plan: events or partial matches in arrival order, per partition key.

A lazy plan (:mod:`cesar.automata.pattern.lazy`) keeps the events each component
may take, and the partial matches waiting for a component, until the window has
passed them.  Under ``[k]`` a pattern never mixes partitions, so a buffer is kept
per key and searched for one key (and the events lacking it) at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event, Value

Key = tuple[Value, ...] | None
"""A partition key (the ``[k]`` attributes' values); None for an event lacking one."""


class Timed(Protocol):
    """An item that came at a time: an event, or a partial match (its latest event's end)."""

    @property
    def t1(self) -> int: ...


T = TypeVar("T", bound=Timed)


class Buffer(Generic[T]):
    """Items (events or partial matches) in arrival order, per partition key when keyed.

    ``candidates(key)`` gives those that may share ``key``: its own and the
    keyless.  O(1) to add; pruning pops from the front, O(1) per item dropped.
    """

    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed
        self.buckets: dict[Key, deque[tuple[Key, T]]] = {}
        self.size = 0

    def add(self, key: Key, item: T) -> None:
        home = key if self.keyed else None
        bucket = self.buckets.get(home)
        if bucket is None:
            bucket = self.buckets[home] = deque()
        bucket.append((key, item))
        self.size += 1

    def candidates(self, key: Key) -> Iterator[T]:
        if not self.keyed or key is None:
            for bucket in self.buckets.values():
                yield from (item for _, item in bucket)
            return
        for k in (key, None):
            found = self.buckets.get(k)
            if found:
                yield from (item for _, item in found)

    def prune(self, stale: Callable[[T], bool]) -> None:
        """Drop from the front of each bucket the items ``stale(item)`` says are done."""
        for key in list(self.buckets):
            bucket = self.buckets[key]
            while bucket and stale(bucket[0][1]):
                bucket.popleft()
                self.size -= 1
            if not bucket:
                del self.buckets[key]

    def shed(self, count: int) -> int:
        """Drop up to ``count`` items, the oldest bucket fronts first; how many went."""
        dropped = 0
        while dropped < count and self.buckets:
            key = min(self.buckets, key=lambda k: self.buckets[k][0][1].t1)
            bucket = self.buckets[key]
            bucket.popleft()
            dropped += 1
            if not bucket:
                del self.buckets[key]
        self.size -= dropped
        return dropped

    def check_valid(self) -> None:
        """Assert the size and that every item sits in its key's bucket."""
        assert self.size == sum(len(b) for b in self.buckets.values())
        for home, bucket in self.buckets.items():
            assert bucket, "an empty bucket is dropped"
            assert all((key if self.keyed else None) == home for key, _ in bucket)

    def __iter__(self) -> Iterator[T]:
        for bucket in self.buckets.values():
            yield from (item for _, item in bucket)

    def __len__(self) -> int:
        return self.size


def key_of(pattern: Resolved, event: Event) -> Key:
    """The partition key of an event of a ``keyed`` pattern (None: not keyed)."""
    if not pattern.keyed:
        return None
    partition = pattern.partition
    if len(partition) == 1:
        attr = partition[0]
        value = event.value(attr)
        assert value is not None  # keyed: every stream of the pattern has it
        return (value,)
    attrs = event.attrs()
    return tuple(attrs[a] for a in partition)
