"""Reading event files (JSON Lines or CSV) into validated events, with line numbers.

JSON Lines: one object per line, ``{"stream": "Stock", "t0": 0, "t1": 0, ...}``;
keys other than stream, t0 and t1 are attributes; ``t`` may stand for a point
event's ``t0 = t1``.  CSV: a header with ``stream`` (optional when one stream
is declared), ``t0`` and ``t1`` (or ``t``), then the attributes.  ``stream`` may
be left out of a JSON object too when only one stream is declared.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cesar.automata.schema import AttrType, Event, EventError, StreamSchema, validate_event


class EventInputError(ValueError):
    """A line of an event file that cannot be used, with its line number."""

    def __init__(self, line: int, error: EventError | str) -> None:
        self.line = line
        self.error = error
        super().__init__(f"line {line}: {error}")


@dataclass
class ReadResult:
    """The events read, in file order (or sorted), and how many bad lines were skipped."""

    events: list[Event]
    skipped: int


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


def json_event(line: str, schemas: Mapping[str, StreamSchema]) -> Event:
    """One JSON Lines line as a validated event; raise :class:`EventError` with the reason."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise EventError(None, None, f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(raw, dict):
        raise EventError(None, None, "expected a JSON object")
    schema = _stream_of(raw, schemas)
    return validate_event(schema, _point_time(raw))


def _json_lines(
    lines: Iterator[tuple[int, str]], schemas: Mapping[str, StreamSchema]
) -> Iterator[tuple[int, Event | EventError]]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            yield number, json_event(line, schemas)
        except EventError as exc:
            yield number, exc


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
    lines: Iterator[tuple[int, str]], schemas: Mapping[str, StreamSchema]
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
            _point_time(raw)
            schema = _stream_of(raw, schemas)
            typed = {k: _parse_cell(schema, k, str(v)) for k, v in raw.items() if k != "stream"}
            yield number, validate_event(schema, typed)
        except EventError as exc:
            yield number, exc


def is_csv(path: str, first_line: str) -> bool:
    """CSV by extension (.csv), JSON Lines by extension or by a first line starting with '{'."""
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return True
    if suffix in (".jsonl", ".json", ".ndjson"):
        return False
    return not first_line.lstrip().startswith("{")


def read_events(
    stream: IO[str],
    path: str,
    schemas: Mapping[str, StreamSchema],
    *,
    sort: bool = False,
    skip_bad: bool = False,
) -> ReadResult:
    """Read and validate every event of an open file.

    Raises :class:`EventInputError` for a malformed line (unless ``skip_bad``)
    and for an event whose t1 is before the previous one (unless ``sort``).
    """
    text = stream.read()
    first = next((line for line in text.splitlines() if line.strip()), "")
    numbered = enumerate(text.splitlines(), 1)
    rows = _csv_rows(numbered, schemas) if is_csv(path, first) else _json_lines(numbered, schemas)
    events: list[Event] = []
    skipped = 0
    for number, item in rows:
        if isinstance(item, EventError):
            if skip_bad:
                skipped += 1
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
    return ReadResult(events, skipped)


def event_json(event: Event, schema: StreamSchema | None = None) -> str:
    """The output line of an event: ``{"stream", "t0", "t1", "attrs"}``, attrs in schema order."""
    values = event.attrs()
    if schema is not None:
        values = {name: values[name] for name in schema.names}
    return json.dumps(
        {"stream": event.stream, "t0": event.t0, "t1": event.t1, "attrs": values},
        ensure_ascii=False,
    )


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
