"""Double-Top on real daily closes: the μ formulation against resubscription (Section 5.2.2).

    python -m cesar.perf.doubletop                      # 27 stocks 2000-2017, smoothing 1, 5 and 20
    python -m cesar.perf.doubletop --smooth 5 --json out.json
    python -m cesar.perf.doubletop --smoke              # the bundled 4 stocks x 1,000 days (CI)

The pattern (the paper's variant, made exact): on one stock's series of
closes ``p``, indices ``i < j < k < l < m`` such that

* ``i`` is a local minimum (``p[i-1] > p[i] < p[i+1]``) with price A;
* ``p`` rises strictly from ``i`` to a local maximum ``j`` (B ≥ 1.2 A), falls
  strictly to a local minimum ``k`` (C within 10 % of A), rises strictly to a
  local maximum ``l`` (D within 10 % of B) and falls strictly to a local
  minimum ``m`` (E ≤ A);
* every one of those four legs is at least two quotes long.

One match is an event ``[i, m + 1]`` (the day after E confirms it) with
``Name, A, B, C, D, E``.  The last condition is what makes the two
formulations agree exactly: the resubscription formulation chains extrema
with NEXT, which only pairs an extremum with one that *starts* after it
ends, and an extremum event spans two quotes (``[k, k + 1]``: the extremum
and the quote that confirms it).  So a one-quote leg cannot be chained, and
the μ formulation says so with a step count.  Each quote carries ``Prev``,
the previous close of the same stock (as quote feeds do), so an extremum
needs only two quotes; with three, legs of two would be lost too, and a
chain could skip over a short wiggle and match a non-monotonic path.

* **μ formulation** (``MU``): one query, four FOLDs (one per leg, each
  counting its steps) and a final NEXT for the quote that confirms E.
* **Resubscription** (``EXTREMA`` + ``RESUBSCRIBED``): a query publishes the
  stream of local extrema (a UNION of minima and maxima, each from two
  consecutive quotes, and *flats*, a quote equal to the one before it), and a
  second one, linear in that stream, chains five of them with NEXT and checks
  the prices.  Flats (Kind 2) never take part in a match; they are there to
  stop a chain: NEXT cannot see an extremum that starts where the last one
  ends (a one-quote leg), so without them a chain could pass over it and over
  a flat top after it, and pair extrema whose path between is not monotonic.
  Every turn of the path after a skipped extremum is a strict extremum or a
  flat that NEXT does see, and no flat lies inside a strictly monotonic leg.

``--smooth K`` replaces each close by its running mean over the last K
closes of the stock (the paper's smoothing: fewer extrema).  Both run on the
same engine in one process, on the same events; the matches must be equal,
and equal to :func:`scan`, a direct reading of the definition above.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from cesar.automata.schema import Event, parse_stream_spec
from cesar.examples import DAILY_SAMPLE
from cesar.perf.report import stamped, write_json
from cesar.server.engine.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
DAILY = ROOT.parent / "shared" / "data" / "stocks" / "daily_27_us_stocks_2000-01-03_2017-11-10.csv"
SAMPLE = DAILY_SAMPLE
QUOTE = "Quote(Name:string,Price:float,Prev:float)[day]"

MU = """
SELECT Name, A_1 AS A, B_1 AS B, C_1 AS C, D_1 AS D, Price_1 AS E
FROM FILTER{Price > Price_1} (
  (SELECT Name, Price, Prev, A, B, C, D FROM FILTER{Down2 >= 2 AND Price <= A} (
    (SELECT Name, Price, Prev, A, B, C, Price AS D, 0 AS Down2 FROM
      FILTER{Up2 >= 2 AND Price >= 0.9 * B AND Price <= 1.1 * B} (
        (SELECT Name, Price, Prev, A, B, Price AS C, 0 AS Up2 FROM
          FILTER{Down1 >= 2 AND Price >= 0.9 * A AND Price <= 1.1 * A} (
            (SELECT Name, Price, Prev, A, Price AS B, 0 AS Down1 FROM
              FILTER{Up1 >= 2 AND Price >= 1.2 * A} (
                (SELECT Name, Price, Prev, Price AS A, 0 AS Up1 FROM FILTER{Prev > Price} Quote)
                FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Up1 + 1 AS Up1} Quote))
            FOLD{$2.Name = $.Name, $2.Price < $.Price, $.Down1 + 1 AS Down1} Quote))
        FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Up2 + 1 AS Up2} Quote))
    FOLD{$2.Name = $.Name, $2.Price < $.Price, $.Down2 + 1 AS Down2} Quote))
  NEXT{$1.Name = $2.Name} Quote)
PUBLISH DoubleTopMu
"""

EXTREMA = """
SELECT Name, Price_1 AS Price, 0 AS Kind
  FROM FILTER{Prev_1 > Price_1 AND Price > Price_1} (Quote NEXT{$1.Name = $2.Name} Quote)
UNION
SELECT Name, Price_1 AS Price, 1 AS Kind
  FROM FILTER{Prev_1 < Price_1 AND Price < Price_1} (Quote NEXT{$1.Name = $2.Name} Quote)
UNION
SELECT Name, Price, 2 AS Kind FROM FILTER{Prev = Price} Quote
PUBLISH Extrema
"""

RESUBSCRIBED = """
SELECT Name, A_1 AS A, B_1 AS B, C_1 AS C, D_1 AS D, Price AS E
FROM FILTER{Kind = 0 AND Price <= A_1} (
  (SELECT Name, A_1 AS A, B_1 AS B, C_1 AS C, Price AS D
   FROM FILTER{Kind = 1 AND Price >= 0.9 * B_1 AND Price <= 1.1 * B_1} (
     (SELECT Name, A_1 AS A, B_1 AS B, Price AS C
      FROM FILTER{Kind = 0 AND Price >= 0.9 * A_1 AND Price <= 1.1 * A_1} (
        (SELECT Name, Price_1 AS A, Price AS B
         FROM FILTER{Kind_1 = 0 AND Kind = 1 AND Price >= 1.2 * Price_1}
           (Extrema NEXT{$1.Name = $2.Name} Extrema))
        NEXT{$1.Name = $2.Name} Extrema))
     NEXT{$1.Name = $2.Name} Extrema))
  NEXT{$1.Name = $2.Name} Extrema)
