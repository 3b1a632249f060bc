"""Event model: typed stream schemas, time units and validated events (Section 2).

A stream is a set of events ``<a1..an; t0, t1>`` with data attributes and two
integer timestamps ``t0 <= t1`` (start and end).  A schema names the stream,
types its attributes and declares the time unit of its timestamps.

>>> schema = parse_stream_spec("Stock(Name:string, Price:float, Volume:int)[min]")
>>> schema.unit.name
'MIN'
>>> validate_event(schema, {"t0": 3, "t1": 3, "Name": "IBM", "Price": 90, "Volume": 100})
Event(stream='Stock', t0=3, t1=3, values=(('Name', 'IBM'), ('Price', 90.0), ('Volume', 100)))
"""

from __future__ import annotations

import enum
import math
import re
import zoneinfo
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

Value = int | float | str | bool
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1


class AttrType(enum.Enum):
    """The four attribute types of CEL."""

    INT = "int"
    FLOAT = "float"
    STRING = "string"
    BOOL = "bool"

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python per call

    @property
    def numeric(self) -> bool:
        return self in (AttrType.INT, AttrType.FLOAT)


class TimeUnit(enum.Enum):
    """The unit of a stream's timestamps; ``TICK`` is an abstract tick of no fixed length."""

    TICK = None
    NS = Fraction(1, 10**9)
    US = Fraction(1, 10**6)
    MS = Fraction(1, 1000)
    SEC = Fraction(1)
    MIN = Fraction(60)
    HOUR = Fraction(3600)
    DAY = Fraction(86400)

    @property
    def seconds(self) -> Fraction | None:
        """Length of one tick in seconds, or None for the abstract tick."""
        value: Fraction | None = self.value
        return value


_UNIT_NAMES: Final = {
    "tick": TimeUnit.TICK,
    "ns": TimeUnit.NS,
    "us": TimeUnit.US,
    "ms": TimeUnit.MS,
    "s": TimeUnit.SEC,
    "sec": TimeUnit.SEC,
    "min": TimeUnit.MIN,
    "h": TimeUnit.HOUR,
    "hour": TimeUnit.HOUR,
    "day": TimeUnit.DAY,
}


class SchemaError(ValueError):
    """A stream specification that cannot be read."""


NOT_AN_ATTRIBUTE: Final = "not an attribute of the stream"
"""The reason given for a field the stream does not declare."""


class EventError(ValueError):
    """An event that does not conform to its stream's schema.

    Carries the stream, the offending field and the reason, so callers can
    report them or count them.
    """

    def __init__(self, stream: str | None, field: str | None, reason: str) -> None:
        self.stream = stream
        self.field = field
        self.reason = reason
        where = []
        if stream is not None:
            where.append(f"stream {stream}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)


@dataclass(frozen=True, slots=True)
class StreamSchema:
    """Name, typed attributes (in declaration order), time unit and time zone of a stream.

    ``zone`` is an IANA time zone name: the zone its times are read in by the time functions
    (``HOUR(t1)``) and shown in; ticks count from the Unix epoch, UTC, whatever the zone.
    """

    name: str
    attributes: tuple[tuple[str, AttrType], ...]
    unit: TimeUnit = TimeUnit.TICK
    zone: str = "UTC"

    def __reduce__(self) -> tuple[type[StreamSchema], tuple[object, ...]]:
        """Pickled as its constructor's call (a compiled frozen class refuses field writes)."""
        return StreamSchema, (self.name, self.attributes, self.unit, self.zone)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for attr, _ in self.attributes:
            if attr in seen:
                raise SchemaError(f"stream {self.name}: attribute {attr} declared twice")
            if attr in ("t0", "t1", "stream"):
                raise SchemaError(f"stream {self.name}: attribute name {attr} is reserved")
            seen.add(attr)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.attributes)

    def type_of(self, name: str) -> AttrType | None:
        """The type of attribute ``name``, or None if the stream has no such attribute."""
        for attr, typ in self.attributes:
            if attr == name:
                return typ
        return None

    def spec(self) -> str:
        """The textual specification that :func:`parse_stream_spec` reads back."""
        attrs = ",".join(f"{name}:{typ.value}" for name, typ in self.attributes)
        zone = "" if self.zone == "UTC" else f", {self.zone}"
        unit = "" if self.unit is TimeUnit.TICK else f"[{self.unit.name.lower()}{zone}]"
        return f"{self.name}({attrs}){unit}"


