"""Alerts as bytes from the shard to the Listen stream: framed once, never decoded on the way.

A ``cesar.v1.Alert`` is ``subscription`` (field 1), ``seq`` (2), ``event`` (3)
and ``notice`` (4). Protocol buffers read a message's fields in any order, so
an alert is written in two parts:

* its *body*, made by the shard: the event (:func:`event_body`) or the notice
  (:func:`notice_body`) as fields 3 and 4, in the ``ShardAlerts`` of its
  subscription (``cesar.v1.shard.ApplyResponse``);
* its *head*, made by the front, which numbers it: the subscription and the
  seq (:func:`framed`).

The front stores a subscription's alerts of one batch as one catalog row: the
alerts each *framed* as an element of ``AlertBatch.alerts`` (field 1), one
after the other, so a Listen stream sends a row's bytes inside an AlertBatch
as they are. :func:`frames` walks a row's alerts and :func:`after` drops its
first ones, for a stream resuming inside a row.

>>> from cesar.v1 import cesar_pb2 as pb
>>> body = event_body(b"", pb.Event(stream="Out", t0=1, t1=2).SerializeToString())
>>> row = framed(head("s1"), 7, body) + framed(head("s1"), 8, notice_body("too many"))
>>> batch = pb.AlertBatch.FromString(row)
>>> [(a.subscription, a.seq, a.event.t1, a.notice) for a in batch.alerts]
[('s1', 7, 2, ''), ('s1', 8, 0, 'too many')]
>>> [pb.Alert.FromString(alert).seq for alert in frames(row)]
[7, 8]
>>> [a.seq for a in pb.AlertBatch.FromString(after(row, 1)).alerts]
[8]
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import Final

from cesar.automata.schema import Value
from cesar.server.wire.protocolumns import read_varint, skip_field

ROW_ALERTS: Final = 1000
"""At most this many alerts in a stored row (an AlertBatch holds 1 to 1,000 alerts)."""

ROW_BYTES: Final = 1 << 20
"""At most about this many bytes in a stored row (an AlertBatch holds at most 1 MiB); one
larger alert is a row of its own."""


def varint(value: int) -> bytes:
    """``value`` (≥ 0) as a protocol-buffers varint; O(1) from a table below 2¹⁴ (every length
    and most counts an alert carries).

    >>> varint(1), varint(300), varint(1 << 20)
    (b'\\x01', b'\\xac\\x02', b'\\x80\\x80@')
    """
    if 0 <= value < SMALL_VARINTS:
        return _VARINTS[value]
    return _encoded(value)


def _encoded(value: int) -> bytes:
    """``value`` as a varint: its 7-bit groups, lowest first, each but the last with its high
    bit set, gathered in one integer and written at once; seven groups (49 bits) at a time, so
    that the integer stays a machine word in the compiled build (a time in nanoseconds takes
    two rounds). Byte by byte into a ``bytearray``, compiled, a value of 5 bytes took 290 ns,
    this 71 ns; a time in nanoseconds 363 and 206 ns (perf/RESULTS.md, session 24).

    >>> _encoded(300), _encoded(1 << 49)
    (b'\\xac\\x02', b'\\x80\\x80\\x80\\x80\\x80\\x80\\x80\\x01')
    """
    if value >= _SEVEN_GROUPS:
        groups = 0
        for shift in range(0, 56, 8):
            groups |= (value & 0x7F | 0x80) << shift
            value >>= 7
        return groups.to_bytes(7, "little") + _encoded(value)
    groups = shift = 0
    while value > 0x7F:
        groups |= (value & 0x7F | 0x80) << shift
        value >>= 7
        shift += 8
    return (groups | value << shift).to_bytes((shift >> 3) + 1, "little")


_SEVEN_GROUPS: Final = 1 << 49
"""The values from which a varint takes more than seven bytes."""

SMALL_VARINTS: Final = 1 << 14
"""The values below this have their varints (one or two bytes) made once, at import."""
_VARINTS: Final = [_encoded(value) for value in range(SMALL_VARINTS)]


HEADS: Final = 4096
"""At most this many names (streams and attributes) an :class:`EventWriter` keeps encoded
(then it starts over)."""


class EventWriter:
    """Serialized ``cesar.v1.Event`` messages written straight from an event's parts, without
    a protobuf message in between; the field heads of names seen are kept.

    >>> from cesar.v1 import cesar_pb2 as pb
    >>> writer = EventWriter()
    >>> rest = writer.rest(3, 4, (("Name", "IBM"), ("Price", 9.5), ("Up", True), ("V", -2)))
    >>> e = pb.Event.FromString(writer.head("Out") + rest)
    >>> e.stream, e.t0, e.t1, sorted(e.attributes), e.attributes["V"].int_value
    ('Out', 3, 4, ['Name', 'Price', 'Up', 'V'], -2)
    """

    def __init__(self) -> None:
        self._names: dict[str, bytes] = {}
        self._strings: dict[str, bytes] = {}

    def head(self, name: str) -> bytes:
        """``name`` as a field 1: an event's ``stream`` field, or the key of an attribute's
        map entry (the same bytes).  O(1) once seen."""
        head = self._names.get(name)
        if head is None:
            head = _keep(self._names, name, _field(b"\n", name.encode()))
        return head

    def rest(self, t0: int, t1: int, values: tuple[tuple[str, Value], ...]) -> bytes:
        """The fields after the stream: ``t0`` (2), ``t1`` (3), each attribute a map entry
        (4) of a name and a ``cesar.v1.Value``.  Zero times are left out, as protobuf does.
        O(attributes), joined once."""
        parts = []
        if t0:
            parts.append(b"\x10")
            parts.append(_int64(t0))
        if t1:
            parts.append(b"\x18")
            parts.append(parts[1] if t1 == t0 else _int64(t1))  # an event's own: t0 = t1
        for name, value in values:
            key = self.head(name)
            if isinstance(value, bool):
                encoded = b"\x12\x02\x20\x01" if value else b"\x12\x02\x20\x00"
            elif isinstance(value, int):
                encoded = _field(b"\x12", b"\x10" + _int64(value))
            elif isinstance(value, float):
                encoded = b"\x12\x09\x19" + _DOUBLE(value)
            else:
                encoded = self._string(value)
            parts.append(b'"')
            parts.append(varint(len(key) + len(encoded)))
            parts.append(key)
            parts.append(encoded)
        return b"".join(parts)

    def _string(self, value: str) -> bytes:
        """A string attribute's ``cesar.v1.Value``; the last :data:`HEADS` kept (names,
        symbols and other repeated strings are written once).  O(1) once seen."""
        encoded = self._strings.get(value)
        if encoded is None:
            encoded = _keep(self._strings, value, _field(b"\x12", _field(b"\n", value.encode())))
        return encoded


def _keep(kept: dict[str, bytes], text: str, encoded: bytes) -> bytes:
    """``encoded`` kept as ``text``'s in ``kept``, which starts over at :data:`HEADS`."""
    if len(kept) >= HEADS:
        kept.clear()
    kept[text] = encoded
    return encoded


