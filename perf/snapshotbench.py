"""A shard's checkpoint and restore at scale: shared partial matches saved as masks or listed.

The load test's ``stock`` workload (:mod:`cesar.perf.loadwork`) in one engine,
as one shard of the 100K load test holds it: many subscriptions share each
node, so one partial match stands for many subscriptions' runs.  After
``--epochs`` epochs the run state is taken (:func:`~cesar.server.engine.snapshot.capture`,
the pause a checkpoint puts on the shard), written as a snapshot file's bytes
(:func:`cesar.server.host.snapshots.encode`), read back and restored into an
engine rebuilt from the same subscriptions (a restart).  The same run state
is also written and restored in the shape snapshots had before shared
partial matches were saved as masks — every member listed per instance —
so the ratio of the two is measured in one run.  Both restored engines must
hold the live instances of the original and make its alerts over the next
epochs.

    python -m cesar.perf.snapshotbench --subscriptions 50000 --epochs 1500
    python -m cesar.perf.snapshotbench --smoke
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cesar.automata.compiler import CompiledQuery, compile_query
from cesar.perf.loadwork import Workload, input_schema
from cesar.perf.report import machine, now, write_json
from cesar.server.engine.engine import Engine
from cesar.server.engine.snapshot import RunSnapshot, capture, prepare, restore
from cesar.server.host import snapshots

CHECK_EPOCHS = 20
"""Epochs after the restore whose alerts the restored engines must share with the original."""


def restart(queries: list[CompiledQuery], blob: bytes) -> tuple[Engine, dict[str, float]]:
    """An engine rebuilt from ``queries`` and the snapshot ``blob``; seconds of each step."""
    clock = time.perf_counter()
    saved = RunSnapshot.from_data(snapshots.decode(blob, 1))
    decoded = time.perf_counter()
    engine = Engine()
    prepare(engine, saved)
    for query in queries:
        engine.subscribe(query.name, query.automata, since=saved.since[query.name])
    subscribed = time.perf_counter()
    restore(engine, saved)
    restored = time.perf_counter()
    return engine, {
        "decode_s": round(decoded - clock, 3),
        "restore_s": round(restored - subscribed, 3),
    }


def run(subscriptions: int, epochs: int, epoch_size: int, seed: int) -> dict[str, Any]:
    """Build, run, capture both ways, restart both ways, check (module docstring)."""
    work = Workload("stock", seed=seed)
    schemas = {"Stock": input_schema(work)}
    queries = [
        compile_query(q.text, schemas, q.name) for q in map(work.query, range(subscriptions))
    ]
    engine = Engine()
    for query in queries:
        engine.subscribe(query.name, query.automata)
    for t in range(epochs):
        engine.process(work.epoch(t, epoch_size))
    clock = time.perf_counter()
    saved = capture(engine)
    captured = time.perf_counter() - clock
    clock = time.perf_counter()
    shapes = {"masks": saved, "listed": saved.spelled_out()}
    spelled = time.perf_counter() - clock
    result: dict[str, Any] = {
        "benchmark": "snapshotbench",
        "machine": machine(),
        "date": now(),
        "subscriptions": subscriptions,
        "epochs": epochs,
        "epoch_size": epoch_size,
        "instances": len(engine.state.instances),
        "members": sum(len(saved.members(i)) for i in saved.instances),
        "capture_s": round(captured, 3),
        "spell_out_s": round(spelled, 3),
    }
    later = [work.epoch(t, epoch_size) for t in range(epochs, epochs + CHECK_EPOCHS)]
    restarted = {}
    for name, shape in shapes.items():
        clock = time.perf_counter()
        blob = snapshots.encode(shape.to_data(), 1)
        encoded = time.perf_counter() - clock
        again, seconds = restart(queries, blob)
        restarted[name] = again
        result[name] = {"bytes": len(blob), "encode_s": round(encoded, 3), **seconds}
        result[name]["instances"] = len(again.state.instances)
    outputs = []
    for each in (engine, *restarted.values()):
        outputs.append(Counter(e for epoch in later for e in each.process(epoch)))
    result["alerts_after"] = sum(outputs[0].values())
    result["restored_alike"] = all(out == outputs[0] for out in outputs[1:])
    for key in ("bytes", "encode_s", "restore_s"):
        masks, spelled = result["masks"][key], result["listed"][key]
        result[f"listed_over_masks_{key}"] = round(spelled / masks, 1) if masks else None
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=50_000)
    parser.add_argument("--epochs", type=int, default=1_500)
    parser.add_argument("--epoch-size", type=int, default=200, help="simultaneous quotes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--smoke", action="store_true", help="2,000 subscriptions, 100 epochs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.subscriptions, args.epochs = 2_000, 100
    result = run(args.subscriptions, args.epochs, args.epoch_size, args.seed)
    if args.json:
        write_json(args.json, result)
    masks, spelled = result["masks"], result["listed"]
    print(
        f"{result['instances']} instances, {result['members']} members; capture "
        f"{result['capture_s']} s; masks: {masks['bytes']} B, restore {masks['restore_s']} s; "
        f"listed: {spelled['bytes']} B, restore {spelled['restore_s']} s; "
        f"restored alike: {result['restored_alike']}"
    )
    return 0 if result["restored_alike"] else 1


if __name__ == "__main__":
    sys.exit(main())
