"""The Active Instance (AI) index (Section 4.3): one node's instances by their bound values.

While an instance is live its binding is fixed, so a parameterized atom of
the node's filter such as ``$1.Name = Name`` is, for that instance, a static
atom ``Name = 'IBM'``.  For each conjunct of the filter's DNF the engine picks
one :class:`InstanceAccess` — ``bound op attr``, comparing an instance's bound
value with an event attribute — and the index clusters the instances by it:

* ``=``: a dict from the bound value to the instances — a probe is one lookup;
* ``<, <=, >, >=``: a :class:`~cesar.index.ranges.RangeList` by the bound value —
  one bisect gives exactly those the event satisfies;
* no access (None), or a NaN bound value: every such instance is a candidate.

Candidates are then verified against the whole conjunct by the engine.

>>> from collections import namedtuple
>>> Instance = namedtuple("Instance", "id binding")
>>> index = InstanceIndex((InstanceAccess("=", "k", "Name"),))
>>> for n, name in enumerate(["IBM", "MSFT", "IBM"]):
...     index.add(Instance(n, {"k": name}))
>>> sorted(i.id for i in index.probe(0, {"Name": "IBM"}))
[0, 2]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from cesar.index.ranges import RangeList, Value, is_nan


class Keyed(Protocol):
    """What the index needs of an instance: a unique id and a binding (:meth:`rebind` sets it)."""

    @property
    def id(self) -> int: ...

    binding: Mapping[str, Value]


K = TypeVar("K", bound=Keyed)


@dataclass(frozen=True, slots=True)
class InstanceAccess:
    """``instance.binding[bound] op event[attr]``: how one conjunct reaches the instances."""

    op: str
    bound: str
    attr: str


class _Cluster(Generic[K]):
    """The instances of one node organised by one conjunct's access."""

    def __init__(self, access: InstanceAccess | None) -> None:
        self.access = access
        self.equal: dict[Value, dict[int, K]] = {}
        bound = access.bound if access else ""
        self.ordered: RangeList[K] = RangeList(key=lambda i: i.binding[bound])
        self.loose: dict[int, K] = {}  # no access, or an unorderable (NaN) bound

    def _kind(self, binding: Mapping[str, Value]) -> str:
        if self.access is None or is_nan(binding[self.access.bound]):
            return "loose"
        return "equal" if self.access.op == "=" else "ordered"

    def add(self, instance: K, id: int, binding: Mapping[str, Value]) -> None:
        """File ``instance`` (whose ``id`` and ``binding`` the caller read once for every
        cluster: compiled, each read of a protocol's attribute is a generic look-up)."""
        kind = self._kind(binding)
        if kind == "loose":
            self.loose[id] = instance
        elif kind == "equal":
            assert self.access is not None
            key = binding[self.access.bound]
            bucket = self.equal.get(key)
            if bucket is None:
                self.equal[key] = {id: instance}
            else:
                bucket[id] = instance
        else:
            self.ordered.add(instance)

    def remove(self, instance: K, id: int, binding: Mapping[str, Value]) -> None:
        kind = self._kind(binding)
        if kind == "loose":
            del self.loose[id]
        elif kind == "equal":
            assert self.access is not None
            key = binding[self.access.bound]
            bucket = self.equal[key]
            del bucket[id]
            if not bucket:
                del self.equal[key]
        else:
            self.ordered.remove(instance)

    def moves(self, old: Mapping[str, Value], new: Mapping[str, Value]) -> bool:
        """Whether an instance bound to ``old`` belongs elsewhere once bound to ``new``."""
        return self.access is not None and old[self.access.bound] != new[self.access.bound]

    def probe(self, attrs: Mapping[str, Value]) -> Iterable[K]:
        yield from self.loose.values()
        if self.access is None:
            return
        value = attrs[self.access.attr]
        if self.access.op == "=":
            bucket = self.equal.get(value)
            if bucket:
                yield from bucket.values()
            return
        yield from self.ordered.satisfying(self.access.op, value)

    def members(self) -> list[K]:
        out = list(self.loose.values()) + list(self.ordered)
        for bucket in self.equal.values():
            out.extend(bucket.values())
        return out


class InstanceIndex(Generic[K]):
    """The live instances of one node, clustered per filter conjunct; add / remove / rebind / probe.

    Cost: add and remove O(conjuncts × log n); a probe O(log n + candidates).
    """

    def __init__(self, accesses: tuple[InstanceAccess | None, ...]) -> None:
        self.accesses = accesses
        """Per conjunct, the access its cluster is organised by (None: every instance)."""
        self._clusters: tuple[_Cluster[K], ...] = tuple(_Cluster(a) for a in accesses)
        self._instances: dict[int, K] = {}

    def __len__(self) -> int:
        return len(self._instances)

    def instances(self) -> list[K]:
        """Every live instance, in insertion order (oldest first)."""
        return list(self._instances.values())

    def oldest(self) -> Iterator[K]:
        """Every live instance in insertion order (oldest first), without a copy: the index
        must not change while it is read.  O(1) per instance."""
        return iter(self._instances.values())

    def add(self, instance: K) -> None:
        """Index a new live instance.  O(conjuncts × log n)."""
        id, binding = instance.id, instance.binding
        assert id not in self._instances
        self._instances[id] = instance
        for cluster in self._clusters:
            cluster.add(instance, id, binding)

    def remove(self, instance: K) -> None:
        """Forget an instance; raises KeyError if it is not here.  O(conjuncts × log n)."""
        id, binding = instance.id, instance.binding
        del self._instances[id]
        for cluster in self._clusters:
            cluster.remove(instance, id, binding)

    def rebind(self, instance: K, binding: Mapping[str, Value]) -> None:
        """Give a live instance a new binding; it keeps its place in insertion order.

        Only the clusters whose key it changes re-file it.  O(those × log n).

        >>> from types import SimpleNamespace
        >>> index = InstanceIndex((InstanceAccess("<", "low", "Price"), None))
        >>> first = SimpleNamespace(id=1, binding={"low": 5})
        >>> index.add(first)
        >>> index.add(SimpleNamespace(id=2, binding={"low": 9}))
        >>> index.rebind(first, {"low": 20})
        >>> [i.id for i in index.probe(0, {"Price": 10})], [i.id for i in index.instances()]
        ([2], [1, 2])
        """
        old, id = instance.binding, instance.id
        moved = [c for c in self._clusters if c.moves(old, binding)]
        for cluster in moved:
            cluster.remove(instance, id, old)
        instance.binding = binding
        for cluster in moved:
            cluster.add(instance, id, binding)

    def probe(self, conjunct: int, attrs: Mapping[str, Value]) -> Iterable[K]:
        """Candidates for conjunct ``conjunct``: a superset of the instances it holds for."""
        return self._clusters[conjunct].probe(attrs)

    def check_valid(self) -> None:
        """Assert that every cluster holds exactly the live instances, each where it belongs."""
        ids = set(self._instances)
        for cluster in self._clusters:
            members = cluster.members()
            assert len(members) == len(ids) and {i.id for i in members} == ids
            cluster.ordered.check_valid()
            for key, bucket in cluster.equal.items():
                assert bucket, "empty bucket"
                assert cluster.access is not None
                assert all(i.binding[cluster.access.bound] == key for i in bucket.values())
