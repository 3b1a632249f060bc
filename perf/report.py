"""What every benchmark's JSON result carries beside its figures: the machine and the date;
and, for the engine benchmarks, a subscribed engine and the figures of its run."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cesar.automata.compiler import compile_query
from cesar.automata.schema import Event, StreamSchema
from cesar.build import describe
from cesar.server.engine.engine import Engine, EngineOptions
from cesar.server.engine.matches import expand
from cesar.server.engine.workload import ENGINE_MODES


def machine() -> str:
    """Host name, architecture, cores, Python, and the build of cesar this process runs
    (compiled or pure, and why: a figure of the pure engine is not the compiled one's)."""
    return (
        f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}, cesar {describe()}"
    )


def now() -> str:
    """The local date and time, with its zone."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


def stamped(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``records`` with the machine and the date (the noisy machine: compare within one run).

    >>> sorted(stamped([]))
    ['date', 'machine', 'records']
    """
    return {"machine": machine(), "date": now(), "records": records}


def write_json(path: Path, result: dict[str, Any]) -> None:
    """Write ``result`` as indented JSON."""
    path.write_text(json.dumps(result, indent=1) + "\n")


def print_report(report: Mapping[str, Any], path: Path | None) -> None:
    """Print ``report`` as indented JSON, and write the same text to ``path`` when given."""
    text = json.dumps(report, indent=2)
    print(text)
    if path is not None:
        path.write_text(text + "\n")


def in_turns(
    engines: Mapping[str, Engine],
    parts: Sequence[Sequence[Event]],
    chunk: int,
    key: Callable[[Event], Hashable],
) -> tuple[dict[str, float], dict[str, Counter[Hashable]]]:
    """Feed every engine the epochs ``parts``, ``chunk`` epochs at a time in turn (the noisy
    machine: compare within one run): each one's seconds, and its alerts counted by ``key``."""
    seconds = dict.fromkeys(engines, 0.0)
    alerts: dict[str, Counter[Hashable]] = {mode: Counter() for mode in engines}
    for first in range(0, len(parts), chunk):
        batch = parts[first : first + chunk]
        for mode, engine in engines.items():
            clock = time.perf_counter()
            out = [engine.process_matches(epoch) for epoch in batch]
            seconds[mode] += time.perf_counter() - clock
            alerts[mode].update(key(e) for matches in out for e in expand(matches))
    return seconds, alerts


def subscribed(
    engine_name: str,
    texts: Sequence[str],
    schema: StreamSchema,
    options: EngineOptions | None = None,
) -> Engine:
    """A fresh engine of mode ``engine_name`` (or of ``options``) with ``texts`` subscribed,
    ``q0``, ``q1``…"""
    options = options or ENGINE_MODES[engine_name]
    assert options is not None, f"{engine_name} is an engine mode"
    engine = Engine(options)
    for number, text in enumerate(texts):
        compiled = compile_query(text, {schema.name: schema}, f"q{number}")
        engine.subscribe(compiled.name, compiled.automata, None, compiled.pattern)
    return engine


def engine_figures(
    engine_name: str,
    engine: Engine,
    queries: int,
    events: Sequence[Event],
    outputs: Sequence[Event],
    seconds: float,
) -> dict[str, Any]:
    """One engine run's figures: events/s, alerts, an output digest (equal digests: every
    subscription got the same alerts) and the engine's deterministic counters per event."""
    per_subscription = Counter((e.stream, e.t0, e.t1, e.values) for e in outputs)
    lines = sorted(repr(item) for item in per_subscription.items())
    counters = engine.counters
    per_event = max(counters.events, 1)
    return {
        "engine": engine_name,
        "queries": queries,
        "events": len(events),
        "seconds": round(seconds, 3),
        "events_per_s": round(len(events) / seconds, 1) if seconds else None,
        "alerts": len(outputs),
        "digest": hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16],
        "dag_nodes": len(engine.program.dag.nodes),
        "fr_hits_per_event": round(counters.fr_hits / per_event, 2),
        "nodes_touched_per_event": round(counters.nodes_touched / per_event, 2),
        "instances_touched_per_event": round(counters.instances_touched / per_event, 2),
        "spawned_per_event": round(counters.spawned / per_event, 2),
    }
