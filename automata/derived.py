"""Derived attributes: what the engine adds to an input stream's events before any automaton.

A time-window aggregate (:mod:`cesar.automata.windows`, ``AVG_OVER(Price, 30 MIN, Name)``)
or a function of an event's time (:mod:`cesar.automata.timeparts`, ``HOUR(t1)``) is read in
a query as a call; the compiler rewrites it to an attribute of one event, named as the call
(:func:`derived_call`), and the streams' schemas gain it (:func:`extended`).  Everything
after — typing, DNF, indices, DAG sharing — sees an ordinary attribute.  The engine keeps
one running state per stream and derived attribute (:func:`state_of`); the literal
evaluators compute each from the whole stream (:func:`enrich_all`).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import Event, StreamSchema, TimeUnit, Value
from cesar.automata.terms import Call, Term
from cesar.automata.timeparts import TIME_FUNCTIONS, TimePart, TimeState, time_call
from cesar.automata.tumbling import TumblingState
from cesar.automata.windows import FUNCTIONS, Window, WindowState, window_call
from cesar.automata.windows import literal as window_literal

Derived = Window | TimePart
"""An attribute the engine adds to an input stream's events: a window, or a time function."""

DERIVING = (*FUNCTIONS, *TIME_FUNCTIONS)
"""The calls that name a derived attribute."""


def derived_call(call: Call, unit: TimeUnit, attr_of: Callable[[Term], Any]) -> tuple[Derived, Any]:
    """The window or time function ``call`` names, and the event whose attribute it becomes.

    ``attr_of(term)`` gives an argument's ``(event, attribute)`` — the event as the caller
    names it (a CEL scope, a pattern variable and index) — or None if it is not one
    attribute.  Raises :class:`~cesar.automata.errors.CelSemanticError` at the call, saying
    the form expected.
    """
    if call.name in TIME_FUNCTIONS:
        return time_call(call, unit, attr_of)
    return window_call(call, unit, attr_of)


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
            summed = w.aggregate in ("AVG", "SUM")
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


def check_inputs(pairs: Iterable[tuple[str, Derived]], inputs: Container[str]) -> None:
    """Raise :class:`~cesar.automata.errors.CelSemanticError` at the first derived attribute
    of ``pairs`` (a compiled query's ``windows``) over a stream not in ``inputs``: one a
    query publishes.

    The engine takes windows and time functions as an epoch's input events come in, before
    any query of the epoch publishes, so a published stream has none; the error says what to
    write instead.
    """
    for stream, derived in pairs:
        if stream not in inputs:
            raise CelSemanticError(not_an_input(derived, stream), derived.pos)


def not_an_input(derived: Derived, stream: str) -> str:
    """Why ``derived`` cannot read ``stream``, a stream a query publishes (the one reason the
    compile side and the engine give)."""
    return (
        f"{derived.name} reads {stream}, a stream a query publishes: windows and time "
        "functions read input streams only (the engine takes them as an epoch's input "
        "events come in, before any query publishes); read the input stream it comes "
        f"from, or have the query publishing {stream} SELECT the value AS a name"
    )


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


def literal(derived: Derived, event: Event, stream: Sequence[Event]) -> Value:
    """The derived attribute's value at ``event`` from the whole ``stream``, by its
    definition."""
    if isinstance(derived, TimePart):
        return derived.of(event)
    return window_literal(derived, event, stream)


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
            e.with_values([(w.name, literal(w, e, events)) for w in mine]) if mine else e
            for e in events
        ]
    return out


DerivedState = WindowState | TumblingState | TimeState
"""The engine's running state of a derived attribute."""


def state_of(derived: Derived, limit: int | None) -> DerivedState:
    """A fresh running state computing ``derived``."""
    if isinstance(derived, TimePart):
        return TimeState(derived)
    if derived.tumbling:
        return TumblingState(derived, limit)
    return WindowState(derived, limit)
