"""Families of subscriptions: many of one shape with their own constants, on one-minute quotes.

A pub/sub service's subscriptions come from a few shapes with different
constants (a ticker, a threshold, a percentage, a window).  The merged DAG
shares a node only where subscriptions are equal, so each member of a family
keeps its own partial matches; this benchmark measures what that costs, with
the engine's merging on and off in one run, and checks that both give every
subscription the same alerts.  The families (``c``, ``k``, ``n`` and ``W``
drawn per subscription from ``--seed``; ``T`` one of the file's tickers):

* ``rise``: a quote of ``T`` above ``c``, then the first later quote of it
  that is higher, within ``W`` minutes::

      FILTER{Name = 'T' AND Price > c} Stock
        NEXT{$1.Name = $2.Name AND $2.Price > $1.Price AND DUR <= W} Stock

* ``rise_all``: the same, every later quote of ``T`` within ``W`` minutes
  while each stays above the first (a FOLD run: one alert per step);
* ``drop``: the next quote of the same stock at least ``k`` % lower (any stock);
* ``run``: ``n`` rises in a row of the same stock (a FOLD run, ``n`` in 2–6);
* ``cayuga``: the original Cayuga engine's own workload, ``c`` uniform in
  80–120 and no window, meant for ``--walk`` (100 random-walk stocks)::

      FILTER{Name = 'T' AND Price > c}(Stock)
        NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock

Run::

    python -m cesar.perf.families --data QUOTES.csv --events 20000 --queries 1000 --json out.json
    python -m cesar.perf.families --walk --families cayuga --queries 1000 10000
    python -m cesar.perf.families --smoke      # the bundled sample, 20 subscriptions per family

Output: one JSON record per (family, engine) with events/s and the engine's
deterministic counters, and per family ``outputs_agree`` and the ratio of
merged to unmerged events/s.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from cesar.automata.schema import Event, epochs, parse_stream_spec
from cesar.examples import STOCKS_SAMPLE
from cesar.perf.quotes import first_prices, minute_events, walk_events
from cesar.perf.report import engine_figures, subscribed
from cesar.server.engine.matches import Match, expand
from cesar.server.host.collector import tune_collector
from cesar.server.wire.eventfile import read_events

STOCK = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")
ENGINES = ("engine", "nomerge")


def _threshold_window(rng: random.Random, price: float) -> tuple[float, int]:
    """A threshold within 3 % of ``price`` and a window of 2 to 10 minutes."""
    return round(price * rng.uniform(0.97, 1.03), 2), rng.randint(2, 10)


def _rise(rng: random.Random, ticker: str, price: float) -> str:
    c, w = _threshold_window(rng, price)
    return (
        f"FILTER{{Name = '{ticker}' AND Price > {c}}} Stock "
        f"NEXT{{$1.Name = $2.Name AND $2.Price > $1.Price AND DUR <= {w}}} Stock"
    )


def _rise_all(rng: random.Random, ticker: str, price: float) -> str:
    c, w = _threshold_window(rng, price)
    return (
        f"(FILTER{{Name = '{ticker}' AND Price > {c}}} Stock) "
        f"FOLD{{$2.Name = $.Name AND DUR <= {w}, $2.Price > $1.Price, }} Stock"
    )


def _drop(rng: random.Random, ticker: str, price: float) -> str:
    k = round(1 - rng.uniform(0.001, 0.01), 4)
    return (
        f"FILTER{{After < {k} * Before}} "
        "(SELECT Name, Price_1 AS Before, Price AS After FROM Stock NEXT{$1.Name = $2.Name} Stock)"
    )


def _run(rng: random.Random, ticker: str, price: float) -> str:
    n = rng.randint(2, 6)
    return (
        f"FILTER{{Quotes >= {n}}} ((SELECT *, 1 AS Quotes FROM Stock) "
        "FOLD{$2.Name = $.Name, $2.Price > $.Price, $.Quotes + 1 AS Quotes} Stock)"
    )


def _cayuga(rng: random.Random, ticker: str, price: float) -> str:
    c = round(rng.uniform(80, 120), 2)
    return (
        f"FILTER{{Name = '{ticker}' AND Price > {c}}}(Stock) "
        "NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock"
    )


FAMILIES: dict[str, Callable[[random.Random, str, float], str]] = {
    "rise": _rise,
    "rise_all": _rise_all,
    "drop": _drop,
    "run": _run,
    "cayuga": _cayuga,
}


def family_queries(family: str, count: int, events: Sequence[Event], seed: int) -> list[str]:
    """``count`` members of ``family``, constants drawn around the quotes' own prices."""
    rng = random.Random(f"{family}:{seed}")
    first = first_prices(events)
    tickers = sorted(first)
    texts = []
    for _ in range(count):
        ticker = rng.choice(tickers)
        texts.append(FAMILIES[family](rng, ticker, first[ticker]))
    return texts


