"""An index of static conjuncts (``attr relop const`` atoms) over one stream (Section 4.3).

The FR and AN indices are both "which of these static conjuncts does this
event satisfy?"; this module answers it without scanning.  Each distinct
conjunct is one entry (identical conjuncts of many subscriptions share it,
with a set of payloads), clustered by one *access atom* (Fabret et al., "Le
Subscribe"):

* its equalities ``a = c, b = d, …`` if it has any: a hash bucket keyed by
  the values ``(c, d, …)`` under the attribute tuple ``(a, b, …)`` — one
  dictionary lookup per distinct attribute tuple, and the candidates already
  satisfy every equality (two equalities on a domain of 100 values cut the
  candidates 100-fold against clustering by one);
* otherwise a range atom ``a < c``, ``a <= c``, ``a > c`` or ``a >= c``: the
  entries of each ``(a, op)`` are sorted by ``c``, and one bisect gives exactly
  the entries whose access atom the event satisfies.  A two-sided range
  ``lo < a < hi`` is clustered by its lower bound and its upper bound checked
  as a residual atom (sorted bounds + bisect measured faster than an interval
  tree on this machine, PLATFORM.md);
* a conjunct with neither (only ``!=`` atoms, or TRUE) is checked for every event.

A candidate's remaining atoms are then checked.  Cost of a probe:
O(attribute tuples + range lists × log n + candidates).

>>> from cesar.automata.normal import Conjunct
>>> from cesar.automata.terms import Attr, Cmp, Const, Scope
>>> from cesar.automata.schema import AttrType as T
>>> def atom(a, op, c): return Cmp(op, Attr(Scope.EVENT, a), Const(c, T.INT))
>>> index = StaticIndex()
>>> index.add(Conjunct((atom("x", "=", 1), atom("y", ">", 5))), "e1")
>>> index.add(Conjunct((atom("y", ">", 3),)), "e2")
>>> sorted(p for entry in index.probe({"x": 1, "y": 4}) for p in entry.payloads)
['e2']
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field

from sortedcontainers import SortedKeyList

from cesar.automata.normal import Conjunct, is_static
from cesar.automata.schema import Value
from cesar.automata.terms import Attr, Const, Scope

Payload = Hashable
_OPS: dict[str, Callable[[Value, Value], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_RANGE_OPS = ("<", "<=", ">", ">=")


@dataclass(eq=False)
class Entry:
    """One distinct conjunct: its access atoms, its residual atoms and its payloads.

    ``access`` is either every equality atom of the conjunct (attribute names
    and values, sorted by name) or one range atom ``(name, op, const)``.
    """

    conjunct: Conjunct
    access: Access | None
    residual: tuple[tuple[str, Callable[[Value, Value], bool], Value], ...]
    payloads: set[Payload] = field(default_factory=set)

    def residual_holds(self, attrs: Mapping[str, Value]) -> bool:
        return all(test(attrs[name], const) for name, test, const in self.residual)


def _atoms(conjunct: Conjunct) -> list[tuple[str, str, Value]]:
    out = []
    for atom in conjunct.atoms:
        assert is_static(atom, Scope.EVENT), f"not a static atom: {atom}"
        assert isinstance(atom.left, Attr) and isinstance(atom.right, Const)
        out.append((atom.left.name, atom.op, atom.right.value))
    return out


def _usable(value: Value) -> bool:
    return not (isinstance(value, float) and math.isnan(value))


Atom = tuple[str, str, Value]
Access = tuple[Atom, ...]


def _access(atoms: list[Atom]) -> Access | None:
    """All usable equality atoms (by attribute), else the first usable range atom, else None."""
    equal = sorted((a for a in atoms if a[1] == "=" and _usable(a[2])), key=lambda a: a[0])
    names = [a[0] for a in equal]
    if equal and len(set(names)) == len(names):
        return tuple(equal)
    if equal:  # two equalities on one attribute: cluster by the first, check the other
        return (equal[0],)
    for atom in atoms:
        if atom[1] in _RANGE_OPS and _usable(atom[2]):
            return (atom,)
    return None


def _is_equal(access: Access) -> bool:
    return access[0][1] == "="


def _bound(entry: Entry) -> Value:
    assert entry.access is not None
    return entry.access[0][2]


class StaticIndex:
    """Static conjuncts → payloads, probed with an event's attributes; see the module docstring."""

    def __init__(self) -> None:
        self._entries: dict[Conjunct, Entry] = {}
        self._equal: dict[tuple[str, ...], dict[tuple[Value, ...], dict[Conjunct, Entry]]] = {}
        self._ranges: dict[tuple[str, str], SortedKeyList] = {}
        self._always: dict[Conjunct, Entry] = {}

    def __len__(self) -> int:
        """The number of distinct conjuncts."""
        return len(self._entries)

    def add(self, conjunct: Conjunct, payload: Payload) -> None:
        """Register ``payload`` under ``conjunct``.  O(log n)."""
        entry = self._entries.get(conjunct)
        if entry is None:
            atoms = _atoms(conjunct)
            access = _access(atoms)
            rest = list(atoms)
            for atom in access or ():
                rest.remove(atom)
            residual = tuple((name, _OPS[op], const) for name, op, const in rest)
            entry = Entry(conjunct, access, residual)
            self._entries[conjunct] = entry
            self._place(entry)
        entry.payloads.add(payload)

    def _place(self, entry: Entry) -> None:
        access = entry.access
        if access is None:
            self._always[entry.conjunct] = entry
        elif _is_equal(access):
            names = tuple(a[0] for a in access)
            values = tuple(a[2] for a in access)
            self._equal.setdefault(names, {}).setdefault(values, {})[entry.conjunct] = entry
        else:
            name, op, _ = access[0]
            self._ranges.setdefault((name, op), SortedKeyList(key=_bound)).add(entry)

    def remove(self, conjunct: Conjunct, payload: Payload) -> None:
        """Unregister ``payload``; the conjunct goes when its last payload does.  O(log n)."""
        entry = self._entries[conjunct]
        entry.payloads.remove(payload)
        if entry.payloads:
            return
        del self._entries[conjunct]
        access = entry.access
        if access is None:
            del self._always[conjunct]
        elif _is_equal(access):
            names = tuple(a[0] for a in access)
            values = tuple(a[2] for a in access)
            bucket = self._equal[names][values]
            del bucket[conjunct]
            if not bucket:
                del self._equal[names][values]
                if not self._equal[names]:
                    del self._equal[names]
        else:
            name, op, _ = access[0]
            ordered = self._ranges[(name, op)]
            ordered.remove(entry)
            if not ordered:
                del self._ranges[(name, op)]

    def _candidates(self, attrs: Mapping[str, Value]) -> Iterator[Entry]:
        for names, buckets in self._equal.items():
            bucket = buckets.get(tuple([attrs[name] for name in names]))
            if bucket:
                yield from bucket.values()
        for (name, op), ordered in self._ranges.items():
            value = attrs[name]
            if op == ">":  # const < value
                yield from ordered.islice(0, ordered.bisect_key_left(value))
            elif op == ">=":  # const <= value
                yield from ordered.islice(0, ordered.bisect_key_right(value))
            elif op == "<":  # const > value
                yield from ordered.islice(ordered.bisect_key_right(value))
            else:  # const >= value
                yield from ordered.islice(ordered.bisect_key_left(value))
        yield from self._always.values()

    def probe(self, attrs: Mapping[str, Value]) -> Iterator[Entry]:
        """The entries whose conjunct ``attrs`` satisfies (each once)."""
        for entry in self._candidates(attrs):
            if entry.residual_holds(attrs):
                yield entry

    def check_valid(self) -> None:
        """Assert every invariant: each entry sits exactly where its access atom says."""
        placed: list[Entry] = list(self._always.values())
        for names, buckets in self._equal.items():
            assert buckets, f"empty attribute table {names}"
            for values, bucket in buckets.items():
                assert bucket, f"empty bucket {names} = {values!r}"
                for conjunct, entry in bucket.items():
                    expected = tuple((n, "=", v) for n, v in zip(names, values, strict=True))
                    assert entry.access == expected and entry.conjunct == conjunct
                placed.extend(bucket.values())
        for (name, op), ordered in self._ranges.items():
            assert ordered, f"empty range list {name} {op}"
            ordered._check()
            for entry in ordered:
                assert entry.access is not None and entry.access[0][:2] == (name, op)
            placed.extend(ordered)
        assert len(placed) == len(self._entries) == len({id(e) for e in placed})
        for entry in placed:
            assert self._entries[entry.conjunct] is entry and entry.payloads
            atoms = _atoms(entry.conjunct)
            assert entry.access == _access(atoms)
            assert len(entry.residual) == len(atoms) - len(entry.access or ())