PUBLISH DoubleTopResubscribed
"""

FORMULATIONS = {"mu": [("mu", MU)], "resubscription": [("x", EXTREMA), ("r", RESUBSCRIBED)]}
Match = tuple[str, int, int, float, float, float, float, float]


def load(path: Path, smooth: int) -> list[Event]:
    """Quotes (day number since 2000-01-03, running mean over ``smooth`` closes, Prev).

    The first quote of each stock has no Prev and is dropped.
    """
    base = datetime.date(2000, 1, 3).toordinal()
    windows: dict[str, deque[float]] = {}
    previous: dict[str, float] = {}
    out = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            name = row["symbol"]
            window = windows.setdefault(name, deque(maxlen=smooth))
            window.append(float(row["close"]))
            price = round(sum(window) / len(window), 4)
            if name in previous:
                day = datetime.date.fromisoformat(row["date"]).toordinal() - base
                values = {"Name": name, "Price": price, "Prev": previous[name]}
                out.append(Event.of("Quote", day, day, values))
            previous[name] = price
    return out


def matches(events: Sequence[Event]) -> list[Match]:
    """Sorted (name, t0, t1, A, B, C, D, E) of DoubleTop events."""
    out = []
    for e in events:
        v = dict(e.values)
        a, b, c, d, e_ = (float(v[x]) for x in "ABCDE")
        out.append((str(v["Name"]), e.t0, e.t1, a, b, c, d, e_))
    return sorted(out)


def scan(events: Sequence[Event]) -> list[Match]:
    """The definition in the module docstring, read directly (the test oracle)."""
    series: dict[str, list[tuple[int, float, float]]] = {}
    for e in events:
        v = dict(e.values)
        quote = (e.t1, float(v["Price"]), float(v["Prev"]))
        series.setdefault(str(v["Name"]), []).append(quote)
    out: list[Match] = []
    for name, quotes in series.items():
        price = [p for _, p, _ in quotes]
        kind: dict[int, int] = {}
        for x in range(len(quotes) - 1):
            before, here, after = quotes[x][2], price[x], price[x + 1]
            if before > here < after:
                kind[x] = 0
            elif before < here > after:
                kind[x] = 1

        for i in (x for x, k in kind.items() if k == 0):
            a = price[i]
            for j in _legs(price, kind, i, True):
                b = price[j]
                if b < 1.2 * a:
                    continue
                for k in _legs(price, kind, j, False):
                    c = price[k]
                    if not 0.9 * a <= c <= 1.1 * a:
                        continue
                    for l_ in _legs(price, kind, k, True):
                        d = price[l_]
                        if not 0.9 * b <= d <= 1.1 * b:
                            continue
                        for m in _legs(price, kind, l_, False):
                            if price[m] <= a:
                                t0, t1 = quotes[i][0], quotes[m + 1][0]
                                out.append((name, t0, t1, a, b, c, d, price[m]))
    return sorted(out)


def _legs(price: list[float], kind: dict[int, int], start: int, up: bool) -> list[int]:
    """Ends of the strict runs from ``start`` that are two or more steps long and extrema."""
    ends, x = [], start
    while x + 1 < len(price) and price[x + 1] != price[x] and (price[x + 1] > price[x]) == up:
        x += 1
        if x - start >= 2 and kind.get(x) == (1 if up else 0):
            ends.append(x)
    return ends


def run(formulation: str, events: list[Event]) -> tuple[list[Match], float]:
    """(matches, seconds) of one formulation on the merged-DAG engine."""
    program = Workload.build([parse_stream_spec(QUOTE)], FORMULATIONS[formulation])
    tick = time.perf_counter()
    published = program.run(events, engine="engine")
    seconds = time.perf_counter() - tick
    final = program.queries[-1].name
    return matches([e for e in published if e.stream == final]), seconds


def measure(events: list[Event], smooth: int) -> dict[str, object]:
    """Both formulations on ``events``: matches (checked equal) and throughput."""
    record: dict[str, object] = {"smooth": smooth, "events": len(events)}
    found, rate = {}, {}
    for formulation in FORMULATIONS:
        found[formulation], seconds = run(formulation, events)
        rate[formulation] = len(events) / seconds
        record[f"{formulation}_events_per_s"] = round(rate[formulation], 1)
    record["matches"] = len(found["mu"])
    record["same_matches"] = found["mu"] == found["resubscription"]
    record["mu_over_resubscription"] = round(rate["mu"] / rate["resubscription"], 2)
    return record


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DAILY, help="the daily CSV")
    parser.add_argument("--smooth", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the bundled sample (4 stocks, 1,000 days), smoothing 3",
    )
    parser.add_argument("--json", type=Path, help="write the records here too")
    args = parser.parse_args(argv)
    data, smooths = (SAMPLE, [3]) if args.smoke else (args.data, args.smooth)
    records = []
    for smooth in smooths:
        events = load(data, smooth)
        record = measure(events, smooth)
        record["scan_agrees"] = run("mu", events)[0] == scan(events)
        records.append(record)
        print(json.dumps(record), flush=True)
    if args.json:
        write_json(args.json, stamped(records))
    agree = all(r["same_matches"] and r["scan_agrees"] for r in records)
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
