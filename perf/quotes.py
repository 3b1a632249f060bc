"""One-minute stock bars (``symbol,ts,open,high,low,close,volume``) as Stock events.

The benchmarks read the one-minute quotes this way: ``Stock(Name, Price,
Volume)`` with the bar's close as the price, one event per bar, time in
minutes since the Unix epoch (the bundled sample uses the same clock).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from cesar.automata.schema import Event, Value


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