KEYWORDS: Final = frozenset(
    {
        "SELECT", "FROM", "PUBLISH", "FILTER", "NEXT", "FOLD", "UNION",
        "AS", "AND", "OR", "NOT", "DUR", "TRUE", "FALSE", "WITHIN",
    }
)  # fmt: skip
"""CEL's reserved words (any case): no stream or attribute may be named so, or CEL could not
name it."""

MAX_NAME_CHARS: Final = 128
"""The longest stream or attribute name."""
MAX_ATTRIBUTES: Final = 256
"""The most attributes a stream may have."""

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPEC: Final = re.compile(
    r"^\s*(?P<name>\S+?)\s*\((?P<attrs>[^)]*)\)\s*"
    r"(?:\[\s*(?P<unit>\w+)\s*(?:,\s*(?P<zone>[^\]\s]+)\s*)?\])?\s*$"
)
_ATTR: Final = re.compile(r"^\s*(?P<name>\S+?)\s*:\s*(?P<type>\w+)\s*$")


def check_name(name: str, what: str = "stream name") -> str:
    """``name`` if CEL can write it: ASCII letters, digits and ``_``, not a keyword, not too long.

    Raises :class:`SchemaError` saying which rule it breaks.

    >>> check_name("Drops")
    'Drops'
    >>> check_name("select")
    Traceback (most recent call last):
    cesar.automata.schema.SchemaError: stream name 'select' is a CEL keyword
    """
    if len(name) > MAX_NAME_CHARS:
        raise SchemaError(f"{what} of {len(name)} characters; the limit is {MAX_NAME_CHARS}")
    if not _NAME.fullmatch(name):
        raise SchemaError(
            f"{what} {name!r}: use ASCII letters, digits and _, not starting with a digit"
        )
    if name.upper() in KEYWORDS:
        raise SchemaError(f"{what} {name!r} is a CEL keyword")
    return name


def excerpt(text: str, limit: int = 120) -> str:
    """``text`` quoted, or its first words up to ``limit`` characters and an ellipsis: an error
    shows what was given without cutting a name in two.

    >>> excerpt("Quote(Name:string, Price:float)", 20)
    "'Quote(Name:string, …' (31 characters)"
    """
    if len(text) <= limit:
        return repr(text)
    cut = max(text.rfind(sep, 0, limit) for sep in " ,(:")
    head = text[: cut + 1 if cut > 0 else limit]
    return f"{head + '…'!r} ({len(text)} characters)"


def parse_stream_spec(text: str) -> StreamSchema:
    """Read ``Name(attr:type, ...)[unit]`` or ``…[unit, Zone/Name]``; the unit defaults to the
    abstract tick, the zone to UTC.

    >>> parse_stream_spec("T(a:int)[ms]").spec()
    'T(a:int)[ms]'
    >>> parse_stream_spec("Q(p:float)[min, America/New_York]").zone
    'America/New_York'
    """
    match = _SPEC.match(text)
    if match is None:
        raise SchemaError(
            f"bad stream specification {excerpt(text)}: expected Name(attr:type, ...) "
            "optionally followed by [unit]"
        )
    check_name(match["name"])
    attrs: list[tuple[str, AttrType]] = []
    body = match["attrs"].strip()
    parts = body.split(",") if body else []
    if len(parts) > MAX_ATTRIBUTES:
        raise SchemaError(f"{len(parts)} attributes; a stream has at most {MAX_ATTRIBUTES}")
    for part in parts:
        amatch = _ATTR.match(part)
        if amatch is None:
            raise SchemaError(f"bad attribute {excerpt(part.strip(), 60)}: expected name:type")
        check_name(amatch["name"], "attribute name")
        try:
            typ = AttrType(amatch["type"].lower())
        except ValueError:
            raise SchemaError(
                f"unknown type {amatch['type']!r} for attribute {amatch['name']} "
                "(expected int, float, string or bool)"
            ) from None
        attrs.append((amatch["name"], typ))
    unit = TimeUnit.TICK
    if match["unit"] is not None:
        try:
            unit = _UNIT_NAMES[match["unit"].lower()]
        except KeyError:
            raise SchemaError(
                f"unknown time unit {match['unit']!r} (expected one of {', '.join(_UNIT_NAMES)})"
            ) from None
    zone = match["zone"] or "UTC"
    if match["zone"] is not None:
        if unit.seconds is None or unit is TimeUnit.DAY:
            raise SchemaError(
                f"time zone {zone}: a zone needs a time unit finer than a day (min, sec, …): "
                "ticks count from the Unix epoch in UTC, so a day tick is a UTC date"
            )
        check_zone(zone)
    return StreamSchema(match["name"], tuple(attrs), unit, zone)


