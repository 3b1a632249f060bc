"""``synthetic[:RATE]``: a stock-tick generator as a PySpark Python streaming data source.

Row ``i`` is a quote of symbol ``SYMBOLS[i % 6]`` at minute ``i // 6`` (so
the six quotes of a minute are simultaneous events), as a JSON line for the
``Stock(Name:string,Price:float,Volume:int)[min]`` stream.  Prices follow a
smooth deterministic wave with hashed noise, so a row depends only on ``i``:
a restarted feed re-reads exactly the rows of an uncommitted micro-batch.
Offsets are row counts; the reader makes ``RATE`` rows available per second
of wall time (the source may read a clock; the core never does).

>>> tick(7)
'{"stream": "Stock", "t": 1, "Name": "AMZN", "Price": 3265.72, "Volume": 5688}'
"""

from __future__ import annotations

import json
import math
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadLimit

SYMBOLS = ("AAPL", "AMZN", "GOOG", "IBM", "MSFT", "TSLA")
BASE = (114.0, 3200.0, 1600.0, 120.0, 210.0, 420.0)
SPEC = "Stock(Name:string,Price:float,Volume:int)[min]"


def tick(i: int) -> str:
    """The JSON line of row ``i``."""
    symbol = i % len(SYMBOLS)
    minute = i // len(SYMBOLS)
    noise = zlib.crc32(i.to_bytes(8, "little"))
    wave = math.sin(minute / 37 + symbol) * 0.02 + math.sin(minute / 5 + 2 * symbol) * 0.004
    price = round(BASE[symbol] * (1 + wave + (noise % 1000 - 500) / 1e6), 2)
    volume = 1000 + noise % 5000
    return json.dumps(
        {"stream": "Stock", "t": minute, "Name": SYMBOLS[symbol], "Price": price, "Volume": volume}
    )


@dataclass
class Rows(InputPartition):
    """Rows ``[start, end)``."""

    start: int
    end: int


class SyntheticSource(DataSource):
    """The data source; option ``rate`` is rows per second (default 1000)."""

    @classmethod
    def name(cls) -> str:
        return "cesar_synthetic"

    def schema(self) -> str:
        return "value string"

    def streamReader(self, schema: object) -> DataSourceStreamReader:
        return SyntheticReader(float(self.options.get("rate", "1000")))


class SyntheticReader(DataSourceStreamReader):
    """Offsets ``{"row": n}``; ``rate`` new rows become available per second."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.anchor: tuple[float, int] | None = None

    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        now = time.monotonic()
        if self.anchor is None:
            self.anchor = (now, start["row"])
        since, first = self.anchor
        return {"row": max(start["row"], first + int((now - since) * self.rate))}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[Rows]:
        middle = (start["row"] + end["row"]) // 2
        return [Rows(start["row"], middle), Rows(middle, end["row"])]

    def read(self, partition: InputPartition) -> Iterator[tuple[str]]:
        assert isinstance(partition, Rows)
        for i in range(partition.start, partition.end):
            yield (tick(i),)
