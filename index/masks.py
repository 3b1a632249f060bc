"""Slots by constant: the set of slots whose constant satisfies a comparison, as one bitmask.

Many subscriptions of one shape differ only in a constant (a threshold, a
window, a ticker).  Each holds a *slot* (a small integer), and a set of slots
is a Python ``int`` used as a bitset: union, intersection and difference are
single machine-level operations over the whole set.  A :class:`ValueMasks`
answers "for which slots ``s`` does ``value op c_s`` hold?" without looking at
the slots one by one:

* ``=`` and ``!=``: one dictionary lookup of the value's slots;
* ``<``, ``<=``, ``>``, ``>=``: one bisect in the sorted distinct constants,
  then the union of the slots below that position: a prefix union kept every
  *b* distinct constants (b = √distinct) and at most b / 2 masks added or
  taken away from the nearer one.

NaN satisfies no ordering and no equality (it does satisfy ``!=``), as a
constant and as a value.  Cost: :meth:`ValueMasks.satisfying` O(log d + √d)
big-integer operations for d distinct constants; :meth:`ValueMasks.add` and
:meth:`ValueMasks.remove` O(d) memory moves at worst, the prefix unions
rebuilt on the next probe after a change (O(d) operations).

>>> masks = ValueMasks()
>>> for slot, threshold in [(0, 10.0), (1, 20.0), (2, 15.0)]:
...     masks.add(slot, threshold)
>>> sorted(slots_of(masks.satisfying(">", 16.0)))     # 16 > c: thresholds 10 and 15
[0, 2]
>>> sorted(slots_of(masks.satisfying("=", 20.0)))
[1]
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from itertools import accumulate
from typing import Final

from cesar.index.ranges import Value, is_nan

SMALL_SLOTS: Final = tuple(tuple(s for s in range(8) if mask >> s & 1) for mask in range(256))
"""The slots of each mask below 256: most masks an edge meets are that small (one subscription
of a few sharing a group), and a lookup takes none of the int methods' calls."""


_BYTEWISE: Final = 1024
"""Up to this width, :func:`slots_of` reads a mask's bytes through :data:`SMALL_SLOTS` (two
method calls in all); wider, it takes the highest bit off or splits the binary text."""

_TOP_DOWN: Final = 128
"""The most slots a mask wider than :data:`_BYTEWISE` may have for :func:`slots_of` to take
them off one by one from the top (also at most one in 64 of its bits); past it, splitting the
binary text once is cheaper (measured at 2,000, 10,000 and 200,000 bits)."""


def slots_of(mask: int) -> tuple[int, ...]:
    """The slots of a bitmask, lowest first.

    O(1) for a mask below 256 (:data:`SMALL_SLOTS`), O(width / 8) table look-ups up to
    :data:`_BYTEWISE` bits (its bytes), and wider O(size of the mask / 64) per slot for a
    sparse mask (taking the highest bit off: no negative number, whose bitwise operations
    CPython makes on two's complement copies, 3-6x slower), O(size of the mask) in all for a
    dense one (splitting its binary text at the ones: the gaps' lengths are the distances
    between slots).

    >>> slots_of(0b101001), slots_of(2**200 - 1)[-1], slots_of(1 << 300 | 2)
    ((0, 3, 5), 199, (1, 300))
    """
    if mask < 256:
        return SMALL_SLOTS[mask]
    width = mask.bit_length()
    if width <= _BYTEWISE:
        if not mask & (mask - 1):  # one slot: most masks above 256 in a varied workload
            return (width - 1,)
        found: list[int] = []
        base = 0
        for byte in mask.to_bytes((width + 7) >> 3, "little"):
            if byte:
                for slot in SMALL_SLOTS[byte]:
                    found.append(base + slot)
            base += 8
        return tuple(found)
    count = mask.bit_count()
    if count <= _TOP_DOWN and count * 64 <= width:
        sparse = [0] * count
        while mask:
            count -= 1
            highest = mask.bit_length() - 1
            sparse[count] = highest
            mask ^= 1 << highest
        return tuple(sparse)
    gaps = bin(mask)[:1:-1].split("1")
    del gaps[-1]  # the text after the highest one
    return tuple(accumulate(map(len, gaps), _next_slot))


def _next_slot(slot: int, gap: int) -> int:
    return slot + gap + 1


def without(mask: int, other: int) -> int:
    """The slots of ``mask`` that are not in ``other``: ``mask & ~other`` without ``~``.

    ``~other`` is a negative number, and CPython makes every bitwise operation with a negative
    operand on two's complement copies of both: at 200,000 bits ``mask & ~other`` took 55-86 µs,
    this 4-5 µs (perf/RESULTS.md, session 23). Both operands must be non-negative. O(width).

    >>> bin(without(0b1110, 0b0101)), without(1 << 300 | 1, 1 << 300)
    ('0b1010', 1)
    """
    return mask ^ (mask & other)


def compact(mask: int) -> int:
    """``mask`` as a compact entry: itself, or ``~slot`` if it holds the one slot ``slot``.

    A mask is as wide as its highest slot; a structure holding many one-slot
    masks (most of them, in a varied workload) keeps the slot's number instead.

    >>> compact(0b1010), compact(1 << 70), expand(compact(1 << 70)) == 1 << 70, compact(0)
    (10, -71, True, 0)
    """
    return mask if mask & (mask - 1) else ~(mask.bit_length() - 1)


def expand(entry: int) -> int:
    """The mask a :func:`compact` entry stands for.  O(width of the mask)."""
    return entry if entry >= 0 else 1 << ~entry