def check_zone(zone: str) -> str:
    """``zone`` if it names an IANA time zone (``America/New_York``, ``UTC``); SchemaError if
    not."""
    try:
        if len(zone) > MAX_NAME_CHARS:
            raise ValueError(zone)
        zoneinfo.ZoneInfo(zone)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        raise SchemaError(
            f"unknown time zone {excerpt(zone, 60)}: give an IANA name such as America/New_York"
        ) from None
    return zone


class Event:
    """One event ``<values; t0, t1>`` of a stream; ``values`` is sorted by attribute name.

    Sorting makes equality and hashing independent of how the event was built,
    so output multisets of different evaluators compare directly.  Immutable, compared and
    hashed by its four fields, as a frozen dataclass would be; written out because a
    dataclass's ``__init__`` is Python that ``dataclasses`` generates at import, which
    mypyc leaves uncompiled: 1.6 µs an event against 0.08 from compiled code.  Its fields
    are ``Final``: mypy refuses a write anywhere in the tree, and the compiled build at run
    time too.

    >>> e = Event("S", 1, 2, (("v", 1),))
    >>> e == Event("S", 1, 2, (("v", 1),)), hash(e) == hash(Event("S", 1, 2, (("v", 1),)))
    (True, True)
    >>> e
    Event(stream='S', t0=1, t1=2, values=(('v', 1),))
    """

    __slots__ = ("stream", "t0", "t1", "values")

    def __init__(self, stream: str, t0: int, t1: int, values: tuple[tuple[str, Value], ...]):
        self.stream: Final = stream
        self.t0: Final = t0
        self.t1: Final = t1
        self.values: Final = values

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return (self.stream, self.t0, self.t1, self.values) == (
            other.stream,
            other.t0,
            other.t1,
            other.values,
        )

    def __hash__(self) -> int:
        return hash((self.stream, self.t0, self.t1, self.values))

    def __repr__(self) -> str:
        return (
            f"Event(stream={self.stream!r}, t0={self.t0!r}, t1={self.t1!r}, values={self.values!r})"
        )

    def __reduce__(self) -> tuple[type[Event], tuple[object, ...]]:
        """Pickled as its constructor's call (a compiled frozen class refuses field writes)."""
        return Event, (self.stream, self.t0, self.t1, self.values)

    @staticmethod
    def of(stream: str, t0: int, t1: int, values: Mapping[str, Value]) -> Event:
        """Build an event from a mapping of attribute values."""
        return Event(stream, t0, t1, tuple(sorted(values.items())))

    def attrs(self) -> dict[str, Value]:
        """The attribute values as a new dict."""
        return dict(self.values)

    def with_values(self, more: Iterable[tuple[str, Value]]) -> Event:
        """This event with the attributes ``more`` (replacing any of the same name).

        >>> Event.of("S", 1, 1, {"a": 1}).with_values([("b", 2)]).values
        (('a', 1), ('b', 2))
        """
        values = dict(self.values)
        values.update(more)
        return Event(self.stream, self.t0, self.t1, tuple(sorted(values.items())))

    def value(self, attr: str) -> Value | None:
        """One attribute's value (None: the event has none of that name).  O(attributes)."""
        for name, value in self.values:
            if name == attr:
                return value
        return None

    @property
    def duration(self) -> int:
        """DUR: the number of ticks the event spans, ``t1 - t0 + 1``."""
        return self.t1 - self.t0 + 1


def coerce_value(stream: str, field: str, typ: AttrType, raw: object) -> Value:
    """Check ``raw`` against ``typ`` and return the typed value; raise :class:`EventError`."""
    if typ is AttrType.BOOL:
        if isinstance(raw, bool):
            return raw
        raise EventError(stream, field, f"expected a bool, got {_describe(raw)}")
    if isinstance(raw, bool):
        raise EventError(stream, field, f"expected {typ.value}, got a bool")
    if typ is AttrType.INT:
        if isinstance(raw, int):
            if not INT_MIN <= raw <= INT_MAX:
                raise EventError(stream, field, f"int {raw} outside the 64-bit range")
            return raw
        if isinstance(raw, float) and raw.is_integer() and INT_MIN <= raw <= INT_MAX:
            return int(raw)
        raise EventError(stream, field, f"expected an int, got {_describe(raw)}")
    if typ is AttrType.FLOAT:
        if isinstance(raw, (int, float)):
            value = float(raw)
            if not math.isfinite(value):
                raise EventError(stream, field, f"float {raw} is not finite")
            return value
        raise EventError(stream, field, f"expected a float, got {_describe(raw)}")
    if isinstance(raw, str):
        return raw
    raise EventError(stream, field, f"expected a string, got {_describe(raw)}")


