"""Time-window aggregates of a stream: ``AVG_OVER(Price, 30 MIN, Name)`` and its kin.

Esper's ``win:time``, Siddhi's ``#window.time`` and Flink's HOP windows read "the
average price of this stock over the last 30 minutes".  Here such a window is a
**derived attribute** of an input event: for an event ``e`` of stream ``S``,
``AVG_OVER(Price, w, Name)`` is the average ``Price`` of the events of ``S`` with
``e``'s ``Name`` that arrived in the last ``w`` ticks — ``t1`` in ``(e.t1 - w,
e.t1]``, so ``e``'s own epoch, ``e`` included.  ``SUM_OVER``, ``MIN_OVER``,
``MAX_OVER`` and ``COUNT_OVER(w, keys…)`` read the same window; with no key
attributes the window holds the whole stream.

A query names a window as a call whose attribute arguments are one event's
(``AVG_OVER(b.Price, 30 MIN, b.Name)`` in a pattern, ``AVG_OVER($2.Price, 30 MIN,
$2.Name)`` or ``AVG_OVER(Price, 30 MIN, Name)`` in CEL); the compiler rewrites it
to that event's attribute named :attr:`Window.name` (``AVG_OVER(Price, 30,
Name)``, the window in ticks: it parses back to the same window), which the
streams' schemas gain (:func:`extended`).  Everything after — typing, DNF,
indices, DAG sharing — sees an ordinary attribute.  The engine computes it once
per event for every subscription that reads it (:class:`WindowState`, one per
stream and window); the literal evaluators compute it from the whole stream
(:func:`literal`).  Sums are exact (:func:`math.fsum` of the window's values), so
the running state and the literal sum agree to the bit.

The functions of an event's time are derived attributes too, without state:
``HOUR(t1)``, ``MINUTE(t1)``, ``MINUTE_OF_DAY(t1)``, ``DAY_OF_WEEK(t1)`` (1 Monday … 7
Sunday), ``DAY_OF_MONTH(t1)``, ``MONTH(t1)``, ``YEAR(t1)`` and ``DATE(t1)`` (``'2020-10-26'``)
read an event's end (``t1``) or start (``t0``) in its stream's time zone
(``Stock(…)[min, America/New_York]``; UTC by default): a :class:`TimePart`.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import AttrType, Event, StreamSchema, TimeUnit, Value
from cesar.automata.terms import Call, Const, DurLit, Pos, Term, position
from cesar.automata.translate import duration_ticks

FUNCTIONS = ("AVG_OVER", "SUM_OVER", "MIN_OVER", "MAX_OVER", "COUNT_OVER")
"""The window functions, each over one attribute but COUNT_OVER."""

Key = tuple[Value | None, ...]


@dataclass(frozen=True, slots=True)
class Window:
    """One window aggregate: its function, attribute (None for COUNT_OVER), length in ticks
    (at least 1) and key attributes."""

    function: str
    attr: str | None
    ticks: int
    key: tuple[str, ...]
    pos: Pos = position()

    @property
    def name(self) -> str:
        """The derived attribute's name, CEL that reads back as this window."""
        args = [a for a in (self.attr, str(self.ticks), *self.key) if a is not None]
        return f"{self.function}({', '.join(args)})"

    def type_in(self, schema: StreamSchema) -> AttrType | None:
        """The aggregate's type over ``schema``'s events; None if the stream lacks an attribute
        it reads."""
        if any(schema.type_of(k) is None for k in self.key):
            return None
        if self.attr is None:
            return AttrType.INT
        typ = schema.type_of(self.attr)
        if typ is None or self.function == "AVG_OVER":
            return None if typ is None else AttrType.FLOAT
        return typ

    def key_of(self, event: Event) -> Key:
        """The partition ``event`` falls in."""
        return tuple(event.value(k) for k in self.key)

    def bind(self, schema: StreamSchema) -> Window:
        """This window over ``schema``'s stream (it needs nothing of the schema)."""
        return self


