"""Atoms and the ordered structure every range lookup of the indices uses.

An *atom* is ``(attribute, operator, constant)``: ``Price > 10`` is
``("Price", ">", 10)``.  Operators are ``= != < <= > >=``.  A
:class:`RangeList` keeps items sorted by a key and answers, with one bisect,
which items' keys ``k`` satisfy ``k op value`` — the static index asks it with
the operator flipped (``Price > c`` holds for the constants ``c < Price``), the
instance index as it stands (``bound < Price``).

NaN is unordered: no key satisfies ``k op NaN``, and an item whose key is NaN
must not be stored (:func:`is_nan` tells the callers).

>>> ranges = RangeList(key=lambda item: item[0])
>>> for item in [(1, "a"), (5, "b"), (3, "c")]:
...     ranges.add(item)
>>> [name for _, name in ranges.satisfying("<=", 3)]
['a', 'c']
>>> [name for _, name in ranges.satisfying(">", 3)]
['b']
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from typing import Any, Final, Generic, TypeVar

from sortedcontainers import SortedKeyList

Value = int | float | str | bool
"""An attribute value."""

Atom = tuple[str, str, Value]
"""``(attribute, operator, constant)``: the attribute's value ``operator`` the constant."""


def compare(op: str, a: Any, b: Any) -> bool:
    """``a op b`` for an operator of CEL's comparisons (``=`` is ``==``): a C call, compiled,
    where a table of :mod:`operator` functions would be a look-up and a generic call.

    >>> compare("<=", 2, 2.0), compare("!=", "a", "a")
    (True, False)
    """
    if op == ">":
        return bool(a > b)
    if op == "<":
        return bool(a < b)
    if op == "=":
        return bool(a == b)
    if op == ">=":
        return bool(a >= b)
    if op == "<=":
        return bool(a <= b)
    assert op == "!=", f"not an operator: {op}"
    return bool(a != b)


RANGE_OPS: Final = ("<", "<=", ">", ">=")
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
"""``a op b`` ⇔ ``b FLIPPED[op] a``."""

T = TypeVar("T")


def is_nan(value: Value) -> bool:
    """True for a float NaN, which no ordering or equality holds for."""
    return isinstance(value, float) and math.isnan(value)


SMALL: Final = 2_048
"""Up to this many items a :class:`RangeList` keeps two plain lists (keys and items, bisect and
``list.insert``: a memmove, cheaper than a sorted container's bookkeeping at this size);
beyond it a ``SortedKeyList`` (O(log n) inserts however many)."""
SHRINK: Final = 512
"""A ``SortedKeyList`` that falls below this many items goes back to plain lists."""


class RangeList(Generic[T]):
    """Items sorted by ``key(item)``; add / remove / satisfying.

    Cost: add and remove O(log n) beyond :data:`SMALL` items (a memmove of at most
    :data:`SMALL` pointers below); :meth:`satisfying` O(log n + answers).
    """

    def __init__(self, key: Callable[[T], Value]) -> None:
        self._key = key
        self._keys: list[Value] = []
        self._items: list[T] = []
        self._sorted: SortedKeyList | None = None

    def __len__(self) -> int:
        return len(self._items) if self._sorted is None else len(self._sorted)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items) if self._sorted is None else iter(self._sorted)

    def add(self, item: T) -> None:
        """Insert ``item`` after those of an equal key (its key must not be NaN).  O(log n)."""
        if self._sorted is not None:
            self._sorted.add(item)
            return
        key = self._key(item)
        at = bisect_right(self._keys, key)
        self._keys.insert(at, key)
        self._items.insert(at, item)
        if len(self._items) > SMALL:
            self._sorted = SortedKeyList(self._items, key=self._key)
            self._keys, self._items = [], []

    def remove(self, item: T) -> None:
        """Remove ``item``; raises ValueError if it is not here.  O(log n)."""
        if self._sorted is not None:
            self._sorted.remove(item)
            if len(self._sorted) < SHRINK:
                self._items = list(self._sorted)
                self._keys = [self._key(entry) for entry in self._items]
                self._sorted = None
            return
        keys, items = self._keys, self._items
        key = self._key(item)
        for at in range(bisect_left(keys, key), bisect_right(keys, key)):
            if items[at] == item:
                del keys[at], items[at]
                return
        raise ValueError(f"{item!r} is not in the list")

    def satisfying(self, op: str, value: Value) -> Iterator[T]:
        """The items whose key ``k`` satisfies ``k op value``, in key order (op in RANGE_OPS).

        O(log n + answers).
        """
        if is_nan(value):
            return iter(())
        assert op in RANGE_OPS, f"not a range operator: {op}"
        if self._sorted is not None:
            items = self._sorted
            found: Iterator[T]
            if op == "<":
                found = items.islice(0, items.bisect_key_left(value))
            elif op == "<=":
                found = items.islice(0, items.bisect_key_right(value))
            elif op == ">":
                found = items.islice(items.bisect_key_right(value))
            else:
                found = items.islice(items.bisect_key_left(value))
            return found
        keys = self._keys
        if op == "<":
            return iter(self._items[: bisect_left(keys, value)])
        if op == "<=":
            return iter(self._items[: bisect_right(keys, value)])
        if op == ">":
            return iter(self._items[bisect_right(keys, value) :])
        return iter(self._items[bisect_left(keys, value) :])

    def check_valid(self) -> None:
        """Assert that the items are sorted by key, no key is NaN, and the form fits the size."""
        if self._sorted is not None:
            self._sorted._check()
            assert len(self._sorted) >= SHRINK and not self._keys and not self._items
            keys = [self._key(item) for item in self._sorted]
        else:
            assert len(self._items) <= SMALL
            keys = [self._key(item) for item in self._items]
            assert keys == self._keys, "a key is not its item's"
            in_order = (bisect_right(keys, k, 0, at) == at for at, k in enumerate(keys))
            assert all(in_order), "out of order"
        assert not any(is_nan(k) for k in keys)