def _describe(raw: object) -> str:
    if raw is None:
        return "null"
    if isinstance(raw, str):
        return f"string {raw!r}"
    return f"{type(raw).__name__} {raw!r}"


def coerce_time(stream: str | None, field: str, raw: object) -> int:
    """Check a timestamp: an integer (or integral float) within the signed 64-bit range."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise EventError(stream, field, f"expected an integer timestamp, got {_describe(raw)}")
    if isinstance(raw, float):
        if not raw.is_integer():
            raise EventError(stream, field, f"timestamp {raw} is not an integer")
        raw = int(raw)
    if not INT_MIN <= raw <= INT_MAX:
        raise EventError(stream, field, f"timestamp {raw} outside the 64-bit range")
    return raw


def validate_event(schema: StreamSchema, raw: Mapping[str, object]) -> Event:
    """Validate a mapping with ``t0``, ``t1`` and every attribute of ``schema``.

    Unknown keys, missing attributes, wrong types and ``t0 > t1`` are errors
    naming the stream, the field and the reason.
    """
    stream = schema.name
    for key in ("t0", "t1"):
        if key not in raw:
            raise EventError(stream, key, "missing")
    t0 = coerce_time(stream, "t0", raw["t0"])
    t1 = coerce_time(stream, "t1", raw["t1"])
    if t0 > t1:
        raise EventError(stream, "t0", f"t0 = {t0} is after t1 = {t1}")
    values: dict[str, Value] = {}
    for name, typ in schema.attributes:
        if name not in raw:
            raise EventError(stream, name, "missing")
        values[name] = coerce_value(stream, name, typ, raw[name])
    extra = sorted(set(raw) - set(schema.names) - {"t0", "t1", "stream"})
    if extra:
        raise EventError(stream, extra[0], NOT_AN_ATTRIBUTE)
    return Event.of(stream, t0, t1, values)


def schemas_by_name(schemas: Iterable[StreamSchema]) -> dict[str, StreamSchema]:
    """Index schemas by stream name; a name given twice is an error."""
    out: dict[str, StreamSchema] = {}
    for schema in schemas:
        if schema.name in out:
            raise SchemaError(f"stream {schema.name} declared twice")
        out[schema.name] = schema
    return out


def epochs(events: Iterable[Event]) -> list[list[Event]]:
    """Events grouped into epochs (equal ``t1``), in increasing ``t1``.

    >>> [[e.t0 for e in epoch] for epoch in epochs([Event.of("S", 2, 3, {}),
    ...                                            Event.of("S", 1, 1, {}),
    ...                                            Event.of("S", 3, 3, {})])]
    [[1], [2, 3]]
    """
    by_t1: dict[int, list[Event]] = {}
    for event in events:
        by_t1.setdefault(event.t1, []).append(event)
    return [by_t1[t1] for t1 in sorted(by_t1)]


def epoch_t1(epoch: Sequence[Event], last_t1: float | None) -> int:
    """The ``t1`` of a non-empty epoch, checked: one ``t1``, later than ``last_t1``.

    Raises ValueError otherwise.  Every evaluator that processes one epoch per
    call checks its input with this.

    >>> epoch_t1([Event.of("S", 1, 4, {}), Event.of("S", 4, 4, {})], 3)
    4
    """
    t1 = epoch[0].t1
    if any(e.t1 != t1 for e in epoch) or (last_t1 is not None and t1 <= last_t1):
        raise ValueError("an epoch holds events of one t1, later than the previous epoch's")
    return t1


def run_epochs(
    process: Callable[[list[Event]], list[Event]], events: Iterable[Event]
) -> list[Event]:
    """Everything ``process`` returns for the epochs of a finite list of events, in order."""
    out: list[Event] = []
    for epoch in epochs(events):
        out.extend(process(epoch))
    return out