def run_family(
    engine_name: str, texts: Sequence[str], events: Sequence[Event]
) -> dict[str, object]:
    """Subscribe ``texts`` to a fresh engine, process ``events``; figures and an output digest.

    The engine's output is kept as it comes (a match shared by a family is one reference
    naming its subscriptions, :meth:`Engine.process_matches`) and copied into one event per
    subscription only after the clock stops, for the digest: ``alerts_per_s`` is the rate at
    which the engine delivers alerts to a consumer in the process.
    """
    engine = subscribed(engine_name, texts, STOCK)
    made: list[Event | Match] = []
    tick = time.perf_counter()
    for epoch in epochs(events):
        made.extend(engine.process_matches(epoch))
    seconds = time.perf_counter() - tick
    outputs = expand(made)
    return {
        **engine_figures(engine_name, engine, len(texts), events, outputs, seconds),
        "alerts_per_s": round(len(outputs) / seconds) if seconds else None,
        "spawned": engine.counters.spawned,
        "collected": engine.counters.collected,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.families", description=__doc__)
    parser.add_argument("--data", type=Path, help="one-minute quotes CSV (default: the sample)")
    parser.add_argument("--events", type=int, default=20_000, help="quotes read from --data")
    parser.add_argument("--queries", type=int, nargs="+", default=[1_000], help="per family")
    parser.add_argument("--walk", action="store_true", help="100 random-walk stocks, not --data")
    parser.add_argument(
        "--families",
        nargs="+",
        choices=sorted(FAMILIES),
        default=[f for f in FAMILIES if f != "cayuga"],
        help="default: every family but cayuga (meant for --walk)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="also write the records here")
    parser.add_argument("--smoke", action="store_true", help="the sample, 20 per family (CI)")
    args = parser.parse_args(argv)
    tune_collector()  # as the server's shards run the engine
    if args.smoke:
        args.data, args.queries = None, [20]
        args.events = min(args.events, 5_000)
    if args.walk:
        events = walk_events(args.events, seed=args.seed)
    elif args.data is None:
        with open(STOCKS_SAMPLE) as handle:
            events = read_events(handle, str(STOCKS_SAMPLE), {"Stock": STOCK}).events
    else:
        events = minute_events(args.data, args.events)
    records: list[dict[str, object]] = []
    summary: dict[str, object] = {"events": len(events), "records": records}
    for count in args.queries:
        for family in args.families:
            texts = family_queries(family, count, events, args.seed)
            mine = [{"family": family, **run_family(name, texts, events)} for name in ENGINES]
            for record in mine:
                print(json.dumps(record), file=sys.stderr, flush=True)
            records.extend(mine)
            merged, unmerged = mine
            summary[f"{family}_{count}_outputs_agree"] = merged["digest"] == unmerged["digest"]
            fast, slow = merged["events_per_s"], unmerged["events_per_s"]
            if isinstance(fast, float) and isinstance(slow, float) and slow > 0:
                summary[f"{family}_{count}_merged_vs_unmerged"] = round(fast / slow, 2)
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text)
    agree = all(v for k, v in summary.items() if k.endswith("_outputs_agree"))
    return 0 if agree else 1


if __name__ == "__main__":
    raise SystemExit(main())
