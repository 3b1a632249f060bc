"""Time-window aggregates of a stream: ``AVG_OVER(Price, 30 MIN, Name)`` and its kin.

Esper's ``win:time``, Siddhi's ``#window.time`` and Flink's HOP windows read "the
average price of this stock over the last 30 minutes".  Here such a window is a
**derived attribute** of an input event (:mod:`cesar.automata.derived`): for an event
``e`` of stream ``S``, ``AVG_OVER(Price, w, Name)`` is the average ``Price`` of the events
of ``S`` with ``e``'s ``Name`` that arrived in the last ``w`` ticks — ``t1`` in ``(e.t1 -
w, e.t1]``, so ``e``'s own epoch, ``e`` included.  ``SUM_OVER``, ``MIN_OVER``,
``MAX_OVER`` and ``COUNT_OVER(w, keys…)`` read the same window; with no key
attributes the window holds the whole stream.  ``AVG_TUMBLING`` and its kin read a
tumbling window instead: ``e``'s bucket ``[n·w, (n+1)·w)`` of ticks up to ``e``, counted on
the stream zone's clock and shifted by an optional offset (:mod:`cesar.automata.tumbling`).

A query names a window as a call whose attribute arguments are one event's
(``AVG_OVER(b.Price, 30 MIN, b.Name)`` in a pattern, ``AVG_OVER($2.Price, 30 MIN,
$2.Name)`` or ``AVG_OVER(Price, 30 MIN, Name)`` in CEL); the compiler rewrites it
to that event's attribute named :attr:`Window.name` (``AVG_OVER(Price, 30,
Name)``, the window in ticks: it parses back to the same window), which the
streams' schemas gain (:func:`~cesar.automata.derived.extended`).  The engine computes
it once per event for every subscription that reads it (:class:`WindowState`, one per
stream and window); the literal evaluators compute it from the whole stream
(:func:`literal`).  Sums are exact (fractions) and rounded once, so the running state
and the literal sum agree to the bit; a float sum beyond the floats is infinite, an int
sum beyond 64 bits stops at the limit.

>>> w = Window("AVG_OVER", "v", 3, ("k",))
>>> w.name
'AVG_OVER(v, 3, k)'
>>> state = WindowState(w)
>>> events = [Event.of("S", t, t, {"k": "a", "v": t}) for t in (1, 2, 3, 4)]
>>> [state.step([e])[0].value(w.name) for e in events]
[1.0, 1.5, 2.0, 3.0]
"""

from __future__ import annotations

import datetime
import math
import zoneinfo
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import AttrType, Event, StreamSchema, TimeUnit, Value
from cesar.automata.terms import Call, Const, DurLit, Pos, Term, position
from cesar.automata.translate import duration_ticks

SLIDING = ("AVG_OVER", "SUM_OVER", "MIN_OVER", "MAX_OVER", "COUNT_OVER")
"""The sliding window functions, each over one attribute but COUNT_OVER."""
TUMBLING = ("AVG_TUMBLING", "SUM_TUMBLING", "MIN_TUMBLING", "MAX_TUMBLING", "COUNT_TUMBLING")
"""The tumbling window functions (:mod:`cesar.automata.tumbling`)."""
FUNCTIONS = SLIDING + TUMBLING
"""Every window function."""

