"""A publish request as columns: the front's event path without a Python object per event.

Every batch a front takes — a client's protobuf events, a client's Arrow rows,
the feed's routed pieces — becomes one Arrow table in the normal form of
:func:`~cesar.server.wire.arrowevents.check` (``stream``, ``t0``, ``t1``,
``arrival``, ``index``, then ``<stream>/<attribute>`` typed as the schema says)
and the errors of its rejected events, before the front's lock is taken.  From
there admission, routing, the event log and the shards' lanes work on columns
(:mod:`~cesar.server.front.admission`, :mod:`~cesar.server.front.pieces`).

Protobuf events are read once into one column list per stream and attribute
(:class:`~cesar.server.wire.eventcolumns.StreamColumns`): an event exactly of its
schema straight from the request's bytes
(:func:`~cesar.server.wire.protocolumns.read_events`, compiled); any other from the
parsed message, taken as it is when it is of its schema after all, or through
:func:`~cesar.server.wire.convert.from_event`, the one validator, which either
rejects it (with the field and reason ``cesar run`` gives) or coerces it (an int
where a float is due).  Arrow rows are checked at once
(:func:`~cesar.server.wire.arrowevents.check`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow.compute as pc

from cesar.automata.schema import EventError, StreamSchema
from cesar.server.front import limits
from cesar.server.front.catalog import StreamRow
from cesar.server.front.errors import InvalidArgument
from cesar.server.wire.arrowevents import Checked, check, read
from cesar.server.wire.convert import from_event
from cesar.server.wire.eventcolumns import BASE, StreamColumns, normal
from cesar.server.wire.protocolumns import read_events
from cesar.v1 import cesar_pb2 as pb


def request_table(
    request: pb.PublishRequest,
    inputs: Mapping[str, StreamSchema],
    streams: Mapping[str, StreamRow],
    data: bytes | None = None,
) -> Checked:
    """A request's protobuf events, then its Arrow rows (indexed after them), as one table in
    the normal form with the errors of the events it rejects, by index.

    ``inputs`` are the input streams' schemas, ``streams`` every stream by name: one a
    subscription publishes is written by it alone.  ``data`` is the request's encoding as
    received (serialized again when not given): the events exactly of their schema are read
    from it (:func:`~cesar.server.wire.protocolumns.read_events`, ~2 µs an event compiled),
    the others from the parsed message.  InvalidArgument when the Arrow data cannot be read
    or a column has the wrong type.  Runs without the front's lock.
    """
    columns: dict[str, StreamColumns] = {}
    left: Iterable[int] = ()
    if request.events:
        left, columns = _read(request, data, inputs)
    errors = message_columns(request, left, inputs, streams, columns)
    parts = [found.table() for found in columns.values() if found]
    if request.arrow_events:
        arrow = _arrow(request.arrow_events, inputs, len(request.events))
        parts.append(arrow.table)
        errors.extend(arrow.errors)
    return Checked(normal(parts), sorted(errors, key=lambda item: item[0]))


def _read(
    request: pb.PublishRequest, data: bytes | None, inputs: Mapping[str, StreamSchema]
) -> tuple[Iterable[int], dict[str, StreamColumns]]:
    """The events :func:`read_events` leaves, and its columns by stream; every event left
    when it cannot read ``data`` as the message's events."""
    try:
        read = read_events(request.SerializeToString() if data is None else data, inputs)
    except ValueError:
        return range(len(request.events)), {}
    if read.count != len(request.events):
        return range(len(request.events)), {}
    columns = {name: StreamColumns(rows.schema, rows) for name, rows in read.streams.items()}
    return read.left, columns


def message_columns(
    request: pb.PublishRequest,
    indices: Iterable[int],
    inputs: Mapping[str, StreamSchema],
    streams: Mapping[str, StreamRow],
    columns: dict[str, StreamColumns],
) -> list[tuple[int, EventError]]:
    """Add the events of ``request`` at ``indices`` to ``columns`` from the parsed message,
    validating any not exactly of its schema; the errors of those rejected, by index."""
    errors: list[tuple[int, EventError]] = []
    events = request.events
    for index in indices:
        message = events[index]
        found = columns.get(message.stream)
        if found is None and message.stream in inputs:
            found = columns[message.stream] = StreamColumns(inputs[message.stream])
        if found is not None and found.take(index, message):
            continue
        row = streams.get(message.stream)
        if row is not None and row.subscription:
            reason = f"{message.stream} is published by subscription {row.subscription}; "
            errors.append((index, EventError(None, "stream", reason + "only it writes there")))
            continue
        try:
            event = from_event(message, inputs)
        except EventError as exc:
            errors.append((index, exc))
            continue
        columns[event.stream].add(index, event)
    return errors


def _arrow(data: bytes, inputs: Mapping[str, StreamSchema], offset: int) -> Checked:
    """Arrow rows checked at once, indexed from ``offset`` (arrival: the index where the
    rows bring none)."""
    room = limits.MAX_PUBLISH_EVENTS - offset
    try:
        table = read(data, room, limits.MAX_REQUEST_BYTES)
        checked = check(table, inputs)
    except EventError as exc:
        raise InvalidArgument(f"arrow_events: {exc.reason}") from None
    valid = checked.table
    if offset:
        index = pc.add(valid.column("index"), offset)
        valid = valid.set_column(BASE.index("index"), "index", index)
        if "arrival" not in table.column_names:
            valid = valid.set_column(BASE.index("arrival"), "arrival", index)
    return Checked(valid, [(i + offset, error) for i, error in checked.errors])


def in_turns(checked: Checked, size: int) -> list[Checked]:
    """A request's rows in (t1, arrival) order, cut between epochs into parts of about
    ``size`` rows (the errors go with the first): each part is taken under the front's lock
    on its own, so a huge request does not hold a small one for its whole length.

    >>> import pyarrow as pa
    >>> t = pa.table({"t1": [3, 1, 1, 2], "arrival": [0, 1, 2, 3], "index": [0, 1, 2, 3]})
    >>> [part.table.column("index").to_pylist() for part in in_turns(Checked(t, []), 2)]
    [[1, 2], [3, 0]]
    """
    table = checked.table
    order = pc.sort_indices(table, [("t1", "ascending"), ("arrival", "ascending")])
    table = table.take(order)
    t1 = table.column("t1").to_numpy()
    cuts = [0]
    for change in (np.flatnonzero(t1[1:] != t1[:-1]) + 1).tolist():
        if change - cuts[-1] >= size:
            cuts.append(change)
    cuts.append(len(t1))
    parts = [table.slice(start, end - start) for start, end in itertools.pairwise(cuts)]
    return [Checked(part, checked.errors if n == 0 else []) for n, part in enumerate(parts)]