TIME_FUNCTIONS = {
    "HOUR": AttrType.INT,
    "MINUTE": AttrType.INT,
    "MINUTE_OF_DAY": AttrType.INT,
    "DAY_OF_WEEK": AttrType.INT,
    "DAY_OF_MONTH": AttrType.INT,
    "MONTH": AttrType.INT,
    "YEAR": AttrType.INT,
    "DATE": AttrType.STRING,
}
"""The functions of an event's time, and their types."""

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


@dataclass(frozen=True, slots=True)
class TimePart:
    """A function of an event's ``t0`` or ``t1`` (``which``) in its stream's zone; ``unit`` and
    ``zone`` are the stream's, set by :meth:`bind`."""

    function: str
    which: str
    unit: TimeUnit = TimeUnit.TICK
    zone: str = "UTC"
    pos: Pos = position()

    @property
    def name(self) -> str:
        """The derived attribute's name, CEL that reads back as this function."""
        return f"{self.function}({self.which})"

    def type_in(self, schema: StreamSchema) -> AttrType | None:
        """The function's type over ``schema``'s events; None for a stream without a unit."""
        return None if schema.unit.seconds is None else TIME_FUNCTIONS[self.function]

    def bind(self, schema: StreamSchema) -> TimePart:
        """This function over ``schema``'s stream: its unit and zone."""
        return replace(self, unit=schema.unit, zone=schema.zone)

    def of(self, event: Event) -> Value:
        """The function of ``event``'s time."""
        seconds = self.unit.seconds
        assert seconds is not None
        ticks = event.t0 if self.which == "t0" else event.t1
        moment = _EPOCH + datetime.timedelta(seconds=float(ticks * seconds))
        local = moment.astimezone(zoneinfo.ZoneInfo(self.zone))
        value: Value
        match self.function:
            case "HOUR":
                value = local.hour
            case "MINUTE":
                value = local.minute
            case "MINUTE_OF_DAY":
                value = local.hour * 60 + local.minute
            case "DAY_OF_WEEK":
                value = local.isoweekday()
            case "DAY_OF_MONTH":
                value = local.day
            case "MONTH":
                value = local.month
            case "YEAR":
                value = local.year
            case _:
                value = local.date().isoformat()
        return value


Derived = Window | TimePart
"""An attribute the engine adds to an input stream's events: a window, or a time function."""

DERIVING = (*FUNCTIONS, *TIME_FUNCTIONS)
"""The calls that name a derived attribute."""


def derived_call(call: Call, unit: TimeUnit, attr_of: Callable[[Term], Any]) -> tuple[Derived, Any]:
    """The window or time function ``call`` names, and the event whose attribute it becomes.

    ``attr_of(term)`` gives an argument's ``(event, attribute)`` — the event as the caller
    names it (a CEL scope, a pattern variable and index) — or None if it is not one
    attribute.  Raises :class:`CelSemanticError` at the call, saying the form expected.
    """
    if call.name in TIME_FUNCTIONS:
        read = attr_of(call.args[0]) if len(call.args) == 1 else None
        if read is None or read[1] not in ("t0", "t1"):
            raise CelSemanticError(
                f"expected {call.name}(t1) or {call.name}(t0) of one event ({call.name}(t1), "
                f"{call.name}(b.t1), {call.name}($1.t0)): a function of an event's time",
                call.pos,
            )
        if unit.seconds is None:
            raise CelSemanticError(
                f"{call.name} needs streams with a time unit: declare one, e.g. Stock(...)[min]",
                call.pos,
            )
        return TimePart(call.name, read[1], pos=call.pos), read[0]
    counting = call.name == "COUNT_OVER"
    form = f"{call.name}({'' if counting else 'attribute, '}window, key attributes…)"
    example = f"{call.name}({'' if counting else 'Price, '}30 MIN, Name)"
    args = list(call.args)
    if len(args) < 2:
        raise CelSemanticError(f"expected {form}, e.g. {example}", call.pos)
    first = [] if counting else [args.pop(0)]
    length = _ticks(args.pop(0), unit, form, call)
    read = [attr_of(term) for term in (*first, *args)]
    if any(r is None for r in read):
        raise CelSemanticError(f"{form}: the attributes must be plain attributes", call.pos)
    if len({event for event, _ in read}) > 1:
        raise CelSemanticError(f"{form}: the attributes must be one event's", call.pos)
    names = [attr for _, attr in read]
    attr = None if counting else names.pop(0)
    return Window(call.name, attr, length, tuple(names), call.pos), read[0][0]


