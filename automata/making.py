"""Events made in bulk: the engine's alerts and a shard's lane tables (trusted: their values
were checked where they entered the server).

Compiled, an event costs 80 ns here (:class:`~cesar.automata.schema.Event` is a native class
with its own ``__init__``); the loops below are what is left to save.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat

from cesar.automata.schema import Event, Value


def made_events(
    streams: Iterable[str], t0: int, t1: int, values: tuple[tuple[str, Value], ...]
) -> list[Event]:
    """``Event(stream, t0, t1, values)`` for each stream.

    For the engine's alerts, a million a second where a family of
    subscriptions matches together.  ``values`` must be sorted already.

    >>> made_events(["S"], 1, 2, (("a", 1),)) == [Event("S", 1, 2, (("a", 1),))]
    True
    """
    return [Event(stream, t0, t1, values) for stream in streams]


def events_of_columns(
    streams: list[str],
    t0s: list[int],
    t1s: list[int],
    columns: dict[str, list[tuple[str, list[Value]]]],
) -> list[Event]:
    """The events of columns, in row order: row ``i`` is an event of ``streams[i]`` from
    ``t0s[i]`` to ``t1s[i]`` with, for each (attribute, column) of its stream in
    ``columns`` (by attribute name, sorted), ``column[i]``.  O(rows × attributes of the
    row's stream); rows of one stream (a lane table of quotes, usually) have their pairs
    zipped in C: about 0.8 µs an event of three attributes, against 1.07 row by row.

    >>> events_of_columns(["S", "T"], [1, 2], [1, 3], {"S": [("v", [7, None])]})
    [Event(stream='S', t0=1, t1=1, values=(('v', 7),)), Event(stream='T', t0=2, t1=3, values=())]
    """
    if streams and streams.count(streams[0]) == len(streams):
        stream = streams[0]
        pairs = [
            zip(repeat(attr), column, strict=False) for attr, column in columns.get(stream, [])
        ]
        rows: Iterable[tuple[tuple[str, Value], ...]] = (
            zip(*pairs, strict=True) if pairs else [()] * len(streams)
        )
        return [
            Event(stream, t0, t1, values) for t0, t1, values in zip(t0s, t1s, rows, strict=True)
        ]
    out: list[Event] = []
    none: list[tuple[str, list[Value]]] = []
    for i in range(len(streams)):
        stream = streams[i]
        mine = columns.get(stream, none)
        out.append(Event(stream, t0s[i], t1s[i], tuple([(a, column[i]) for a, column in mine])))
    return out
