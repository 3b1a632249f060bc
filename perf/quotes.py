"""Stock events for the benchmarks: one-minute bars from a file, or a seeded random walk.

The benchmarks read the one-minute quotes (``symbol,ts,open,high,low,close,volume``)
as ``Stock(Name, Price, Volume)`` with the bar's close as the price, one event
per bar, time in minutes since the Unix epoch (the bundled sample uses the
same clock).  :func:`walk_events` is the original Cayuga engine's workload
instead: ``names`` stocks starting at 100, each quote a step of ±1 % at most.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from cesar.automata.schema import Event, Value, parse_stream_spec
from cesar.examples import STOCKS_SAMPLE
from cesar.server.wire.eventfile import read_events

STOCK_SPEC = "Stock(Name:string,Price:float,Volume:int)[min]"
"""The schema of the quotes."""


def minute_events(path: Path, limit: int | None = None) -> list[Event]:
    """The file's bars as Stock events, in file order; at most ``limit`` of them."""
    out = []
    with open(path) as handle:
        next(handle)
        for line in handle:
            symbol, ts, _open, _high, _low, close, volume = line.rstrip("\n").split(",")
            minute = int(datetime.fromisoformat(ts).timestamp()) // 60
            values: dict[str, Value] = {
                "Name": symbol,
                "Price": float(close),
                "Volume": int(volume),
            }
            out.append(Event.of("Stock", minute, minute, values))
            if limit is not None and len(out) == limit:
                break
    return out


def quote_events(path: Path | None, limit: int) -> list[Event]:
    """At most ``limit`` quotes: the file's bars (:func:`minute_events`), or without a file
    the bundled sample's (the same ``Stock`` events)."""
    if path is not None:
        return minute_events(path, limit)
    schema = parse_stream_spec(STOCK_SPEC)
    with open(STOCKS_SAMPLE) as handle:
        return read_events(handle, str(STOCKS_SAMPLE), {"Stock": schema}).events[:limit]


def walk_events(count: int, names: int = 100, seed: int = 1) -> list[Event]:
    """``count`` quotes of ``names`` random-walk stocks (``S0``…), one round of names a minute."""
    rng = random.Random(seed)
    prices = [100.0] * names
    out = []
    for number in range(count):
        stock = number % names
        prices[stock] = round(prices[stock] * (1 + rng.uniform(-0.01, 0.01)), 2)
        values: dict[str, Value] = {"Name": f"S{stock}", "Price": prices[stock], "Volume": 100}
        out.append(Event.of("Stock", number // names, number // names, values))
    return out


def first_prices(events: Iterable[Event]) -> dict[str, float]:
    """Each ticker's first price in ``events`` (the benchmarks draw their constants near it).

    >>> first_prices([Event.of("Stock", 1, 1, {"Name": "A", "Price": 2.0, "Volume": 1})])
    {'A': 2.0}
    """
    first: dict[str, float] = {}
    for event in events:
        values = dict(event.values)
        first.setdefault(str(values["Name"]), float(values["Price"]))
    return first
