"""The Active Instance (AI) index (Section 4.3): one node's instances by its filter's dynamic part.

While an instance is live its binding is fixed, so a parameterized atom of
the node's filter such as ``$1.Name = Name`` is, for that instance, a static
atom ``Name = 'IBM'``.  For each conjunct of the filter's DNF the index picks
one *access atom* from the dynamic part, comparing an instance attribute with
an event attribute:

* ``=``: a dict from the bound value to the instances — a probe is one lookup;
* ``<, <=, >, >=``: the instances sorted by the bound value — one bisect gives
  exactly those the event satisfies;
* no such atom: every instance of the node is a candidate.

Candidates are then verified against the whole conjunct by the engine.

>>> from cesar.automata.normal import Conjunct
>>> from cesar.automata.terms import Attr, Cmp, Scope
>>> same = Conjunct((Cmp("=", Attr(Scope.LEFT, "k"), Attr(Scope.EVENT, "Name")),))
>>> index = InstanceIndex.for_conjuncts((same,))
>>> for n, name in enumerate(["IBM", "MSFT", "IBM"]):
...     index.add(_Demo(n, {"k": name}))
>>> sorted(i.id for i in index.probe(0, {"Name": "IBM"}))
[0, 2]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from sortedcontainers import SortedKeyList

from cesar.automata.normal import Conjunct
from cesar.automata.schema import Value
from cesar.automata.terms import FLIPPED, Attr, Scope


class Keyed(Protocol):
    """What the index needs of an instance: a unique id and a binding."""

    @property
    def id(self) -> int: ...

    @property
    def binding(self) -> Mapping[str, Value]: ...


K = TypeVar("K", bound=Keyed)


@dataclass(frozen=True)
class _Demo:
    id: int
    binding: Mapping[str, Value]


@dataclass(frozen=True, slots=True)
class Access:
    """``instance.bound op event.attr`` for one conjunct (``op`` reads instance-first)."""

    op: str
    bound: str
    attr: str


def access_atom(dynamic: Conjunct) -> Access | None:
    """The conjunct's best atom comparing an instance attribute with an event attribute.

    An equality if there is one, else an ordering (``!=`` selects too little to help).
    """
    found = []
    for atom in dynamic.atoms:
        left, right = atom.left, atom.right
        if not (isinstance(left, Attr) and isinstance(right, Attr)) or atom.op == "!=":
            continue
        if left.scope is Scope.LEFT and right.scope is Scope.EVENT:
            found.append(Access(atom.op, left.name, right.name))
        elif left.scope is Scope.EVENT and right.scope is Scope.LEFT:
            found.append(Access(FLIPPED[atom.op], right.name, left.name))
    equal = [a for a in found if a.op == "="]
    best = equal or found
    return best[0] if best else None


def _nan(value: Value) -> bool:
    return isinstance(value, float) and math.isnan(value)


class _Cluster(Generic[K]):
    """The instances of one node organised by one conjunct's access atom."""

    def __init__(self, access: Access | None) -> None:
        self.access = access
        self.equal: dict[Value, dict[int, K]] = {}
        bound = access.bound if access else ""
        self.ordered: SortedKeyList = SortedKeyList(key=lambda i: i.binding[bound])
        self.loose: dict[int, K] = {}  # no access atom, or an unorderable (NaN) bound

    def _kind(self, instance: K) -> str:
        if self.access is None or _nan(instance.binding[self.access.bound]):
            return "loose"
        return "equal" if self.access.op == "=" else "ordered"

    def add(self, instance: K) -> None:
        kind = self._kind(instance)
        if kind == "loose":
            self.loose[instance.id] = instance
        elif kind == "equal":
            assert self.access is not None
            key = instance.binding[self.access.bound]
            self.equal.setdefault(key, {})[instance.id] = instance
        else:
            self.ordered.add(instance)

    def remove(self, instance: K) -> None:
        kind = self._kind(instance)
        if kind == "loose":
            del self.loose[instance.id]
        elif kind == "equal":
            assert self.access is not None
            key = instance.binding[self.access.bound]
            bucket = self.equal[key]
            del bucket[instance.id]
            if not bucket:
                del self.equal[key]
        else:
            self.ordered.remove(instance)

    def probe(self, attrs: Mapping[str, Value]) -> Iterable[K]:
        yield from self.loose.values()
        if self.access is None:
            return
        value = attrs[self.access.attr]
        op = self.access.op
        if op == "=":
            bucket = self.equal.get(value)
            if bucket:
                yield from bucket.values()
            return
        ordered = self.ordered
        if _nan(value):
            return
        if op == "<":  # bound < value
            yield from ordered.islice(0, ordered.bisect_key_left(value))
        elif op == "<=":
            yield from ordered.islice(0, ordered.bisect_key_right(value))
        elif op == ">":
            yield from ordered.islice(ordered.bisect_key_right(value))
        else:  # ">="
            yield from ordered.islice(ordered.bisect_key_left(value))

    def members(self) -> list[K]:
        out = list(self.loose.values()) + list(self.ordered)
        for bucket in self.equal.values():
            out.extend(bucket.values())
        return out


class InstanceIndex(Generic[K]):
    """The live instances of one node, clustered per filter conjunct; add / remove / probe.

    Cost: add and remove O(conjuncts × log n); a probe O(log n + candidates).
    """

    def __init__(self, accesses: tuple[Access | None, ...]) -> None:
        self._clusters: tuple[_Cluster[K], ...] = tuple(_Cluster(a) for a in accesses)
        self._instances: dict[int, K] = {}

    @classmethod
    def for_conjuncts(cls, dynamics: tuple[Conjunct, ...]) -> InstanceIndex[K]:
        """An index clustering by each conjunct's :func:`access_atom`."""
        return cls(tuple(access_atom(d) for d in dynamics))

    def __len__(self) -> int:
        return len(self._instances)

    def instances(self) -> list[K]:
        """Every live instance, in insertion order (oldest first)."""
        return list(self._instances.values())

    def add(self, instance: K) -> None:
        """Index a new live instance."""
        assert instance.id not in self._instances
        self._instances[instance.id] = instance
        for cluster in self._clusters:
            cluster.add(instance)

    def remove(self, instance: K) -> None:
        """Forget an instance."""
        del self._instances[instance.id]
        for cluster in self._clusters:
            cluster.remove(instance)

    def probe(self, conjunct: int, attrs: Mapping[str, Value]) -> Iterable[K]:
        """Candidates for conjunct ``conjunct``: a superset of the instances it holds for."""
        return self._clusters[conjunct].probe(attrs)

    def check_valid(self) -> None:
        """Assert that every cluster holds exactly the live instances, each where it belongs."""
        ids = set(self._instances)
        for cluster in self._clusters:
            members = cluster.members()
            assert len(members) == len(ids) and {i.id for i in members} == ids
            cluster.ordered._check()
            for key, bucket in cluster.equal.items():
                assert bucket, "empty bucket"
                assert cluster.access is not None
                assert all(i.binding[cluster.access.bound] == key for i in bucket.values())
