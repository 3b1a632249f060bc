"""The Cayuga paper's running example (Section 3.1): Query 7 in CEL and Table 1's events."""

QUERY_7 = """
-- Query 7: a monotonic decrease of at least 10 minutes starting at a large trade,
-- then the next quote of the same stock 5% above the bottom price.
SELECT company, maxP_1 AS maxP, minP_1 AS minP, finalP FROM
FILTER{finalP > 1.05 * minP_1} (
  (SELECT company, maxP, minP FROM FILTER{DUR >= 10 MIN} (
     (SELECT Name AS company, Price AS maxP, Price AS minP FROM FILTER{Volume > 10000} Stock)
     FOLD{$2.company = $.company, $2.minP < $.minP, }
     (SELECT Name AS company, Price AS minP FROM Stock)))
  NEXT{$1.company = $2.company}
  (SELECT Name AS company, Price AS finalP FROM Stock))
PUBLISH Query7
"""

STOCK_VOL = "Stock(Name:string,Price:float,Volume:int)[min]"

TABLE_1 = [  # (name, price, volume, hh:mm)
    ("IBM", 90, 15000, "9:10"),
    ("IBM", 85, 7000, "9:15"),
    ("Dell", 40, 11000, "9:17"),
    ("IBM", 81, 8000, "9:21"),
    ("MSFT", 25, 6000, "9:23"),
    ("IBM", 91, 9000, "9:24"),
]


def minutes(clock):
    """Minutes since midnight of an ``hh:mm`` time."""
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


def table_1_events(extra=()):
    """Table 1's quotes (plus ``extra`` rows) as event records with ``t`` in minutes."""
    rows = [*TABLE_1, *extra]
    rows.sort(key=lambda row: minutes(row[3]))
    return [
        {"stream": "Stock", "t": minutes(t), "Name": n, "Price": p, "Volume": v}
        for n, p, v, t in rows
    ]
