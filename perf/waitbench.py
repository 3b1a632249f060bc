"""Instances waiting by threshold: the load test's queries in one engine, with and without.

In the load test's ``stock`` workload (:mod:`cesar.perf.loadwork`) 1 % of the
subscriptions wait, after a quote of one stock, for another stock to rise
above their own factor of its price (``$2.Price > r * $1.Price``); with
``r`` up to 1.2 many never do, so the partial matches pile up as the stream
goes on.  Filed by group only, every quote of the awaited stock looks at all
of them; waiting by threshold (:mod:`cesar.index.thresholds`) it looks only at
those it completes.

Two engines (``EngineOptions.waiting`` on and off) get the same subscriptions
and the same epochs, processed in turn ``--chunk`` epochs at a time in one run
(the machine is noisy: compare within the run).  Per chunk: events per second
of each and their ratio, live instances, and the deterministic counters
(instances touched per event); the two engines' alerts must agree chunk by
chunk.

    python -m cesar.perf.waitbench --subscriptions 50000 --epochs 600
    python -m cesar.perf.waitbench --smoke
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cesar.automata.compiler import compile_query
from cesar.perf.loadwork import Workload, input_schema
from cesar.perf.report import machine, now, write_json
from cesar.server.engine.engine import Engine, EngineOptions

MODES = {"waiting": EngineOptions(), "by group": EngineOptions(waiting=False)}


def run(subscriptions: int, epochs: int, epoch_size: int, chunk: int, seed: int) -> dict[str, Any]:
    """Subscribe both engines, then process the epochs chunk by chunk in turn."""
    work = Workload("stock", seed=seed)
    schemas = {"Stock": input_schema(work)}
    engines = {mode: Engine(options) for mode, options in MODES.items()}
    started = time.perf_counter()
    for number in range(subscriptions):
        query = work.query(number)
        automata = compile_query(query.text, schemas, query.name).automata
        for engine in engines.values():
            engine.subscribe(query.name, automata)
    subscribe_seconds = time.perf_counter() - started
    chunks: list[dict[str, Any]] = []
    agree = True
    for first in range(0, epochs, chunk):
        batch = [work.epoch(t, epoch_size) for t in range(first, min(first + chunk, epochs))]
        events = sum(len(epoch) for epoch in batch)
        record: dict[str, Any] = {"epochs": first + len(batch)}
        outputs = []
        for mode, engine in engines.items():
            touched = engine.counters.instances_touched
            out: Counter[Any] = Counter()
            clock = time.perf_counter()
            for epoch in batch:
                out.update((e.stream, e.t0, e.t1, e.values) for e in engine.process(epoch))
            seconds = time.perf_counter() - clock
            outputs.append(out)
            record[mode] = {
                "events_per_s": round(events / seconds),
                "touched_per_event": round(
                    (engine.counters.instances_touched - touched) / events, 2
                ),
                "instances": len(engine.state.instances),
                "alerts": sum(out.values()),
            }
        record["ratio"] = round(
            record["waiting"]["events_per_s"] / record["by group"]["events_per_s"], 2
        )
        agree = agree and outputs[0] == outputs[1]
        chunks.append(record)
        print(
            f"epoch {record['epochs']:>5}: waiting {record['waiting']['events_per_s']:>6} ev/s, "
            f"by group {record['by group']['events_per_s']:>6} ev/s ({record['ratio']}x), "
            f"{record['waiting']['instances']} instances",
            file=sys.stderr,
        )
    return {
        "benchmark": "waitbench",
        "machine": machine(),
        "date": now(),
        "subscriptions": subscriptions,
        "epochs": epochs,
        "epoch_size": epoch_size,
        "subscribe_seconds": round(subscribe_seconds, 1),
        "alerts_agree": agree,
        "chunks": chunks,
        "last_ratio": chunks[-1]["ratio"] if chunks else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=50_000)
    parser.add_argument("--epochs", type=int, default=600)
    parser.add_argument("--epoch-size", type=int, default=200, help="simultaneous quotes")
    parser.add_argument("--chunk", type=int, default=100, help="epochs per timed chunk")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--smoke", action="store_true", help="1,000 subscriptions, 40 epochs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.subscriptions, args.epochs, args.chunk = 1_000, 40, 20
    result = run(args.subscriptions, args.epochs, args.epoch_size, args.chunk, args.seed)
    if args.json:
        write_json(args.json, result)
    print(f"alerts agree: {result['alerts_agree']}; last chunk {result['last_ratio']}x")
    return 0 if result["alerts_agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
