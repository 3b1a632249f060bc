"""Reading event files (JSON Lines or CSV) into validated events, with line numbers.

JSON Lines: one object per line, ``{"stream": "Stock", "t0": 0, "t1": 0, ...}``;
keys other than stream, t0 and t1 are attributes; ``t`` may stand for a point
event's ``t0 = t1``.  CSV: a header with ``stream`` (optional when one stream
is declared), ``t0`` and ``t1`` (or ``t``), then the attributes.  ``stream`` may
be left out of a JSON object too when only one stream is declared.

Files made for something else are read as they are with an :class:`Ingest`:
a time column of any name (ISO 8601 dates, or epoch seconds, milliseconds,
microseconds or nanoseconds, turned into ticks of the stream's unit), the
attribute columns to keep, and the stream of rows that name none.

>>> import io
>>> from cesar.automata.schema import parse_stream_spec
>>> stock = {"Stock": parse_stream_spec("Stock(symbol:string,close:float)[min]")}
>>> text = "symbol,ts,open,close\\nAAPL,2020-10-26T04:01:00-04:00,113.5,113.3\\n"
>>> how = Ingest(time_column="ts", columns=("symbol", "close"))
>>> event = read_events(io.StringIO(text), "x.csv", stock, ingest=how).events[0]
>>> event.t1, event.attrs()
(26728321, {'close': 113.3, 'symbol': 'AAPL'})
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

from cesar.automata.schema import (
    NOT_AN_ATTRIBUTE,
    AttrType,
    Event,
    EventError,
    StreamSchema,
    TimeUnit,
    validate_event,
)

TIME_FORMATS = ("auto", "iso", "s", "ms", "us", "ns", "ticks")
"""How ``Ingest.time_format`` reads a time: ``auto`` takes an integer as ticks and text as
ISO 8601; ``s`` .. ``ns`` are epoch times in that unit (integers or decimals)."""

_EPOCH_UNITS = {
    "s": Fraction(1),
    "ms": Fraction(1, 1000),
    "us": Fraction(1, 10**6),
    "ns": Fraction(1, 10**9),
}


@dataclass(frozen=True)
class Ingest:
    """How the rows of a file not written for cesar become events.

    ``time_column``: the column with each event's time (a point event, t0 = t1),
    read by ``time_format`` (:data:`TIME_FORMATS`) and turned into ticks of the
    stream's unit (rounded down).  ``columns``: the attribute columns to keep
    (the others are ignored).  ``stream``: the stream of the rows that name none.
    """

    time_column: str | None = None
    time_format: str = "auto"
    columns: tuple[str, ...] | None = None
    stream: str | None = None

    def apply(self, raw: dict[str, object], schemas: Mapping[str, StreamSchema]) -> None:
        """Rewrite one row in place into the default layout; raises :class:`EventError`."""
        if self.stream is not None and raw.get("stream") in (None, ""):
            raw["stream"] = self.stream
        if self.columns is not None:
            keep = {*self.columns, "stream", "t", "t0", "t1", self.time_column}
            for name in [name for name in raw if name not in keep]:
                del raw[name]
        if self.time_column is None:
            return
        if self.time_column not in raw:
            raise EventError(None, self.time_column, "missing (the --time-column)")
        schema = _stream_of(raw, schemas)
        raw.pop("t", None)
        raw["t0"] = raw["t1"] = self.ticks(raw.pop(self.time_column), schema)

    def ticks(self, value: object, schema: StreamSchema) -> int:
        """A time read by ``time_format`` as ticks of ``schema``'s unit."""
        field = self.time_column
        form = self.time_format
        text = value.strip() if isinstance(value, str) else value
        if form == "auto":
            form = "ticks" if isinstance(text, int) or _is_integer(text) else "iso"
        if form == "ticks":
            if isinstance(text, int) and not isinstance(text, bool):
                return text
            if isinstance(text, str) and _is_integer(text):
                return int(text)
            raise EventError(schema.name, field, f"expected an integer timestamp, got {value!r}")
        unit = schema.unit.seconds
        if unit is None:
            raise EventError(
                schema.name,
                field,
                f"stream {schema.name} has no time unit, so {form} times cannot be turned into "
                "its ticks: declare one, e.g. [min]",
            )
        if form == "iso":
            seconds = _iso_seconds(schema, field, text)
        else:
            try:
                number = Fraction(str(text))
            except (ValueError, ZeroDivisionError):
                raise EventError(
                    schema.name, field, f"expected an epoch time in {form}, got {value!r}"
                ) from None
            seconds = number * _EPOCH_UNITS[form]
        return math.floor(seconds / unit)


