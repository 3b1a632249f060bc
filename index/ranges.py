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
import operator
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from sortedcontainers import SortedKeyList

Value = int | float | str | bool
"""An attribute value."""

Atom = tuple[str, str, Value]
"""``(attribute, operator, constant)``: the attribute's value ``operator`` the constant."""

OPS: dict[str, Callable[[Value, Value], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
RANGE_OPS = ("<", "<=", ">", ">=")
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
"""``a op b`` ⇔ ``b FLIPPED[op] a``."""

T = TypeVar("T")


def is_nan(value: Value) -> bool:
    """True for a float NaN, which no ordering or equality holds for."""
    return isinstance(value, float) and math.isnan(value)


class RangeList(Generic[T]):
    """Items sorted by ``key(item)``; add / remove / satisfying.

    Cost: add and remove O(log n); :meth:`satisfying` O(log n + answers).
    """

    def __init__(self, key: Callable[[T], Value]) -> None:
        self._items: SortedKeyList = SortedKeyList(key=key)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def add(self, item: T) -> None:
        """Insert ``item`` (its key must not be NaN).  O(log n)."""
        self._items.add(item)

    def remove(self, item: T) -> None:
        """Remove ``item``; raises ValueError if it is not here.  O(log n)."""
        self._items.remove(item)

    def satisfying(self, op: str, value: Value) -> Iterator[T]:
        """The items whose key ``k`` satisfies ``k op value``, in key order (op in RANGE_OPS).

        O(log n + answers).
        """
        items = self._items
        if is_nan(value):
            return iter(())
        found: Iterator[T]
        if op == "<":
            found = items.islice(0, items.bisect_key_left(value))
        elif op == "<=":
            found = items.islice(0, items.bisect_key_right(value))
        elif op == ">":
            found = items.islice(items.bisect_key_right(value))
        else:
            assert op == ">=", f"not a range operator: {op}"
            found = items.islice(items.bisect_key_left(value))
        return found

    def check_valid(self) -> None:
        """Assert that the items are sorted by key and no key is NaN."""
        self._items._check()
        assert not any(is_nan(self._items.key(item)) for item in self._items)