Key = tuple[Value | None, ...]


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class Window:
    """One window aggregate: its function, attribute (None for COUNT_OVER), length in ticks
    (at least 1) and key attributes; a tumbling one also its offset in ticks (``0 <= offset <
    ticks``) and, bound to a stream (:meth:`bind`), the seconds of its tick and its zone."""

    function: str
    attr: str | None
    ticks: int
    key: tuple[str, ...]
    pos: Pos = position()
    offset: int = 0
    seconds: Fraction | None = None
    zone: str = "UTC"

    @property
    def aggregate(self) -> str:
        """AVG, SUM, MIN, MAX or COUNT."""
        return self.function.split("_")[0]

    @property
    def tumbling(self) -> bool:
        """True for a tumbling window: buckets ``[n·w, (n+1)·w)`` of ticks, not a sliding one."""
        return self.function.endswith("_TUMBLING")

    @property
    def name(self) -> str:
        """The derived attribute's name, CEL that reads back as this window."""
        offset = str(self.offset) if self.offset else None
        args = [a for a in (self.attr, str(self.ticks), offset, *self.key) if a is not None]
        return f"{self.function}({', '.join(args)})"

    def bucket_of(self, t1: int) -> int:
        """The number of the tumbling bucket holding ``t1``: ``t1`` read on the zone's clock
        (its offset from UTC at ``t1``, in ticks), less the window's offset, over its length.

        >>> day = Window("COUNT_TUMBLING", None, 1440, ()).bind(
        ...     StreamSchema("S", (), TimeUnit.MIN, "America/New_York"))
        >>> [day.bucket_of(t) for t in (26729279, 26729280, 26729519, 26729520)]  # 0:00 UTC, NY
        [18561, 18561, 18561, 18562]
        """
        shift: Fraction | int = -self.offset
        if self.seconds is not None and self.zone != "UTC":
            try:
                moment = _EPOCH + datetime.timedelta(seconds=float(t1 * self.seconds))
                local = moment.astimezone(zoneinfo.ZoneInfo(self.zone)).utcoffset()
            except (OverflowError, ValueError):
                local = None
            if local is not None:
                shift += Fraction(int(local.total_seconds())) / self.seconds
        return int((t1 + shift) // self.ticks)

    def type_in(self, schema: StreamSchema) -> AttrType | None:
        """The aggregate's type over ``schema``'s events; None if the stream lacks an attribute
        it reads."""
        if any(schema.type_of(k) is None for k in self.key):
            return None
        if self.attr is None:
            return AttrType.INT
        typ = schema.type_of(self.attr)
        if typ is None or self.aggregate == "AVG":
            return None if typ is None else AttrType.FLOAT
        return typ

    def key_of(self, event: Event) -> Key:
        """The partition ``event`` falls in."""
        return tuple(event.value(k) for k in self.key)

    def bind(self, schema: StreamSchema) -> Window:
        """This window over ``schema``'s stream: a tumbling one takes its tick and zone."""
        if not self.tumbling:
            return self
        return replace(self, seconds=schema.unit.seconds, zone=schema.zone)


def window_call(call: Call, unit: TimeUnit, attr_of: Callable[[Term], Any]) -> tuple[Window, Any]:
    """The window ``call`` names, and the event whose attribute it becomes (see
    :func:`~cesar.automata.derived.derived_call`)."""
    counting = call.name.startswith("COUNT_")
    tumbling = call.name.endswith("_TUMBLING")
    form = (
        f"{call.name}({'' if counting else 'attribute, '}window, "
        f"{'[offset, ]' if tumbling else ''}key attributes…)"
    )
    example = f"{call.name}({'' if counting else 'Price, '}30 MIN, Name)"
    args = list(call.args)
    if len(args) < 2:
        raise CelSemanticError(f"expected {form}, e.g. {example}", call.pos)
    first = [] if counting else [args.pop(0)]
    length = _ticks(args.pop(0), unit, form, call)
    offset = 0
    if args and attr_of(args[0]) is None and isinstance(args[0], (DurLit, Const)):
        if not tumbling:
            raise CelSemanticError(f"{form}: an offset is for tumbling windows", call.pos)
        offset = _ticks(args.pop(0), unit, form, call, least=0)
        if offset >= length:
            raise CelSemanticError(
                f"{form}: the offset ({offset} ticks) is less than the window ({length})",
                call.pos,
            )
    read = [attr_of(term) for term in (*first, *args)]
    if any(r is None for r in read):
        raise CelSemanticError(f"{form}: the attributes must be plain attributes", call.pos)
    if len({event for event, _ in read}) > 1:
        raise CelSemanticError(f"{form}: the attributes must be one event's", call.pos)
    names = [attr for _, attr in read]
    attr = None if counting else names.pop(0)
    window = Window(call.name, attr, length, tuple(names), call.pos, offset)
    return window, read[0][0]


def _ticks(term: Term, unit: TimeUnit, form: str, call: Call, least: int = 1) -> int:
    if isinstance(term, DurLit):
        term = duration_ticks(term, unit)
    if not isinstance(term, Const) or not isinstance(term.value, int) or term.value < least:
        what = "the window" if least else "the offset"
        raise CelSemanticError(
            f"{form}: {what} is a duration (30 MIN) or a whole number of ticks, at least {least}",
            call.pos,
        )
    return term.value


def literal(window: Window, event: Event, stream: Sequence[Event]) -> Value:
    """The window's value at ``event`` from the whole ``stream``, by its definition."""
    key = window.key_of(event)
    ticks = window.ticks
    if window.tumbling:  # the event's bucket up to it, since the stream's last other bucket
        bucket = window.bucket_of(event.t1)
        before = [e.t1 for e in stream if e.t1 <= event.t1 and window.bucket_of(e.t1) != bucket]
        start = max(before, default=None)
        inside = [
            e
            for e in stream
            if (start is None or e.t1 > start) and e.t1 <= event.t1 and window.key_of(e) == key
        ]
    else:
        inside = [
            e for e in stream if event.t1 - ticks < e.t1 <= event.t1 and window.key_of(e) == key
        ]
    if window.attr is None:
        return len(inside)
    values = [e.value(window.attr) for e in inside]
    return _aggregate(window.aggregate, values)


def _aggregate(aggregate: str, values: list[Any]) -> Value:
    picked: Value
    if aggregate == "MIN":
        picked = min(values)
    elif aggregate == "MAX":
        picked = max(values)
    elif isinstance(values[0], float):
        picked = summed(aggregate, sum(map(Fraction, values), Fraction(0)), len(values), True)
    else:
        picked = summed(aggregate, sum(values), len(values), False)
    return picked


def summed(aggregate: str, total: int | Fraction, count: int, floats: bool) -> Value:
    """A sum or an average (``aggregate``) from the exact ``total`` of ``count`` values, rounded
    once: a float sum beyond the floats is infinite, an int sum beyond 64 bits stops at the
    limit."""
    if aggregate == "SUM" and not floats:
        return max(-(2**63), min(2**63 - 1, int(total)))
    exact = Fraction(total) if aggregate == "SUM" else Fraction(total) / count
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


@dataclass
class _Partition:
    """One key's events in the window: (number, t1, value) in arrival order, the exact sum
    (a fraction for floats), and a monotonic queue of (number, value) candidates for the
    minimum or maximum."""

    entries: deque[tuple[int, int, Any]] = field(default_factory=deque)
    total: int | Fraction = 0
    extreme: deque[tuple[int, Any]] = field(default_factory=deque)


@dataclass
class WindowState:
    """A window over one stream, kept as events come: the engine's, shared by every reader.

    :meth:`step` takes an epoch and returns its events with the window's value.  Amortized
    O(1) per event.  ``limit`` bounds the
    events held between epochs; beyond it the oldest go (after the epoch's values are read)
    and ``dropped`` counts them.
    """

    window: Window
    limit: int | None = None
    partitions: dict[Key, _Partition] = field(default_factory=dict)
    order: deque[tuple[int, Key]] = field(default_factory=deque)
    """Every event held, (t1, key) in arrival order."""
    added: int = 0
    dropped: int = 0

    def step(self, epoch: Sequence[Event]) -> list[Event]:
        """Add ``epoch`` (one ``t1``, after the last), expire what left the window, and return
        its events with the window's value for each."""
        window = self.window
        t1 = epoch[0].t1
        while self.order and self.order[0][0] <= t1 - window.ticks:
            self._expire()
        for event in epoch:
            value = 1 if window.attr is None else event.value(window.attr)
            self._add(window.key_of(event), t1, value)
        out = [e.with_values([(window.name, self.value(window.key_of(e)))]) for e in epoch]
        while self.limit is not None and len(self.order) > self.limit:
            self._expire()
            self.dropped += 1
        return out

    def value(self, key: Key) -> Value:
        """The window's value for partition ``key``.  O(1)."""
        part = self.partitions[key]
        aggregate = self.window.aggregate
        if aggregate == "COUNT":
            return len(part.entries)
        if aggregate in ("MIN", "MAX"):
            value: Value = part.extreme[0][1]
            return value
        floats = isinstance(part.entries[0][2], float)
        return summed(aggregate, part.total, len(part.entries), floats)

    def _add(self, key: Key, t1: int, value: Any) -> None:
        part = self.partitions.get(key)
        if part is None:
            part = self.partitions[key] = _Partition()
        self.added += 1
        part.entries.append((self.added, t1, value))
        self.order.append((t1, key))
        aggregate = self.window.aggregate
        if aggregate in ("AVG", "SUM"):
            self._sum(part, value)
        elif aggregate in ("MIN", "MAX"):
            low = aggregate == "MIN"
            while part.extreme and (
                part.extreme[-1][1] > value if low else part.extreme[-1][1] < value
            ):
                part.extreme.pop()
            part.extreme.append((self.added, value))

    def _expire(self) -> None:
        _, key = self.order.popleft()
        part = self.partitions[key]
        number, _, value = part.entries.popleft()
        if part.extreme and part.extreme[0][0] == number:
            part.extreme.popleft()
        if not part.entries:
            del self.partitions[key]
        elif self.window.aggregate in ("AVG", "SUM"):
            self._sum(part, -value)

    @staticmethod
    def _sum(part: _Partition, value: Any) -> None:
        part.total += Fraction(value) if isinstance(value, float) else value

    def to_data(self) -> dict[str, Any]:
        """The events held, (t1, key, value) in arrival order, as plain data."""
        firsts = {key: iter(part.entries) for key, part in self.partitions.items()}
        held = [(t1, key, next(firsts[key])[2]) for t1, key in self.order]
        return {"held": held, "dropped": self.dropped}

    def restore(self, data: Mapping[str, Any]) -> None:
        """Hold again the events :meth:`to_data` saved."""
        self.partitions.clear()
        self.order.clear()
        for t1, key, value in data["held"]:
            self._add(tuple(key), t1, value)
        self.dropped = data["dropped"]

    def check_valid(self) -> None:
        """Assert the invariants: the arrival order holds exactly the partitions' entries, in
        time order; each monotonic queue is ordered and within its entries; no partition is
        empty."""
        assert len(self.order) == sum(len(p.entries) for p in self.partitions.values())
        times = [t1 for t1, _ in self.order]
        assert times == sorted(times)
        for part in self.partitions.values():
            assert part.entries
            numbers = {number for number, _, _ in part.entries}
            assert all(number in numbers for number, _ in part.extreme)
            values = [v for _, v in part.extreme]
            if self.window.aggregate == "MIN":
                assert values == sorted(values)
            elif self.window.aggregate == "MAX":
                assert values == sorted(values, reverse=True)