def _is_integer(text: object) -> bool:
    return isinstance(text, str) and text.lstrip("+-").isdigit()


def _iso_seconds(schema: StreamSchema, field: str | None, text: object) -> Fraction:
    """Seconds since the Unix epoch of an ISO 8601 date and time (no zone: UTC)."""
    try:
        moment = datetime.fromisoformat(str(text))
    except ValueError:
        raise EventError(
            schema.name,
            field,
            f"expected an ISO 8601 time such as 2020-10-26T09:30:00Z, got {text!r}",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    since = moment - datetime(1970, 1, 1, tzinfo=UTC)
    return Fraction(since.days * 86400 + since.seconds) + Fraction(since.microseconds, 10**6)


class EventInputError(ValueError):
    """A line of an event file that cannot be used, with its line number."""

    def __init__(self, line: int, error: EventError | str) -> None:
        self.line = line
        self.error = error
        super().__init__(f"line {line}: {error}")


@dataclass
class ReadResult:
    """The events read, in file order (or sorted), and the bad lines skipped (``skip_bad``)."""

    events: list[Event]
    skipped: list[EventInputError]


def _stream_of(raw: Mapping[str, object], schemas: Mapping[str, StreamSchema]) -> StreamSchema:
    name = raw.get("stream")
    if name is None:
        if len(schemas) == 1:
            return next(iter(schemas.values()))
        raise EventError(None, "stream", "missing (several streams are declared)")
    if not isinstance(name, str) or name not in schemas:
        known = ", ".join(sorted(schemas))
        raise EventError(None, "stream", f"unknown stream {name!r} (declared: {known})")
    return schemas[name]


def _point_time(raw: dict[str, object]) -> dict[str, object]:
    if "t" in raw:
        if "t0" in raw or "t1" in raw:
            raise EventError(None, "t", "give either t or t0 and t1, not both")
        value = raw.pop("t")
        raw["t0"] = raw["t1"] = value
    return raw


def json_event(
    line: str, schemas: Mapping[str, StreamSchema], ingest: Ingest | None = None
) -> Event:
    """One JSON Lines line as a validated event; raise :class:`EventError` with the reason."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EventError(None, None, f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(raw, dict):
        raise EventError(None, None, "expected a JSON object")
    if ingest is not None:
        ingest.apply(raw, schemas)
    schema = _stream_of(raw, schemas)
    return validate_event(schema, _point_time(raw))


def _json_lines(
    lines: Iterator[tuple[int, str]], schemas: Mapping[str, StreamSchema], ingest: Ingest | None
) -> Iterator[tuple[int, Event | EventError]]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            yield number, json_event(line, schemas, ingest)
        except EventError as exc:
            yield number, _hinted(exc, schemas, ingest)


def _parse_cell(schema: StreamSchema, name: str, text: str) -> object:
    if name in ("t0", "t1"):
        try:
            return int(text)
        except ValueError:
            raise EventError(
                schema.name, name, f"expected an integer timestamp, got {text!r}"
            ) from None
    typ = schema.type_of(name)
    if typ is None or typ is AttrType.STRING:
        return text
    if text == "":
        raise EventError(schema.name, name, "missing")
    try:
        if typ is AttrType.INT:
            return int(text)
        if typ is AttrType.FLOAT:
            return float(text)
    except ValueError:
        raise EventError(schema.name, name, f"expected {typ.value}, got {text!r}") from None
    lowered = text.lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise EventError(schema.name, name, f"expected a bool (true/false), got {text!r}")


def _csv_rows(
    lines: Iterator[tuple[int, str]], schemas: Mapping[str, StreamSchema], ingest: Ingest | None
) -> Iterator[tuple[int, Event | EventError]]:
    header: list[str] | None = None
    for number, line in lines:
        if not line.strip():
            continue
        cells = next(csv.reader([line]))
        if header is None:
            header = [cell.strip() for cell in cells]
            continue
        if len(cells) != len(header):
            yield (
                number,
                EventError(
                    None, None, f"expected {len(header)} columns as in the header, got {len(cells)}"
                ),
            )
            continue
        raw: dict[str, object] = dict(zip(header, cells, strict=True))
        try:
            if ingest is not None:
                ingest.apply(raw, schemas)
            _point_time(raw)
            schema = _stream_of(raw, schemas)
            typed = {k: _parse_cell(schema, k, str(v)) for k, v in raw.items() if k != "stream"}
            yield number, validate_event(schema, typed)
        except EventError as exc:
            yield number, _hinted(exc, schemas, ingest)


def _hinted(
    error: EventError, schemas: Mapping[str, StreamSchema], ingest: Ingest | None
) -> EventError:
    """``error``; for a column the stream does not declare, with the option that leaves the
    file's other columns out (``--columns``), unless it was given."""
    if error.reason != NOT_AN_ATTRIBUTE or (ingest is not None and ingest.columns is not None):
        return error
    schema = schemas.get(error.stream or "")
    if schema is None:
        return error
    names = ",".join(schema.names)
    hint = f"{NOT_AN_ATTRIBUTE} (keep only its columns with --columns {names})"
    return EventError(error.stream, error.field, hint)


def is_csv(path: str, first_line: str) -> bool:
    """CSV by extension (.csv), JSON Lines by extension or by a first line starting with '{'."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return True
    if suffix in (".jsonl", ".json", ".ndjson"):
        return False
    return not first_line.lstrip().startswith("{")


PROGRESS_LINES = 10_000
"""Lines between two calls of :func:`read_events`'s ``progress``."""


def read_events(
    stream: IO[str],
    path: str,
    schemas: Mapping[str, StreamSchema],
    *,
    sort: bool = False,
    skip_bad: bool = False,
    ingest: Ingest | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ReadResult:
    """Read and validate every event of an open file (rows rewritten by ``ingest``).

    Raises :class:`EventInputError` for a malformed line (unless ``skip_bad``)
    and for an event whose t1 is before the previous one (unless ``sort``).
    ``progress(lines read, lines)`` is called every :data:`PROGRESS_LINES` lines and at
    the end.
    """
    text = stream.read()
    lines = text.splitlines()
    first = next((line for line in lines if line.strip()), "")
    numbered = enumerate(lines, 1)
    if is_csv(path, first):
        rows = _csv_rows(numbered, schemas, ingest)
    else:
        rows = _json_lines(numbered, schemas, ingest)
    events: list[Event] = []
    skipped: list[EventInputError] = []
    for number, item in rows:
        if progress is not None and not number % PROGRESS_LINES:
            progress(number, len(lines))
        if isinstance(item, EventError):
            if skip_bad:
                skipped.append(EventInputError(number, item))
                continue
            raise EventInputError(number, item)
        if not sort and events and item.t1 < events[-1].t1:
            raise EventInputError(
                number,
                f"t1 = {item.t1} is before the previous event's t1 = {events[-1].t1}; "
                "events must come in non-decreasing t1 (or pass --sort)",
            )
        events.append(item)
    if sort:
        events.sort(key=lambda event: event.t1)
    if progress is not None:
        progress(len(lines), len(lines))
    return ReadResult(events, skipped)


def event_json(event: Event, schema: StreamSchema | None = None) -> str:
    """The output line of an event: :func:`event_record` as JSON.

    >>> from cesar.automata.schema import parse_stream_spec
    >>> rising = parse_stream_spec("Rising(Name:string)[min]")
    >>> line = event_json(Event.of("Rising", 26728651, 26728655, {"Name": "IBM"}), rising)
    >>> json.loads(line)["time"]
    '2020-10-26T13:31Z/2020-10-26T13:35Z'
    """
    return json.dumps(event_record(event, schema), ensure_ascii=False)


def event_record(event: Event, schema: StreamSchema | None = None) -> dict[str, Any]:
    """An event as output data: ``{"stream", "t0", "t1", "time", "attrs"}``.

    ``attrs`` are in schema order; ``time`` (present when the schema has a
    calendar unit) is the ISO 8601 form of t0 (and of t1, as an interval
    ``t0/t1``, for a duration), to the unit's precision, in the stream's zone (UTC unless
    it names one).
    """
    values = event.attrs()
    record: dict[str, Any] = {"stream": event.stream, "t0": event.t0, "t1": event.t1}
    if schema is not None:
        values = {name: values[name] for name in schema.names}
        unit, zone = schema.unit, schema.zone
        start, end = iso_time(event.t0, unit, zone), iso_time(event.t1, unit, zone)
        if start is not None and end is not None:
            record["time"] = start if event.t0 == event.t1 else f"{start}/{end}"
    record["attrs"] = values
    return record


_ISO_PRECISION = {
    TimeUnit.DAY: (86400, 10, "", 0),
    TimeUnit.HOUR: (3600, 13, ":00Z", 0),
    TimeUnit.MIN: (60, 16, "Z", 0),
    TimeUnit.SEC: (1, 19, "Z", 0),
    TimeUnit.MS: (1, 19, "Z", 3),
    TimeUnit.US: (1, 19, "Z", 6),
    TimeUnit.NS: (1, 19, "Z", 9),
}
"""Per calendar unit: seconds per tick (whole units), the length of ``datetime.isoformat()``
kept, what follows it, and the decimals of a second."""


def iso_time(ticks: int, unit: TimeUnit, zone: str = "UTC") -> str | None:
    """``ticks`` of ``unit`` since the Unix epoch in ISO 8601, to the unit's precision: in UTC
    (``Z``), or in ``zone`` with its offset then.

    None for the abstract tick and for times outside the years 1..9999.

    >>> iso_time(26728651, TimeUnit.MIN), iso_time(18561, TimeUnit.DAY)
    ('2020-10-26T13:31Z', '2020-10-26')
    >>> iso_time(1_603_719_060_250, TimeUnit.MS), iso_time(5, TimeUnit.TICK)
    ('2020-10-26T13:31:00.250Z', None)
    >>> iso_time(26728651, TimeUnit.MIN, "America/New_York")
    '2020-10-26T09:31-04:00'
    """
    precision = _ISO_PRECISION.get(unit)
    if precision is None:
        return None
    per_tick, kept, suffix, decimals = precision
    seconds, fraction = divmod(ticks * per_tick, 10**decimals)
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
        if zone != "UTC":
            moment = moment.astimezone(ZoneInfo(zone))
            suffix = moment.isoformat()[19:]
        text = moment.isoformat()[:kept]
    except (OverflowError, OSError, ValueError):
        return None
    if unit is TimeUnit.HOUR and zone != "UTC":
        suffix = ":00" + suffix
    if decimals:
        return f"{text}.{fraction:0{decimals}d}{suffix}"
    return text + suffix


def tick_time(ticks: int, unit: TimeUnit) -> str:
    """``ticks`` for a person: with their ISO 8601 time when ``unit`` is a calendar one.

    >>> tick_time(26728651, TimeUnit.MIN), tick_time(5, TimeUnit.TICK)
    ('26728651 (2020-10-26T13:31Z)', '5')
    """
    iso = iso_time(ticks, unit)
    return str(ticks) if iso is None else f"{ticks} ({iso})"


def input_line(event: Event) -> str:
    """``event`` as a JSON Lines input line (what ``cesar run`` and the feed read back).

    >>> input_line(Event.of("Stock", 3, 3, {"Name": "IBM"}))
    '{"stream": "Stock", "t0": 3, "t1": 3, "Name": "IBM"}'
    """
    return json.dumps({"stream": event.stream, "t0": event.t0, "t1": event.t1, **event.attrs()})


def drop_file(directory: Path, number: int, lines: list[str]) -> Path:
    """Put a JSON Lines file into a feed's source directory the way the file source wants.

    The file is written beside the directory and renamed in (atomic), named and
    stamped by ``number``: Spark takes files in modification-time order, and
    files written within one clock tick would tie.
    """
    staging = directory.parent / f".{directory.name}-{number:06}.staging"
    staging.write_text("\n".join(lines) + "\n")
    stamp = 1_700_000_000 + number
    os.utime(staging, (stamp, stamp))
    target = directory / f"{number:06}.jsonl"
    os.replace(staging, target)
    return target