_DOUBLE: Final = struct.Struct("<d").pack


def _int64(value: int) -> bytes:
    """An int64 field's varint: a negative value as its 64-bit two's complement."""
    return varint(value if value >= 0 else value + (1 << 64))


def event_body(head: bytes, rest: bytes) -> bytes:
    """An alert's body publishing the serialized ``cesar.v1.Event`` ``head + rest`` (field 3):
    its stream's field (:meth:`EventWriter.head`) and the rest (:meth:`EventWriter.rest`),
    joined once."""
    return b"".join((b"\x1a", varint(len(head) + len(rest)), head, rest))


def notice_body(notice: str) -> bytes:
    """An alert's body carrying ``notice`` (field 4) instead of an event."""
    return _field(b'"', notice.encode())


def shard_alerts(subscription: str, bodies: list[bytes]) -> bytes:
    """One ``ShardAlerts`` of ``subscription`` with its alerts' ``bodies``, as an element of
    ``ApplyResponse.subscriptions`` (field 2): a shard's Apply response is these, one after
    the other.  O(len(bodies) + their bytes).

    >>> from cesar.v1 import shard_pb2
    >>> data = shard_alerts("s1", [notice_body("a"), notice_body("b")])
    >>> response = shard_pb2.ApplyResponse.FromString(data)
    >>> [(s.subscription, len(s.alerts)) for s in response.subscriptions]
    [('s1', 2)]
    """
    parts = [head(subscription)]
    for body in bodies:
        parts.append(b"\x12")
        parts.append(varint(len(body)))
        parts.append(body)
    return _field(b"\x12", b"".join(parts))


def head(subscription: str) -> bytes:
    """The subscription field every alert of ``subscription`` starts with (field 1); the
    same bytes are an event's stream field (also field 1) of that name."""
    return _field(b"\n", subscription.encode())


def framed(subscription_head: bytes, seq: int, body: bytes) -> bytes:
    """One alert, numbered ``seq``, as an element of ``AlertBatch.alerts``.  O(len(body)),
    joined once."""
    number = varint(seq)
    size = varint(len(subscription_head) + 1 + len(number) + len(body))
    return b"".join((b"\n", size, subscription_head, b"\x10", number, body))


