"""Buffers of a lazy plan: events or partial matches in arrival order, per partition key.

A lazy plan (:mod:`cesar.automata.pattern.lazy`) keeps the events each component
may take, and the partial matches waiting for a component, until the window has
passed them.  Under ``[k]`` a pattern never mixes partitions, so a buffer is kept
per key and searched for one key (and the events lacking it) at a time.

The events a component may take depend only on its streams, its own condition
(naming no other component) and the partition: lazy runs whose components agree
on these keep one buffer between them in a :class:`BufferPool`, filled once per
event, kept for the longest window among its readers, and searched by each from
its own horizon on (lazy chain automata §4: a buffer per event type, shared by
the plans that read it).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from cesar.automata.pattern.resolve import Resolved
from cesar.automata.schema import Event, Value

Key = tuple[Value, ...] | None
"""A partition key (the ``[k]`` attributes' values); None for an event lacking one."""


class Timed(Protocol):
    """An item that came at a time: an event, or a partial match (its earliest event's start
    and its latest event's end)."""

    @property
    def t0(self) -> int: ...

    @property
    def t1(self) -> int: ...


T = TypeVar("T", bound=Timed)

_COMPACT = 64
"""A bucket drops the items it has passed once there are this many and they are half of it."""


def _older(horizon: float, event: Event) -> bool:
    return event.t0 <= horizon


def _t1(pair: tuple[Key, Timed]) -> int:
    return pair[1].t1


class _Bucket(Generic[T]):
    """One key's items in arrival order (``t1`` ascending); those before ``head`` are gone."""

    __slots__ = ("head", "items")

    def __init__(self) -> None:
        self.items: list[tuple[Key, T]] = []
        self.head = 0

    def __len__(self) -> int:
        return len(self.items) - self.head

    def front(self) -> T:
        return self.items[self.head][1]

    def pop_front(self) -> None:
        self.head += 1
        if self.head >= _COMPACT and self.head * 2 >= len(self.items):
            del self.items[: self.head]
            self.head = 0

    def since(self, horizon: float) -> Iterator[T]:
        """The items whose ``t1`` is ``horizon`` or later.  O(log n) to find the first."""
        start = self.head
        if horizon > -math.inf:
            start = bisect_left(self.items, horizon, lo=start, key=_t1)
        items = self.items
        for i in range(start, len(items)):
            yield items[i][1]


class Buffer(Generic[T]):
    """Items (events or partial matches) in arrival order, per partition key when keyed.

    ``candidates(key)`` gives those that may share ``key``: its own and the
    keyless.  O(1) to add; pruning pops from the front, O(1) per item dropped.
    """

    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed
        self.buckets: dict[Key, _Bucket[T]] = {}
        self.size = 0

    def add(self, key: Key, item: T) -> None:
        """Append ``item``; adding the item just added to its bucket again does nothing (the
        readers of a shared buffer may each offer the same event)."""
        home = key if self.keyed else None
        bucket = self.buckets.get(home)
        if bucket is None:
            bucket = self.buckets[home] = _Bucket()
        elif len(bucket) and bucket.items[-1][1] is item:
            return
        bucket.items.append((key, item))
        self.size += 1

    def candidates(self, key: Key, horizon: float = -math.inf) -> Iterator[T]:
        """The items that may share ``key`` (all of them when not keyed or ``key`` is None),
        those ending before ``horizon`` left out."""
        if not self.keyed or key is None:
            for bucket in self.buckets.values():
                yield from bucket.since(horizon)
            return
        for k in (key, None):
            found = self.buckets.get(k)
            if found:
                yield from found.since(horizon)

    def prune(self, stale: Callable[[T], bool]) -> None:
        """Drop from the front of each bucket the items ``stale(item)`` says are done."""
        for key in list(self.buckets):
            bucket = self.buckets[key]
            while len(bucket) and stale(bucket.front()):
                bucket.pop_front()
                self.size -= 1
            if not len(bucket):
                del self.buckets[key]

    def shed(self, count: int, horizon: float = math.inf) -> int:
        """Drop up to ``count`` items, the oldest bucket fronts first, none whose ``t0`` is
        after ``horizon``; how many went."""
        dropped = 0
        while dropped < count and self.buckets:
            key = min(self.buckets, key=lambda k: self.buckets[k].front().t1)
            bucket = self.buckets[key]
            if bucket.front().t0 > horizon:
                break
            bucket.pop_front()
            dropped += 1
            if not len(bucket):
                del self.buckets[key]
        self.size -= dropped
        return dropped

    def merge(self, other: Buffer[T]) -> None:
        """Take ``other``'s items too, each bucket kept in arrival order, an item both hold
        (the same object) kept once.  O(n log n) in the items."""
        for home, bucket in other.buckets.items():
            mine = self.buckets.get(home)
            if mine is None:
                self.buckets[home] = mine = _Bucket()
            held = {id(item) for _, item in mine.items[mine.head :]}
            extra = [pair for pair in bucket.items[bucket.head :] if id(pair[1]) not in held]
            mine.items = sorted([*mine.items[mine.head :], *extra], key=_t1)
            mine.head = 0
            self.size += len(extra)

    def check_valid(self) -> None:
        """Assert the size, that every item sits in its key's bucket, in arrival order."""
        assert self.size == sum(len(b) for b in self.buckets.values())
        for home, bucket in self.buckets.items():
            assert len(bucket), "an empty bucket is dropped"
            live = bucket.items[bucket.head :]
            assert all((key if self.keyed else None) == home for key, _ in live)
            assert all(a[1].t1 <= b[1].t1 for a, b in itertools.pairwise(live))

    def __iter__(self) -> Iterator[T]:
        for bucket in self.buckets.values():
            yield from bucket.since(-math.inf)

    def __len__(self) -> int:
        return self.size


class Waiter(Protocol):
    """A lazy run as the pool's waiting lists see it: whose it is, and the components of a
    signature it has partial matches waiting at for a key."""

    owner: str

    def waits(self, signature: Hashable, key: Key) -> list[int]: ...


@dataclass
class _Shared:
    """A pooled buffer, its partition attributes (None: not keyed) and the windows of its
    readers (one count per reader)."""

    buffer: Buffer[Event]
    partition: tuple[str, ...] | None
    windows: Counter[int] = field(default_factory=Counter)


class BufferPool:
    """The event buffers of lazy runs, one per signature (streams, own condition, partition)
    whatever the number of runs reading it.

    A run takes a buffer for each of its components (:meth:`take`) and releases it when it
    ends (:meth:`release`); the buffer goes with its last reader.  :meth:`prune` drops what
    the longest window among its readers has passed, every quarter of that window.

    Beside the buffers, per signature and partition key, the runs with partial matches
    waiting for such an event (:meth:`wait`, :meth:`waiting`): an event that fits a
    signature concerns those, not every reader.  A run leaves a list when an event finds
    nothing of it waiting there any more.
    """

    def __init__(self) -> None:
        self.shared: dict[Hashable, _Shared] = {}
        self.waiters: dict[Hashable, dict[Key, dict[int, Waiter]]] = {}
        self._due: list[tuple[float, int, Hashable]] = []
        self._order = itertools.count()

    def take(
        self, signature: Hashable, partition: tuple[str, ...] | None, window: int
    ) -> Buffer[Event]:
        """The buffer of ``signature`` (keyed by ``partition`` unless None) for one more
        reader of window ``window``."""
        entry = self.shared.get(signature)
        if entry is None:
            buffer: Buffer[Event] = Buffer(partition is not None)
            entry = self.shared[signature] = _Shared(buffer, partition)
            heapq.heappush(self._due, (-math.inf, next(self._order), signature))
        entry.windows[window] += 1
        return entry.buffer

    def release(self, signature: Hashable, window: int) -> None:
        """One reader of ``signature`` of window ``window`` is gone."""
        entry = self.shared[signature]
        entry.windows[window] -= 1
        if not entry.windows[window]:
            del entry.windows[window]
        if not entry.windows:
            del self.shared[signature]

    def keep(self, event: Event, signatures: Iterable[Hashable]) -> None:
        """Buffer ``event`` in the buffers of ``signatures`` (those it fits), once each."""
        for signature in signatures:
            entry = self.shared.get(signature)
            if entry is not None:
                entry.buffer.add(partition_key(entry.partition, event), event)

    def wait(self, signature: Hashable, key: Key, run: Waiter) -> None:
        """``run`` has partial matches waiting for an event of ``signature`` and ``key``."""
        self.waiters.setdefault(signature, {}).setdefault(key, {})[id(run)] = run

    def waiting(self, signature: Hashable, event: Event) -> dict[str, list[int]]:
        """Per subscription, the components of ``signature`` its runs have partial matches
        waiting at for ``event``'s key; a run with none left leaves the list.  O(runs
        listed)."""
        by_key = self.waiters.get(signature)
        if not by_key:
            return {}
        entry = self.shared.get(signature)
        key = partition_key(entry.partition, event) if entry is not None else None
        runs = by_key.get(key)
        if not runs:
            return {}
        out: dict[str, list[int]] = {}
        for number, run in list(runs.items()):
            places = run.waits(signature, key)
            if places:
                out.setdefault(run.owner, []).extend(places)
            else:
                del runs[number]
        if not runs:
            del by_key[key]
            if not by_key:
                del self.waiters[signature]
        return out

    def others(self, signature: Hashable, window: int) -> float:
        """The longest window among the readers of ``signature`` but one of ``window``
        (-inf: none): what the others still need of its buffer."""
        windows = self.shared[signature].windows
        if windows[window] > 1:
            return window
        return max((w for w in windows if w != window), default=-math.inf)

    def readers(self, signature: Hashable) -> int:
        """How many readers hold ``signature``'s buffer."""
        entry = self.shared.get(signature)
        return 0 if entry is None else entry.windows.total()

    def prune(self, now: float) -> None:
        """Drop from the buffers due a pruning what the longest window of their readers has
        passed at ``now``.  O(log buffers) per buffer pruned."""
        if now == -math.inf:  # a run that saw no epoch yet
            return
        due = self._due
        while due and due[0][0] <= now:
            _, _, signature = heapq.heappop(due)
            entry = self.shared.get(signature)
            if entry is None:
                continue
            window = max(entry.windows)
            horizon = now - window
            entry.buffer.prune(functools.partial(_older, horizon))
            heapq.heappush(due, (now + window // 4 + 1, next(self._order), signature))

    @property
    def size(self) -> int:
        """Events held, each buffer counted once."""
        return sum(len(entry.buffer) for entry in self.shared.values())

    def check_valid(self) -> None:
        """Assert every buffer's invariants, each with a reader and on the pruning heap."""
        pending = {signature for _, _, signature in self._due}
        for signature, entry in self.shared.items():
            entry.buffer.check_valid()
            assert entry.windows and all(c > 0 for c in entry.windows.values())
            assert signature in pending


def key_of(pattern: Resolved, event: Event) -> Key:
    """The partition key of an event of a ``keyed`` pattern (None: not keyed)."""
    return partition_key(pattern.partition if pattern.keyed else None, event)


def partition_key(partition: tuple[str, ...] | None, event: Event) -> Key:
    """``event``'s values of the ``partition`` attributes (None: not keyed)."""
    if partition is None:
        return None
    if len(partition) == 1:
        attr = partition[0]
        value = event.value(attr)
        assert value is not None  # keyed: every stream of the pattern has it
        return (value,)
    attrs = event.attrs()
    return tuple(attrs[a] for a in partition)
