"""Regenerate the bundled samples from the shared stock data.

* examples/stocks_sample.csv: the regular session (09:31-16:00 New York time) of
  the first trading day of the one-minute data, 2020-10-26, for all six symbols,
  with the close as Price and t in minutes since the Unix epoch;
* examples/intraday_sample.csv: the same rows as they are in the source (an ISO
  ``ts`` column, open/high/low/close/volume), for ``cesar run --time-column ts``;
* examples/stocks_daily_sample.csv: the daily rows of AXP, CSCO, IBM and MSFT for
  the first 1,000 trading days (2000-01-03 on), unchanged (perf.doubletop --smoke).

Run: python examples/make_sample.py DATA_DIR  (the folder of the full stock CSV files)
"""

import csv
import sys
from datetime import datetime
from pathlib import Path

SOURCE = "intraday_1min_6_us_stocks_2020-10-26_2021-01-08.csv"
DAILY = "daily_27_us_stocks_2000-01-03_2017-11-10.csv"
DAILY_SYMBOLS = {"AXP", "CSCO", "IBM", "MSFT"}


def main(data_dir: str) -> None:
    out = Path(__file__).with_name("stocks_sample.csv")
    raw = Path(__file__).with_name("intraday_sample.csv")
    with (
        open(Path(data_dir) / SOURCE, newline="") as src,
        open(out, "w", newline="") as dst,
        open(raw, "w", newline="") as as_is,
    ):
        reader = csv.DictReader(src)
        writer, copier = csv.writer(dst), csv.writer(as_is, lineterminator="\n")
        writer.writerow(["t", "Name", "Price", "Volume"])
        copier.writerow(reader.fieldnames or [])
        for row in reader:
            stamp = datetime.fromisoformat(row["ts"])
            if stamp.date().isoformat() != "2020-10-26":
                continue
            if not "09:31" <= stamp.strftime("%H:%M") <= "16:00":
                continue
            minute = int(stamp.timestamp()) // 60
            writer.writerow([minute, row["symbol"], row["close"], row["volume"]])
            copier.writerow(row.values())

    daily_out = Path(__file__).with_name("stocks_daily_sample.csv")
    with open(Path(data_dir) / DAILY, newline="") as src, open(daily_out, "w", newline="") as dst:
        rows, writer = csv.reader(src), csv.writer(dst, lineterminator="\n")
        writer.writerow(next(rows))
        dates: list[str] = []
        for line in rows:
            if not dates or dates[-1] != line[1]:
                dates.append(line[1])
                if len(dates) > 1000:
                    break
            if line[0] in DAILY_SYMBOLS:
                writer.writerow(line)


if __name__ == "__main__":
    main(sys.argv[1])