Run = tuple[str, int, int, str, bytes]
"""A subscription's alerts numbered ``first`` … ``last``, framed together: ``(subscription,
first, last, owner, framed alerts)``."""

_GROUP: Final = 0x12  # ApplyResponse.subscriptions = 2, length-delimited
_SUBSCRIPTION: Final = 0x0A  # ShardAlerts.subscription = 1
_BODY: Final = 0x12  # ShardAlerts.alerts = 2, one body each


def numbered(
    responses: Sequence[bytes], last_seq: dict[str, int], owners: dict[str, str]
) -> tuple[list[Run], dict[str, int]]:
    """A batch's alerts numbered from the serialized ``ApplyResponse`` messages its shards
    sent, no message built: each alert framed (:func:`framed`) after its subscription's last
    seq in ``last_seq``, which is advanced; a subscription's alerts of the batch in runs of at
    most :data:`ROW_ALERTS` and about :data:`ROW_BYTES`, each with the subscription's owner
    in ``owners`` (the rows the front logs); and each touched subscription's new last seq.
    A subscription not in ``last_seq`` (removed while the batch was applied) is left out.
    O(bytes), compiled.

    >>> response = shard_alerts("s1", [notice_body("a")]) + shard_alerts("s9", [b""])
    >>> more = shard_alerts("s1", [notice_body("b")])
    >>> runs, touched = numbered([response, more], {"s1": 4}, {"s1": "ann"})
    >>> [(sub, first, last, owner) for sub, first, last, owner, _ in runs], touched
    ([('s1', 5, 5, 'ann'), ('s1', 6, 6, 'ann')], {'s1': 6})
    """
    runs: list[Run] = []
    touched: dict[str, int] = {}
    for data in responses:
        pos, end = 0, len(data)
        while pos < end:
            tag, pos = read_varint(data, pos)
            if tag != _GROUP:
                pos = skip_field(data, pos, tag)
                continue
            length, pos = read_varint(data, pos)
            _number(data, pos, pos + length, last_seq, owners, runs, touched)
            pos += length
    return runs, touched


def _number(
    data: bytes,
    pos: int,
    stop: int,
    last_seq: dict[str, int],
    owners: dict[str, str],
    runs: list[Run],
    touched: dict[str, int],
) -> None:
    """Number the alerts of the ``ShardAlerts`` in ``data[pos:stop]`` into ``runs``."""
    subscription = ""
    bodies: list[int] = []  # where each body starts and ends, in pairs
    while pos < stop:
        tag, pos = read_varint(data, pos)
        if tag in (_SUBSCRIPTION, _BODY):
            length, pos = read_varint(data, pos)
            if tag == _SUBSCRIPTION:
                subscription = data[pos : pos + length].decode()
            else:
                bodies.append(pos)
                bodies.append(pos + length)
            pos += length
        else:
            pos = skip_field(data, pos, tag)
    if not bodies or subscription not in last_seq:
        return
    prefix, owner = head(subscription), owners[subscription]
    seq = first = last_seq[subscription] + 1
    frames: list[bytes] = []
    size = 0
    for at in range(0, len(bodies), 2):
        alert = framed(prefix, seq, data[bodies[at] : bodies[at + 1]])
        if frames and (len(frames) == ROW_ALERTS or size + len(alert) > ROW_BYTES):
            runs.append((subscription, first, seq - 1, owner, b"".join(frames)))
            frames, size, first = [], 0, seq
        frames.append(alert)
        size += len(alert)
        seq += 1
    runs.append((subscription, first, seq - 1, owner, b"".join(frames)))
    last_seq[subscription] = touched[subscription] = seq - 1


def frame(alert: bytes) -> bytes:
    """The serialized Alert ``alert`` as an element of ``AlertBatch.alerts`` (field 1)."""
    return _field(b"\n", alert)


def _field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field: its ``tag`` byte, the length of ``data``, then ``data``."""
    return b"".join((tag, varint(len(data)), data))


def frames(row: bytes) -> Iterator[bytes]:
    """The serialized alerts of a stored row (each without its frame), in order."""
    for start, end in _spans(row):
        yield row[start:end]


def after(row: bytes, count: int) -> bytes:
    """A stored row without its first ``count`` alerts (still framed).  O(count)."""
    if count <= 0:
        return row
    for number, (_, end) in enumerate(_spans(row), 1):
        if number == count:
            return row[end:]
    return b""


def _spans(row: bytes) -> Iterator[tuple[int, int]]:
    """Where each framed alert of ``row`` starts and ends (after its frame's tag and size)."""
    at, end = 0, len(row)
    while at < end:
        at += 1  # the tag of AlertBatch.alerts
        size = shift = 0
        while True:
            byte = row[at]
            at += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        yield at, at + size
        at += size