class ConjunctRegistry:
    """Per-stream :class:`StaticIndex` of the static parts of edges' DNF conjuncts.

    Keys are ids (of edges for FR, of nodes for AN); a probe returns, for each
    key, the indices of its conjuncts whose static part the event satisfies.
    """

    def __init__(self) -> None:
        self._streams: dict[str, StaticIndex] = {}
        self._registered: dict[Hashable, tuple[str, tuple[Conjunct, ...]]] = {}

    def __contains__(self, key: Hashable) -> bool:
        return key in self._registered

    def __len__(self) -> int:
        return len(self._registered)

    def conjuncts(self) -> int:
        """The number of distinct static conjuncts over all streams."""
        return sum(len(index) for index in self._streams.values())

    def add(self, key: Hashable, stream: str, statics: tuple[Conjunct, ...]) -> None:
        """Register the static parts of ``key``'s conjuncts, read from ``stream``."""
        assert key not in self._registered, f"{key!r} registered twice"
        self._registered[key] = (stream, statics)
        if not statics:  # a FALSE predicate: nothing ever satisfies it
            return
        index = self._streams.setdefault(stream, StaticIndex())
        for position, conjunct in enumerate(statics):
            index.add(conjunct, (key, position))

    def remove(self, key: Hashable) -> None:
        """Unregister ``key``."""
        stream, statics = self._registered.pop(key)
        if not statics:
            return
        index = self._streams[stream]
        for position, conjunct in enumerate(statics):
            index.remove(conjunct, (key, position))
        if not len(index):
            del self._streams[stream]

    def probe(self, stream: str, attrs: Mapping[str, Value]) -> dict[Hashable, list[int]]:
        """Key → positions of its conjuncts whose static part ``attrs`` satisfies."""
        index = self._streams.get(stream)
        hits: dict[Hashable, list[int]] = {}
        if index is None:
            return hits
        for entry in index.probe(attrs):
            for payload in entry.payloads:
                assert isinstance(payload, tuple)
                key: Hashable = payload[0]
                position: int = payload[1]
                hits.setdefault(key, []).append(position)
        return hits

    def check_valid(self) -> None:
        """Assert that the per-stream indices hold exactly the registered conjuncts."""
        expected: dict[str, dict[Conjunct, set[Payload]]] = {}
        for key, (stream, statics) in self._registered.items():
            for position, conjunct in enumerate(statics):
                expected.setdefault(stream, {}).setdefault(conjunct, set()).add((key, position))
        assert set(expected) == set(self._streams)
        for stream, index in self._streams.items():
            index.check_valid()
            got = {c: e.payloads for c, e in index._entries.items()}
            assert got == expected[stream], f"stream {stream}: index and registry differ"