class ValueMasks:
    """Slots and their constants; :meth:`satisfying` gives the slots ``value op c`` holds for.

    Methods: :meth:`add`, :meth:`remove`, :meth:`satisfying`, :meth:`loosest`,
    :meth:`check_valid`.  The distinct constants are a plain sorted list
    (insertion moves memory, O(d), but costs far less space than a tree; many
    small instances exist, one per group and ordered atom).  A constant held
    by one slot keeps that slot's number, ``~slot``, not its mask: a mask is
    as wide as its highest slot, and most constants of a varied workload
    belong to one subscription (at 400K subscriptions, kilobytes each).

    >>> masks = ValueMasks()
    >>> for slot, constant in [(3, 10), (900, 20), (5, 20)]:
    ...     masks.add(slot, constant)
    >>> list(slots_of(masks.satisfying(">", 15)))  # 15 > c: slot 3's 10
    [3]
    >>> list(slots_of(masks.satisfying("<=", 20)))  # 20 <= c: the slots of 20
    [5, 900]
    """

    __slots__ = ("_all", "_block", "_constant", "_masks", "_nan", "_order", "_prefix")

    def __init__(self) -> None:
        self._constant: dict[int, Value] = {}
        self._masks: dict[Value, int] = {}
        self._order: list[Value] = []
        self._all = 0
        self._nan = 0
        self._prefix: list[int] | None = None
        self._block = 1

    def __len__(self) -> int:
        """The number of slots."""
        return len(self._constant)

    def add(self, slot: int, constant: Value) -> None:
        """Give ``slot`` its ``constant``; the slot must not be here yet.  O(log d)."""
        assert slot not in self._constant, f"slot {slot} added twice"
        self._constant[slot] = constant
        bit = 1 << slot
        self._all |= bit
        self._prefix = None
        if is_nan(constant):
            self._nan |= bit
            return
        known = self._masks.get(constant)
        if known is None:
            insort(self._order, constant)
            self._masks[constant] = ~slot
        else:
            self._masks[constant] = expand(known) | bit

    def remove(self, slot: int) -> None:
        """Forget ``slot``; raises KeyError if it is not here.  O(log d)."""
        constant = self._constant.pop(slot)
        bit = 1 << slot
        self._all = without(self._all, bit)
        self._prefix = None
        if is_nan(constant):
            self._nan = without(self._nan, bit)
            return
        left = without(expand(self._masks[constant]), bit)
        if left:
            self._masks[constant] = compact(left)
        else:
            del self._masks[constant]
            del self._order[bisect_left(self._order, constant)]

    def loosest(self, op: str) -> Value | None:
        """The constant ``c`` for which ``value op c`` holds most often (None: no ordered one).

        An event value that fails ``value op loosest`` fails it for every
        slot: the static index prunes with it.  ``op`` is an ordering.
        """
        if not self._order:
            return None
        bound: Value = self._order[0] if op in (">", ">=") else self._order[-1]
        return bound

    def satisfying(self, op: str, value: Value) -> int:
        """The slots whose constant ``c`` makes ``value op c`` true, as a bitmask."""
        if op == "=":
            return 0 if is_nan(value) else expand(self._masks.get(value, 0))
        if op == "!=":
            if is_nan(value):
                return self._all
            return without(self._all, expand(self._masks.get(value, 0)))
        if is_nan(value):
            return 0
        if self._prefix is None:
            self._rebuild()
        values = self._order
        if op == ">":  # c < value
            return self._below(bisect_left(values, value))
        if op == ">=":  # c <= value
            return self._below(bisect_right(values, value))
        ordered = without(self._all, self._nan)
        if op == "<":  # c > value
            return without(ordered, self._below(bisect_right(values, value)))
        assert op == "<=", op
        return without(ordered, self._below(bisect_left(values, value)))

    def _rebuild(self) -> None:
        self._block = block = max(8, math.isqrt(len(self._order)))
        prefix, acc = [0], 0
        for position, constant in enumerate(self._order, 1):
            acc |= expand(self._masks[constant])
            if position % block == 0:
                prefix.append(acc)
        prefix.append(acc)  # the union of everything, past the last full block
        self._prefix = prefix

    def _below(self, position: int) -> int:
        """The slots of the first ``position`` distinct constants."""
        assert self._prefix is not None
        block, values, masks = self._block, self._order, self._masks
        index, rest = divmod(position, block)
        start = index * block
        if rest <= block // 2 or start + block > len(values):
            union = self._prefix[index]
            for constant in values[start:position]:
                entry = masks[constant]
                union |= entry if entry >= 0 else 1 << ~entry
            return union
        union = self._prefix[index + 1]
        for constant in values[position : start + block]:
            entry = masks[constant]
            union ^= entry if entry >= 0 else 1 << ~entry  # distinct constants: disjoint slots
        return union

    def check_valid(self) -> None:
        """Assert every invariant: disjoint masks, the sorted constants, the prefix unions."""
        union = self._nan
        for constant, entry in self._masks.items():
            mask = expand(entry)
            assert mask and not mask & union, f"constant {constant!r}"
            assert (entry < 0) == (mask.bit_count() == 1), f"constant {constant!r}"
            union |= mask
        assert union == self._all
        assert self._order == sorted(self._masks)
        for slot, constant in self._constant.items():
            bit = 1 << slot
            assert (self._nan if is_nan(constant) else expand(self._masks[constant])) & bit
        assert self._all.bit_count() == len(self._constant)
        if self._prefix is not None:
            for position in range(len(self._order) + 1):
                expected = 0
                for constant in self._order[:position]:
                    expected |= expand(self._masks[constant])
                assert self._below(position) == expected, f"prefix {position}"
