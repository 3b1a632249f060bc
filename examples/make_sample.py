"""Regenerate examples/stocks_sample.csv from the shared one-minute stock data.

Keeps the regular session (09:31-16:00 New York time) of the first trading day,
2020-10-26, for all six symbols, with the close as Price and t in minutes since
the Unix epoch.  Run: python examples/make_sample.py ../shared/data/stocks
"""

import csv
import sys
from datetime import datetime
from pathlib import Path

SOURCE = "intraday_1min_6_us_stocks_2020-10-26_2021-01-08.csv"


def main(data_dir: str) -> None:
    out = Path(__file__).with_name("stocks_sample.csv")
    with open(Path(data_dir) / SOURCE, newline="") as src, open(out, "w", newline="") as dst:
        writer = csv.writer(dst)
        writer.writerow(["t", "Name", "Price", "Volume"])
        for row in csv.DictReader(src):
            stamp = datetime.fromisoformat(row["ts"])
            if stamp.date().isoformat() != "2020-10-26":
                continue
            if not "09:31" <= stamp.strftime("%H:%M") <= "16:00":
                continue
            minute = int(stamp.timestamp()) // 60
            writer.writerow([minute, row["symbol"], row["close"], row["volume"]])


if __name__ == "__main__":
    main(sys.argv[1])
