"""What the client hands a program: plain dataclasses of Python values, built from and into
the API's messages (proto/cesar/v1/cesar.proto).

Attribute values are ``str``, ``int``, ``float`` and ``bool``; times are ticks of the
stream's unit (``int``) or, for a stream with a calendar unit, a ``datetime`` (naive: UTC).

>>> from cesar.automata.schema import parse_stream_spec
>>> stock = parse_stream_spec("Stock(Name:string,Price:float)[min, America/New_York]")
>>> message = event_message(stock, {"t1": 26728651, "Name": "IBM", "Price": 131.5})
>>> (message.stream, message.t0, message.t1, message.attributes["Price"].float_value)
('Stock', 26728651, 26728651, 131.5)
>>> alert = Alert.of(pb.Alert(subscription="s1", seq=4, event=message), stock)
>>> (alert.attrs, alert.time)
({'Name': 'IBM', 'Price': 131.5}, '2020-10-26T09:31-04:00')
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cesar.automata.schema import EventError, StreamSchema
from cesar.server.wire.convert import to_value, trusted_event
from cesar.server.wire.eventfile import Ingest, event_record
from cesar.v1 import cesar_pb2 as pb

Time = int | datetime
"""A time: ticks of the stream's unit, or a moment (naive: UTC) for a calendar unit."""

_ISO = Ingest(time_column="t1", time_format="iso")


def ticks(moment: Time, schema: StreamSchema) -> int:
    """``moment`` in ticks of ``schema``'s unit (a datetime rounded down to a whole tick).

    >>> from cesar.automata.schema import parse_stream_spec
    >>> ticks(datetime(2020, 10, 26, 13, 31, 40), parse_stream_spec("S(x:int)[min]"))
    26728651
    """
    if isinstance(moment, datetime):
        try:
            return _ISO.ticks(moment.isoformat(), schema)
        except EventError as exc:
            raise ValueError(f"{schema.name}: {exc.reason}") from None
    if isinstance(moment, bool) or not isinstance(moment, int):
        raise TypeError(f"{schema.name}: a time is an int or a datetime, not {moment!r}")
    return moment


def event_message(schema: StreamSchema, row: Mapping[str, Any]) -> pb.Event:
    """An event of ``schema``'s stream from ``row``: its attributes, its time ``t1`` (or
    ``t``, as in ``cesar run``'s input) and ``t0`` when it lasts (default: a point event).

    The server checks the attributes against the schema (every one, of its type); here a
    missing time, or a value that is none of ``str``, ``int``, ``float`` and ``bool``, is a
    ValueError or TypeError naming the field.
    """
    values = {}
    end: Time | None = None
    start: Time | None = None
    for name, value in row.items():
        if name in ("t", "t1"):
            end = value
        elif name == "t0":
            start = value
        elif isinstance(value, (str, int, float)):
            values[name] = to_value(value)
        else:
            raise TypeError(f"{schema.name}.{name}: {value!r} is not a str, int, float or bool")
    if end is None:
        raise ValueError(f"{schema.name}: an event needs its time, t1")
    t1 = ticks(end, schema)
    t0 = t1 if start is None else ticks(start, schema)
    return pb.Event(stream=schema.name, t0=t0, t1=t1, attributes=values)


@dataclass(frozen=True)
class Alert:
    """One alert: an event a subscription published, or a notice about it.

    ``seq`` counts 1, 2, 3 … per subscription.  ``time`` is ``t0`` (``t0/t1`` for a
    duration) in ISO 8601 in the stream's zone, for a stream with a calendar unit.
    """

    subscription: str
    seq: int
    stream: str = ""
    t0: int = 0
    t1: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)
    time: str | None = None
    notice: str = ""

    @staticmethod
    def of(message: pb.Alert, schema: StreamSchema | None) -> Alert:
        """The alert ``message`` carries; ``schema`` is its stream's, when known."""
        if message.notice:
            return Alert(message.subscription, message.seq, notice=message.notice)
        record = event_record(trusted_event(message.event), schema)
        return Alert(
            message.subscription,
            message.seq,
            record["stream"],
            record["t0"],
            record["t1"],
            record["attrs"],
            record.get("time"),
        )

    def json(self) -> str:
        """The alert as ``cesar listen`` prints it: ``cesar run``'s line plus ``subscription``
        and ``seq`` (a notice: those two and ``notice``)."""
        record: dict[str, Any] = {"subscription": self.subscription, "seq": self.seq}
        if self.notice:
            record["notice"] = self.notice
            return json.dumps(record, ensure_ascii=False)
        record.update(stream=self.stream, t0=self.t0, t1=self.t1)
        if self.time is not None:
            record["time"] = self.time
        record["attrs"] = self.attrs
        return json.dumps(record, ensure_ascii=False)


@dataclass(frozen=True)
class Subscription:
    """A registered subscription (``Subscription`` in the API)."""

    id: str
    owner: str
    query: str
    stream: str
    output_spec: str
    key_attribute: str
    shard: int
    last_seq: int
    created_unix_ms: int

    @staticmethod
    def of(message: pb.Subscription) -> Subscription:
        """The subscription ``message`` describes."""
        return Subscription(
            message.id,
            message.owner,
            message.query,
            message.stream,
            message.output_spec,
            message.placement.key_attribute,
            message.placement.shard,
            message.last_seq,
            message.created_unix_ms,
        )


@dataclass(frozen=True)
class Stream:
    """A stream the caller may use: its canonical spec and who defined or publishes it."""

    name: str
    spec: str
    owner: str
    subscription: str
    shared_with: tuple[str, ...]

    @staticmethod
    def of(message: pb.StreamInfo) -> Stream:
        """The stream ``message`` describes."""
        return Stream(
            message.name,
            message.spec,
            message.owner,
            message.subscription,
            tuple(message.shared_with),
        )


@dataclass(frozen=True)
class Rejection:
    """An event the server did not take: its position in the call, the field and why."""

    index: int
    field: str
    reason: str


@dataclass(frozen=True)
class Published:
    """What a publish call did: events applied, events rejected (with reasons), whether its
    idempotency key had been applied before, the batch's place in the server's log, and the
    ``t1`` it closed time through (None: it left the last epoch open).

    >>> print(Published(998, (Rejection(3, "t1", "late: t1 = 7, …"),) * 2, False, 4, 9))
    998 accepted, 2 rejected (2 t1: late), time closed through t1 = 9
    """

    accepted: int
    rejected: tuple[Rejection, ...]
    duplicate: bool
    batch: int
    closed: int | None = None

    def __str__(self) -> str:
        counts = Counter(f"{r.field}: {r.reason.split(':', 1)[0]}" for r in self.rejected)
        why = ", ".join(f"{n} {what}" for what, n in counts.most_common())
        text = f"{self.accepted} accepted, {len(self.rejected)} rejected"
        text += f" ({why})" if why else ""
        text += " (already applied)" if self.duplicate else ""
        closed = "left open" if self.closed is None else f"closed through t1 = {self.closed}"
        return f"{text}, time {closed}"

    @staticmethod
    def of(message: pb.PublishResponse) -> Published:
        """The outcome ``message`` reports."""
        rejected = tuple(Rejection(r.index, r.field, r.reason) for r in message.rejected)
        return Published(message.accepted, rejected, message.duplicate, message.batch)
