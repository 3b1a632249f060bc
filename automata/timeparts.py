"""Functions of an event's time in its stream's zone: ``HOUR(t1)`` and its kin.

``HOUR(t1)``, ``MINUTE(t1)``, ``MINUTE_OF_DAY(t1)``, ``DAY_OF_WEEK(t1)`` (1 Monday … 7
Sunday), ``DAY_OF_MONTH(t1)``, ``MONTH(t1)``, ``YEAR(t1)`` and ``DATE(t1)`` (``'2020-10-26'``)
read an event's end (``t1``) or start (``t0``) in its stream's time zone; ``TICKS(t1)`` is the
time itself, in the stream's ticks, in every unit
(``Stock(…)[min, America/New_York]``; UTC by default).  Each is a **derived attribute** of
an input event (:mod:`cesar.automata.derived`), without state: a :class:`TimePart`.

>>> from cesar.automata.schema import parse_stream_spec
>>> part = TimePart("HOUR", "t1").bind(parse_stream_spec("S(v:int)[min, America/New_York]"))
>>> part.name, part.of(Event.of("S", 26728651, 26728651, {"v": 1}))
('HOUR(t1)', 9)
"""

from __future__ import annotations

import datetime
import zoneinfo
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import AttrType, Event, StreamSchema, TimeUnit, Value
from cesar.automata.terms import Call, Pos, Term, position

TIME_FUNCTIONS = {
    "HOUR": AttrType.INT,
    "MINUTE": AttrType.INT,
    "MINUTE_OF_DAY": AttrType.INT,
    "DAY_OF_WEEK": AttrType.INT,
    "DAY_OF_MONTH": AttrType.INT,
    "MONTH": AttrType.INT,
    "YEAR": AttrType.INT,
    "DATE": AttrType.STRING,
    "TICKS": AttrType.INT,
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
        """The function's type over ``schema``'s events; None for a stream without a unit
        (but TICKS)."""
        if schema.unit.seconds is None and self.function != "TICKS":
            return None
        return TIME_FUNCTIONS[self.function]

    def bind(self, schema: StreamSchema) -> TimePart:
        """This function over ``schema``'s stream: its unit and zone."""
        return replace(self, unit=schema.unit, zone=schema.zone)

    def of(self, event: Event) -> Value:
        """The function of ``event``'s time; for a time outside the years 1 to 9999 (ticks can
        reach far beyond), -1, and ``''`` for DATE."""
        ticks = event.t0 if self.which == "t0" else event.t1
        if self.function == "TICKS":
            return ticks
        seconds = self.unit.seconds
        assert seconds is not None
        try:
            moment = _EPOCH + datetime.timedelta(seconds=float(ticks * seconds))
            local = moment.astimezone(zoneinfo.ZoneInfo(self.zone))
        except (OverflowError, ValueError):
            return "" if self.function == "DATE" else -1
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


def time_call(call: Call, unit: TimeUnit, attr_of: Callable[[Term], Any]) -> tuple[TimePart, Any]:
    """The time function ``call`` names, and the event whose attribute it becomes (see
    :func:`~cesar.automata.derived.derived_call`)."""
    read = attr_of(call.args[0]) if len(call.args) == 1 else None
    if read is None or read[1] not in ("t0", "t1"):
        raise CelSemanticError(
            f"expected {call.name}(t1) or {call.name}(t0) of one event ({call.name}(t1), "
            f"{call.name}(b.t1), {call.name}($1.t0)): a function of an event's time",
            call.pos,
        )
    if unit.seconds is None and call.name != "TICKS":
        raise CelSemanticError(
            f"{call.name} needs streams with a time unit: declare one, e.g. Stock(...)[min]",
            call.pos,
        )
    return TimePart(call.name, read[1], pos=call.pos), read[0]


@dataclass
class TimeState:
    """A time function over one stream, driven as a
    :class:`~cesar.automata.windows.WindowState` is: nothing held."""

    part: TimePart
    added: int = 0
    dropped: int = 0

    def step(self, epoch: Sequence[Event]) -> list[Event]:
        """``epoch``'s events with the function of each one's time."""
        self.added += len(epoch)
        return [e.with_values([(self.part.name, self.part.of(e))]) for e in epoch]

    def to_data(self) -> dict[str, Any]:
        """Nothing to save."""
        return {}

    def restore(self, data: Mapping[str, Any]) -> None:
        """Nothing to take back."""

    def check_valid(self) -> None:
        """No state, no invariant."""


TICKS_PARTS = (TimePart("TICKS", "t0"), TimePart("TICKS", "t1"))
"""Each event's start and end in ticks: what an ordered join or a join's negation reads
(:mod:`cesar.automata.pattern.join`)."""
