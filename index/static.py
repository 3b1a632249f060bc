"""Static conjuncts → keys: which conjuncts ``a op c ∧ …`` does an event satisfy (Section 4.3).

The FR and AN indices are both "which of these static conjuncts does this
event satisfy?"; this module answers it without scanning.  A conjunct is a
tuple of :data:`~cesar.index.ranges.Atom`; each distinct conjunct is one entry
(identical conjuncts of many subscriptions share it, with a tuple of payloads),
clustered by its *access atoms* (Fabret et al., "Le Subscribe"):

* its equalities ``a = c, b = d, …`` if it has any: a hash bucket keyed by
  the values ``(c, d, …)`` under the attribute tuple ``(a, b, …)`` — one
  dictionary lookup per distinct attribute tuple, and the candidates already
  satisfy every equality (two equalities on a domain of 100 values cut the
  candidates 100-fold against clustering by one);
* otherwise a range atom ``a < c``, ``a <= c``, ``a > c`` or ``a >= c``: the
  entries of each ``(a, op)`` sit in a :class:`~cesar.index.ranges.RangeList`
  by ``c``, and one bisect gives exactly the entries whose access atom the event
  satisfies.  A two-sided range ``lo < a < hi`` is clustered by its lower bound
  and its upper bound checked as a residual atom (sorted bounds + bisect
  measured faster than an interval tree on this machine, docs/design.md);
* a conjunct with neither (only ``!=`` atoms, or TRUE) is checked for every event.

A candidate's remaining atoms are then checked.  Cost of a probe:
O(attribute tuples + range lists × log n + candidates).

>>> index = StaticIndex()
>>> index.add((("x", "=", 1), ("y", ">", 5)), "e1")
>>> index.add((("y", ">", 3),), "e2")
>>> sorted(p for entry in index.probe({"x": 1, "y": 4}) for p in entry.payloads)
['e2']

:class:`ConjunctIndex` keeps, per stream, one :class:`StaticIndex` of the
conjuncts of many keys (edges for FR, active nodes for AN) and answers a probe
with each key and the positions of its conjuncts the event satisfies:

>>> fr = ConjunctIndex[int]()
>>> fr.add(7, "Stock", ((("Name", "=", "IBM"),), (("Price", ">", 100.0),)))
>>> fr.probe("Stock", {"Name": "IBM", "Price": 120.0})
{7: [0, 1]}
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from cesar.index.ranges import FLIPPED, RANGE_OPS, Atom, RangeList, Value, compare, is_nan

Atoms = tuple[Atom, ...]
"""A static conjunct: the conjunction of its atoms (empty: TRUE)."""

Payload = Hashable
K = TypeVar("K", bound=Hashable)


@dataclass(eq=False, slots=True)
class Entry:
    """One distinct conjunct: its access atoms, its residual atoms and its payloads.

    ``access`` is either every equality atom of the conjunct (sorted by
    attribute) or one range atom.  ``payloads`` is a tuple (most conjuncts
    have one payload; an empty set alone costs 216 bytes).
    """

    atoms: Atoms
    access: Atoms
    residual: Atoms
    payloads: tuple[Payload, ...] = ()

    def residual_holds(self, attrs: Mapping[str, Value]) -> bool:
        return all(compare(op, attrs[name], const) for name, op, const in self.residual)


def access_atoms(atoms: Atoms) -> Atoms:
    """All usable equality atoms (by attribute), else the first usable range atom, else ()."""
    equal = sorted((a for a in atoms if a[1] == "=" and not is_nan(a[2])), key=lambda a: a[0])
    names = [a[0] for a in equal]
    if equal and len(set(names)) == len(names):
        return tuple(equal)
    if equal:  # two equalities on one attribute: cluster by the first, check the other
        return (equal[0],)
    for atom in atoms:
        if atom[1] in RANGE_OPS and not is_nan(atom[2]):
            return (atom,)
    return ()


def _bound(entry: Entry) -> Value:
    return entry.access[0][2]


class StaticIndex:
    """Static conjuncts → payloads, probed with an event's attributes; see the module docstring.

    Methods: :meth:`add`, :meth:`remove`, :meth:`probe`, :meth:`check_valid`.
    """

    def __init__(self) -> None:
        self._entries: dict[Atoms, Entry] = {}
        # attribute tuple → value tuple → its entry, or a dict of its entries when several
        self._equal: dict[tuple[str, ...], dict[tuple[Value, ...], Entry | dict[Atoms, Entry]]] = {}
        self._ranges: dict[tuple[str, str], RangeList[Entry]] = {}
        self._always: dict[Atoms, Entry] = {}

    def __len__(self) -> int:
        """The number of distinct conjuncts."""
        return len(self._entries)

    def payloads(self) -> dict[Atoms, set[Payload]]:
        """Every distinct conjunct and its payloads."""
        return {atoms: set(entry.payloads) for atoms, entry in self._entries.items()}

    def add(self, atoms: Atoms, payload: Payload) -> None:
        """Register ``payload`` under the conjunct ``atoms``.  O(log n)."""
        entry = self._entries.get(atoms)
        if entry is None:
            access = access_atoms(atoms)
            rest = list(atoms)
            for atom in access:
                rest.remove(atom)
            entry = Entry(atoms, access, tuple(rest))
            self._entries[atoms] = entry
            self._place(entry)
        if payload not in entry.payloads:
            entry.payloads += (payload,)

    def _place(self, entry: Entry) -> None:
        access = entry.access
        if not access:
            self._always[entry.atoms] = entry
        elif access[0][1] == "=":
            names = tuple(a[0] for a in access)
            values = tuple(a[2] for a in access)
            table = self._equal.setdefault(names, {})
            known = table.get(values)
            if known is None:
                table[values] = entry
            elif isinstance(known, Entry):
                table[values] = {known.atoms: known, entry.atoms: entry}
            else:
                known[entry.atoms] = entry
        else:
            name, op, _ = access[0]
            self._ranges.setdefault((name, op), RangeList(key=_bound)).add(entry)

    def remove(self, atoms: Atoms, payload: Payload) -> None:
        """Unregister ``payload``; the conjunct goes when its last payload does.  O(log n)."""
        entry = self._entries[atoms]
        kept = tuple(p for p in entry.payloads if p != payload)
        if len(kept) == len(entry.payloads):
            raise KeyError(payload)
        entry.payloads = kept
        if kept:
            return
        del self._entries[atoms]
        access = entry.access
        if not access:
            del self._always[atoms]
        elif access[0][1] == "=":
            names = tuple(a[0] for a in access)
            values = tuple(a[2] for a in access)
            table = self._equal[names]
            bucket = table[values]
            if isinstance(bucket, Entry):
                del table[values]
                if not table:
                    del self._equal[names]
            else:
                del bucket[atoms]
                if len(bucket) == 1:
                    (table[values],) = bucket.values()
        else:
            name, op, _ = access[0]
            ordered = self._ranges[(name, op)]
            ordered.remove(entry)
            if not ordered:
                del self._ranges[(name, op)]

    def _candidates(self, attrs: Mapping[str, Value]) -> Iterator[Entry]:
        for names, buckets in self._equal.items():
            bucket = buckets.get(tuple([attrs[name] for name in names]))
            if bucket is None:
                continue
            if type(bucket) is Entry:
                yield bucket
            else:
                yield from cast(dict[Atoms, Entry], bucket).values()
        for (name, op), ordered in self._ranges.items():
            # value op const  ⇔  const FLIPPED[op] value
            yield from ordered.satisfying(FLIPPED[op], attrs[name])
        yield from self._always.values()

    def probe(self, attrs: Mapping[str, Value]) -> Iterator[Entry]:
        """The entries whose conjunct ``attrs`` satisfies (each once).  See the module cost."""
        for entry in self._candidates(attrs):
            if entry.residual_holds(attrs):
                yield entry

    def check_valid(self) -> None:
        """Assert every invariant: each entry sits exactly where its access atoms say."""
        placed: list[Entry] = list(self._always.values())
        for names, buckets in self._equal.items():
            assert buckets, f"empty attribute table {names}"
            for values, bucket in buckets.items():
                if isinstance(bucket, Entry):
                    bucket = {bucket.atoms: bucket}
                else:
                    assert len(bucket) > 1, f"a dict bucket of one entry {names} = {values!r}"
                for atoms, entry in bucket.items():
                    expected = tuple((n, "=", v) for n, v in zip(names, values, strict=True))
                    assert entry.access == expected and entry.atoms == atoms
                placed.extend(bucket.values())
        for (name, op), ordered in self._ranges.items():
            assert ordered, f"empty range list {name} {op}"
            ordered.check_valid()
            for entry in ordered:
                assert entry.access[0][:2] == (name, op)
            placed.extend(ordered)
        assert len(placed) == len(self._entries) == len({id(e) for e in placed})
        for entry in placed:
            assert self._entries[entry.atoms] is entry and entry.payloads
            assert len(set(entry.payloads)) == len(entry.payloads)
            assert entry.access == access_atoms(entry.atoms)
            assert len(entry.residual) == len(entry.atoms) - len(entry.access)


Boxed = tuple[object, ...]
"""An atom as the object it is: compiled code copies a ``tuple[str, str, Value]`` into a
struct and boxes a new tuple at each use, so the pool keeps and compares its atoms as
objects."""


@dataclass(slots=True)
class _Pooled:
    """An atom of an :class:`AtomPool` and how many conjuncts hold it."""

    atom: Boxed
    holders: int = 0


class AtomPool:
    """One shared tuple per distinct atom of the conjuncts held, with a count; hold / release.

    The conjuncts of many keys repeat the same atoms (a template's groups share
    attributes and operators, and most constants recur): pooled, a distinct
    atom is one tuple however many conjuncts hold it, and it goes with the
    last.  Cost: O(atoms) per call.

    >>> pool = AtomPool()
    >>> first = pool.hold((("x", "=", 1), ("y", ">", 5.0)))
    >>> second = pool.hold((("x", "=", 1),))
    >>> first[0] is second[0], len(pool)
    (True, 2)
    >>> pool.release(first); len(pool)
    1
    """

    def __init__(self) -> None:
        self._atoms: dict[Boxed, _Pooled] = {}

    def __len__(self) -> int:
        """The number of distinct atoms held."""
        return len(self._atoms)

    def hold(self, atoms: Atoms) -> Atoms:
        """``atoms`` made of pooled atoms, each held once more."""
        out: list[Boxed] = []
        items: Boxed = atoms
        for atom in items:
            key = cast(Boxed, atom)
            pooled = self._atoms.get(key)
            if pooled is None:
                pooled = self._atoms[key] = _Pooled(key)
            pooled.holders += 1
            out.append(pooled.atom)
        return cast(Atoms, tuple(out))

    def release(self, atoms: Atoms) -> None:
        """Let go of pooled ``atoms`` (as :meth:`hold` returned them)."""
        items: Boxed = atoms
        for atom in items:
            key = cast(Boxed, atom)
            pooled = self._atoms[key]
            pooled.holders -= 1
            if not pooled.holders:
                del self._atoms[key]

    def check_valid(self, held: Iterable[Atoms]) -> None:
        """Assert that the pool holds exactly the atoms of ``held``, the same objects."""
        counts: dict[int, int] = {}
        for atoms in held:
            items: Boxed = atoms
            for atom in items:
                key = cast(Boxed, atom)
                assert self._atoms[key].atom is key, f"{key!r} is not the pooled atom"
                counts[id(key)] = counts.get(id(key), 0) + 1
        assert len(counts) == len(self._atoms)
        for pooled in self._atoms.values():
            assert counts[id(pooled.atom)] == pooled.holders, f"{pooled} miscounted"


class ConjunctIndex(Generic[K]):
    """Keys → their conjuncts, per stream; a probe gives each key the positions it satisfies.

    A key registers a tuple of conjuncts (a predicate's DNF; empty: FALSE,
    never satisfied) read from one stream.  The engine keeps two: FR (edge ids)
    and AN (active node ids).  Methods: :meth:`add`, :meth:`remove`,
    :meth:`probe`, :meth:`check_valid`; cost as :class:`StaticIndex`, per conjunct.
    """

    def __init__(self) -> None:
        self._streams: dict[str, StaticIndex] = {}
        self._registered: dict[K, tuple[str, tuple[Atoms, ...]]] = {}

    def __contains__(self, key: K) -> bool:
        return key in self._registered

    def __len__(self) -> int:
        """The number of keys registered."""
        return len(self._registered)

    def conjuncts(self) -> int:
        """The number of distinct conjuncts over all streams."""
        return sum(len(index) for index in self._streams.values())

    def add(self, key: K, stream: str, conjuncts: tuple[Atoms, ...]) -> None:
        """Register ``key``'s ``conjuncts``, read from ``stream``.  O(conjuncts × log n)."""
        assert key not in self._registered, f"{key!r} registered twice"
        self._registered[key] = (stream, conjuncts)
        if not conjuncts:
            return
        index = self._streams.setdefault(stream, StaticIndex())
        for position, atoms in enumerate(conjuncts):
            index.add(atoms, (key, position))

    def remove(self, key: K) -> None:
        """Unregister ``key``; raises KeyError if it is not registered."""
        stream, conjuncts = self._registered.pop(key)
        if not conjuncts:
            return
        index = self._streams[stream]
        for position, atoms in enumerate(conjuncts):
            index.remove(atoms, (key, position))
        if not len(index):
            del self._streams[stream]

    def reads(self, stream: str) -> bool:
        """True if some key registered a conjunct read from ``stream``."""
        return stream in self._streams

    def probe(self, stream: str, attrs: Mapping[str, Value]) -> dict[K, list[int]]:
        """Key → positions of its conjuncts that ``attrs``, an event of ``stream``, satisfies."""
        index = self._streams.get(stream)
        hits: dict[K, list[int]] = {}
        if index is None:
            return hits
        for entry in index.probe(attrs):
            for payload in entry.payloads:
                key, position = cast(tuple[K, int], payload)
                hits.setdefault(key, []).append(position)
        return hits

    def check_valid(self) -> None:
        """Assert that the per-stream indices hold exactly the registered conjuncts."""
        expected: dict[str, dict[Atoms, set[Payload]]] = {}
        for key, (stream, conjuncts) in self._registered.items():
            for position, atoms in enumerate(conjuncts):
                expected.setdefault(stream, {}).setdefault(atoms, set()).add((key, position))
        assert set(expected) == set(self._streams)
        for stream, index in self._streams.items():
            index.check_valid()
            assert index.payloads() == expected[stream], f"stream {stream}: index and keys differ"