def _ticks(term: Term, unit: TimeUnit, form: str, call: Call) -> int:
    if isinstance(term, DurLit):
        term = duration_ticks(term, unit)
    if not isinstance(term, Const) or not isinstance(term.value, int) or term.value < 1:
        raise CelSemanticError(
            f"{form}: the window is a duration (30 MIN) or a whole number of ticks, at least 1",
            call.pos,
        )
    return term.value


def extended(
    schemas: Mapping[str, StreamSchema], windows: Iterable[Derived]
) -> dict[str, StreamSchema]:
    """``schemas`` with each stream that has what a derived attribute reads gaining it."""
    out = dict(schemas)
    wanted = sorted(set(windows), key=lambda w: w.name)
    for name, schema in schemas.items():
        for w in wanted:
            if isinstance(w, TimePart):
                continue
            typ = schema.type_of(w.attr) if w.attr is not None else None
            summed = w.function in ("AVG_OVER", "SUM_OVER")
            if summed and typ is not None and not typ.numeric and w.type_in(schema) is not None:
                raise CelSemanticError(
                    f"{w.function} needs numbers, not {typ.value} {w.attr} (stream {name})",
                    w.pos,
                )
        more = [(w.name, t) for w in wanted if (t := w.type_in(schema)) is not None]
        more = [(n, t) for n, t in more if schema.type_of(n) is None]
        if more:
            out[name] = StreamSchema(
                schema.name, schema.attributes + tuple(more), schema.unit, schema.zone
            )
    return out


def read_by(
    schemas: Mapping[str, StreamSchema], streams: Iterable[str], windows: Iterable[Derived]
) -> tuple[tuple[str, Derived], ...]:
    """The (stream, derived attribute) pairs to compute: each of ``streams`` with every one
    it has what to read for, bound to the stream."""
    return tuple(
        sorted(
            {
                (s, w.bind(schemas[s]))
                for s in streams
                for w in windows
                if w.type_in(schemas[s]) is not None
            },
            key=lambda p: (p[0], p[1].name),
        )
    )


def literal(window: Derived, event: Event, stream: Sequence[Event]) -> Value:
    """The derived attribute's value at ``event`` from the whole ``stream``, by its
    definition."""
    if isinstance(window, TimePart):
        return window.of(event)
    key = window.key_of(event)
    inside = [
        e for e in stream if event.t1 - window.ticks < e.t1 <= event.t1 and window.key_of(e) == key
    ]
    if window.attr is None:
        return len(inside)
    values = [e.value(window.attr) for e in inside]
    return _aggregate(window.function, values)


def _aggregate(function: str, values: list[Any]) -> Value:
    picked: Value
    if function == "MIN_OVER":
        picked = min(values)
    elif function == "MAX_OVER":
        picked = max(values)
    else:
        total: float | int = math.fsum(values) if isinstance(values[0], float) else sum(values)
        picked = total if function == "SUM_OVER" else total / len(values)
    return picked


def enrich_all(
    streams: Mapping[str, Sequence[Event]], windows: Iterable[tuple[str, Derived]]
) -> dict[str, list[Event]]:
    """Every event of ``streams`` with the literal values of the derived attributes over its
    stream."""
    by_stream: dict[str, list[Derived]] = {}
    for stream, window in windows:
        by_stream.setdefault(stream, []).append(window)
    out: dict[str, list[Event]] = {}
    for name, events in streams.items():
        mine = by_stream.get(name, [])
        out[name] = [
            _with(e, [(w.name, literal(w, e, events)) for w in mine]) if mine else e for e in events
        ]
    return out


