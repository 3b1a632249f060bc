"""The bundled sample data and queries (package data): the demo's, the docs' and the benchmarks'.

* :data:`STOCKS_SAMPLE`: one trading day of one-minute quotes of six stocks (2,340 rows), of
  the stream :data:`STOCKS_SAMPLE_SPEC`;
* :data:`DAILY_SAMPLE`: 1,000 trading days of daily rows of four stocks;
* :data:`QUERIES`: the folder of the example CEL queries.
"""

from pathlib import Path

HERE = Path(__file__).parent
STOCKS_SAMPLE = HERE / "stocks_sample.csv"
STOCKS_SAMPLE_SPEC = "Stock(Name:string,Price:float,Volume:int)[min]"
DAILY_SAMPLE = HERE / "stocks_daily_sample.csv"
QUERIES = HERE / "queries"
