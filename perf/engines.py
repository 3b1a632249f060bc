"""Event automata against the reference evaluator on the same queries and events, in one run.

Both engines evaluate the same program over the same events; the benchmark
checks that their outputs agree (a digest of the sorted output multiset) and
reports wall time, events per second, their ratio, and the automata's
deterministic work counters.

    python -m cesar.perf.engines                      # the demo queries over the bundled sample
    python -m cesar.perf.engines --smoke              # the first 300 events (what CI runs)
    python -m cesar.perf.engines --events E.csv --query Q.cel ... --stream SPEC --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from cesar.automata.evaluate import Faults
from cesar.automata.runtime import Runner
from cesar.automata.schema import Event, parse_stream_spec
from cesar.examples import QUERIES, STOCKS_SAMPLE
from cesar.perf.report import machine
from cesar.server.engine.workload import Workload
from cesar.server.wire.eventfile import read_events

DEMO_STREAM = "Stock(Name:string,Price:float,Volume:int)[min]"
SMOKE_EVENTS = 300


def digest(events: Sequence[Event]) -> str:
    """An order-independent fingerprint of an output multiset."""
    lines = sorted(repr((e.stream, e.t0, e.t1, e.values)) for e in events)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


@dataclass
class EngineRun:
    """One engine's run: time, throughput, outputs and (for the automata) work counters."""

    engine: str
    events: int
    seconds: float
    events_per_s: float
    outputs: int
    output_digest: str
    faults: int
    counters: dict[str, int]


def measure(program: Workload, events: list[Event], engine: str) -> EngineRun:
    """Run one engine once over ``events``."""
    faults = Faults()
    start = time.perf_counter()
    if engine == "automaton":
        runner = Runner([a for q in program.queries for a in q.automata], faults)
        outputs = runner.run(events)
        counters: dict[str, int] = asdict(runner.counters)
    else:
        outputs = program.run(events, faults, engine="reference")
        counters = {}
    seconds = time.perf_counter() - start
    return EngineRun(
        engine,
        len(events),
        round(seconds, 4),
        round(len(events) / seconds, 1),
        len(outputs),
        digest(outputs),
        faults.arithmetic,
        counters,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.engines", description=__doc__)
    parser.add_argument("--stream", action="append", metavar="SPEC")
    parser.add_argument("--query", action="append", metavar="FILE.cel")
    parser.add_argument("--events", default=str(STOCKS_SAMPLE))
    parser.add_argument("--limit", type=int, help="use only the first N events")
    parser.add_argument("--smoke", action="store_true", help=f"--limit {SMOKE_EVENTS}")
    parser.add_argument("--json", metavar="OUT", help="also write the records as JSON")
    args = parser.parse_args(argv)
    streams = [parse_stream_spec(spec) for spec in args.stream or [DEMO_STREAM]]
    queries = args.query or sorted(str(p) for p in QUERIES.glob("*.cel"))
    program = Workload.build(streams, [(Path(q).stem, Path(q).read_text()) for q in queries])
    with open(args.events, encoding="utf-8") as handle:
        events = read_events(handle, args.events, program.inputs, sort=True).events
    limit = SMOKE_EVENTS if args.smoke else args.limit
    if limit is not None:
        events = events[:limit]
    records = [measure(program, events, engine) for engine in ("reference", "automaton")]
    reference, automaton = records
    agree = reference.output_digest == automaton.output_digest
    summary = {
        "machine": machine(),
        "queries": [Path(q).name for q in queries],
        "speedup_automaton_over_reference": round(reference.seconds / automaton.seconds, 2),
        "outputs_agree": agree,
        "records": [asdict(record) for record in records],
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    if not agree:
        print("cesar.perf.engines: the engines' outputs differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