def _with(event: Event, more: list[tuple[str, Value]]) -> Event:
    """``event`` with the attributes ``more`` (replacing any of the same name)."""
    values = dict(event.values)
    values.update(more)
    return Event(event.stream, event.t0, event.t1, tuple(sorted(values.items())))


@dataclass
class _Partition:
    """One key's events in the window: (number, t1, value) in arrival order, the exact sum
    (its partials for floats), and a monotonic queue of (number, value) candidates for the
    minimum or maximum."""

    entries: deque[tuple[int, int, Any]] = field(default_factory=deque)
    partials: list[float] = field(default_factory=list)
    total: int = 0
    extreme: deque[tuple[int, Any]] = field(default_factory=deque)


@dataclass
class WindowState:
    """A window over one stream, kept as events come: the engine's, shared by every reader.

    :meth:`step` takes an epoch and returns its events with the window's value.  Amortized
    O(1) per event (O(partials) for a float sum, a handful in practice).  ``limit`` bounds the
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
        out = [_with(e, [(window.name, self.value(window.key_of(e)))]) for e in epoch]
        while self.limit is not None and len(self.order) > self.limit:
            self._expire()
            self.dropped += 1
        return out

    def value(self, key: Key) -> Value:
        """The window's value for partition ``key``.  O(1), or O(partials) for a float sum."""
        part = self.partitions[key]
        function = self.window.function
        if function == "COUNT_OVER":
            return len(part.entries)
        if function in ("MIN_OVER", "MAX_OVER"):
            value: Value = part.extreme[0][1]
            return value
        floats = isinstance(part.entries[0][2], float)
        total: float | int = math.fsum(part.partials) if floats else part.total
        return total if function == "SUM_OVER" else total / len(part.entries)

    def _add(self, key: Key, t1: int, value: Any) -> None:
        part = self.partitions.get(key)
        if part is None:
            part = self.partitions[key] = _Partition()
        self.added += 1
        part.entries.append((self.added, t1, value))
        self.order.append((t1, key))
        function = self.window.function
        if function in ("AVG_OVER", "SUM_OVER"):
            self._sum(part, value)
        elif function in ("MIN_OVER", "MAX_OVER"):
            low = function == "MIN_OVER"
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
        elif self.window.function in ("AVG_OVER", "SUM_OVER"):
            self._sum(part, -value)

    @staticmethod
    def _sum(part: _Partition, value: Any) -> None:
        if isinstance(value, float):
            _add_exact(part.partials, value)
        else:
            part.total += value

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
            if self.window.function == "MIN_OVER":
                assert values == sorted(values)
            elif self.window.function == "MAX_OVER":
                assert values == sorted(values, reverse=True)


@dataclass
class TimeState:
    """A time function over one stream, as a :class:`WindowState` is driven: nothing held."""

    part: TimePart
    added: int = 0
    dropped: int = 0

    def step(self, epoch: Sequence[Event]) -> list[Event]:
        """``epoch``'s events with the function of each one's time."""
        self.added += len(epoch)
        return [_with(e, [(self.part.name, self.part.of(e))]) for e in epoch]

    def to_data(self) -> dict[str, Any]:
        """Nothing to save."""
        return {}

    def restore(self, data: Mapping[str, Any]) -> None:
        """Nothing to take back."""

    def check_valid(self) -> None:
        """No state, no invariant."""


def state_of(derived: Derived, limit: int | None) -> WindowState | TimeState:
    """A fresh running state computing ``derived``."""
    if isinstance(derived, TimePart):
        return TimeState(derived)
    return WindowState(derived, limit)


def _add_exact(partials: list[float], x: float) -> None:
    """Add ``x`` to the non-overlapping partials of an exact sum (Shewchuk's algorithm, as
    :func:`math.fsum` keeps them); ``math.fsum(partials)`` is then the sum correctly rounded."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]
