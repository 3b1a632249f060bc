"""Items by a threshold each: a probe gives those an incoming value passes.

The AI index (Section 4.3) reaches an instance by a value it has bound:
``$2.Price > $1.Price`` is ``Price > b`` with ``b`` the instance's.  When
subscriptions share an automaton and differ in a constant, the bound side
also holds the constant: ``$2.Price > ?0 * $1.Price`` is ``Price > t`` with
``t = c × b`` fixed for each pair of an instance and a constant ``c``.  A
:class:`Thresholds` keeps such items sorted by ``t`` and answers "which
items does ``value op t`` hold for" with one bisect, so an event reaches only
the waiting partial matches it completes, however many wait.

A threshold that could not be computed (``None``: its arithmetic faulted) is
*loose*: the item is a candidate for every value, and the caller's own test
decides.  A NaN threshold satisfies no comparison: the item is never a
candidate and is not stored.

>>> waiting = Thresholds(">")                  # value > threshold
>>> for item, threshold in [("a", 10.0), ("b", 30.0), ("c", None), ("d", 20.0)]:
...     waiting.add(item, threshold)
>>> sorted(waiting.probe(25.0))
['a', 'c', 'd']
>>> waiting.remove("a", 10.0)
>>> sorted(waiting.probe(25.0))
['c', 'd']
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from itertools import chain
from typing import Generic, TypeVar

from cesar.index.ranges import FLIPPED, RANGE_OPS, RangeList, Value, is_nan

T = TypeVar("T", bound=Hashable)


class Thresholds(Generic[T]):
    """Items with a threshold ``t`` each, probed for ``value op t``; add / remove / probe.

    Cost: add and remove O(log n); :meth:`probe` O(log n + answers).
    """

    def __init__(self, op: str) -> None:
        assert op in RANGE_OPS, f"not a range operator: {op}"
        self.op = op
        """A probe's value is on the left: an item is a candidate when ``value op t``."""
        self._ranges: RangeList[tuple[Value, T]] = RangeList(key=_threshold)
        self._loose: dict[T, None] = {}

    def __len__(self) -> int:
        """The items stored (those with a NaN threshold are not)."""
        return len(self._ranges) + len(self._loose)

    def add(self, item: T, threshold: Value | None) -> None:
        """File ``item`` under ``threshold`` (None: loose; NaN: never a candidate).

        An item is filed once.  O(log n).
        """
        if threshold is None:
            assert item not in self._loose, f"{item!r} filed twice"
            self._loose[item] = None
        elif not is_nan(threshold):
            self._ranges.add((threshold, item))

    def remove(self, item: T, threshold: Value | None) -> None:
        """Forget ``item``, filed under ``threshold``; raises KeyError if it is not.  O(log n)."""
        if threshold is None:
            del self._loose[item]
        elif not is_nan(threshold):
            self._ranges.remove((threshold, item))

    def probe(self, value: Value) -> Iterator[T]:
        """The loose items and those whose threshold ``t`` has ``value op t``, thresholds in order.

        A NaN value passes no threshold.  O(log n + answers).
        """
        passed = self._ranges.satisfying(FLIPPED[self.op], value)
        return chain(self._loose, (item for _, item in passed))

    def check_valid(self) -> None:
        """Assert that the items are sorted by threshold and each is filed once."""
        self._ranges.check_valid()
        ranked = [item for _, item in self._ranges]
        assert len(ranked) == len(set(ranked)), "an item filed twice"
        assert not set(ranked) & set(self._loose), "an item both loose and ranked"


def _threshold(entry: tuple[Value, T]) -> Value:
    return entry[0]
