"""A thousand random patterns from one client: each batch answered within seconds.

In one run: start ``cesar serve`` (2 shards) with two clients in a tokens file, ``loud`` and
``small``.  ``loud`` subscribes ``--patterns`` random valid patterns (:func:`random_pattern`:
SEQ, AND and OR of two to four components over ``S``, ``T`` and ``U``, a third without a
window, some with a negation, none bounded by its conditions) in one SubscribeBatch, then
sends ``--batches`` random PublishBatch requests (:func:`random_batch`: 1–20 events over one
to three instants), one at a time; ``small`` meanwhile publishes one event of its own stream
a request, back to back.  Reported: each loud batch's latency, the small client's, the
engine's steps (each shared one once) per epoch, the subscriptions cut, and how long SIGTERM
took to stop the server.  ``--no-budget`` starts the server with the client and engine
budgets off (the per-subscription ones stay): the "before".

    python -m cesar.perf.fuzzbench                     # 1,000 patterns, 40 batches
    python -m cesar.perf.fuzzbench --smoke             # 100 patterns, 4 batches (CI)
    python -m cesar.perf.fuzzbench --no-budget --json out.json
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from cesar.perf.fairbench import QUERIES, TICK, small_client_beside, summary
from cesar.perf.report import machine, now, print_report
from cesar.perf.serverproc import Server
from cesar.v1 import cesar_pb2 as pb

STREAMS = ("S(k:int,v:int)", "T(k:int,v:int)", "U(k:int)")
TOKENS = "loud-token loud\nsmall-token small\nops-token ops scope=admin\n"
UNPOOLED = ("--max-client-steps-per-epoch", "0", "--max-engine-steps-per-epoch", "0")


def random_pattern(rng: random.Random, number: int) -> str:
    """A random valid pattern publishing ``P<number>``: SEQ, AND or OR of 2–4 components
    over S, T, U (a negation inside a SEQ now and then), some equality and order conditions,
    a window of 2–50 ticks or (a third of them) none.

    >>> random_pattern(random.Random(4), 4)
    'PATTERN AND(S x0, U x1) WHERE x0.k = 1 AND x1.k = 0 WITHIN 50 PUBLISH P4'
    """
    count = rng.randint(2, 4)
    operator = rng.choice(["SEQ", "AND", "OR"])
    parts, bound = [], []
    for j in range(count):
        stream = rng.choice("STU")
        if operator == "SEQ" and 0 < j < count - 1 and rng.random() < 0.15:
            parts.append(f"!({stream} x{j})")
            continue
        parts.append(f"{stream} x{j}")
        bound.append((f"x{j}", stream))
    conditions = []
    if operator != "OR":
        conditions = [f"{v}.k = {rng.randint(0, 5)}" for v, _ in bound if rng.random() < 0.4]
        first, second = bound[0], bound[1]
        if rng.random() < 0.5 and "U" not in (first[1], second[1]):
            conditions.append(f"{second[0]}.v > {first[0]}.v")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    within = "" if rng.random() < 0.33 else f" WITHIN {rng.randint(2, 50)}"
    return f"PATTERN {operator}({', '.join(parts)}){where}{within} PUBLISH P{number}"


def random_batch(rng: random.Random, t: int) -> tuple[list[pb.Event], int]:
    """1–20 random events of S, T and U over one to three instants after ``t``; with the
    last instant (the next batch's ``t``)."""
    events = []
    for _ in range(rng.randint(1, 3)):
        t += rng.randint(1, 3)
        for stream in rng.choices("STU", k=rng.randint(1, 7)):
            attributes = {"k": pb.Value(int_value=rng.randint(0, 5))}
            if stream != "U":
                attributes["v"] = pb.Value(int_value=rng.randint(0, 9))
            events.append(pb.Event(stream=stream, t0=t, t1=t, attributes=attributes))
    return events, t


def shard_counters(conn: Any) -> dict[str, int]:
    """The engine counters summed over the shards."""
    stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
    total: dict[str, int] = {}
    for shard in stats.shards:
        for name, value in shard.counters.items():
            total[name] = total.get(name, 0) + value
    return total


def steps_per_epoch(before: dict[str, int], after: dict[str, int]) -> float:
    """The steps per epoch between two :func:`shard_counters` readings (a batch whose last
    instant stays open may have closed no epoch: counted as one)."""
    return (after["steps"] - before["steps"]) / max(1, after["epochs"] - before["epochs"])


def fuzz(patterns: int, batches: int, pooled: bool, seed: int = 1) -> dict[str, Any]:
    """The measurement (see the module docstring)."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens"
        tokens.write_text(TOKENS)
        streams = [a for spec in (*STREAMS, TICK) for a in ("--stream", spec)]
        extra = () if pooled else UNPOOLED
        server = Server(Path(tmp) / "data", *streams, "--tokens", str(tokens), *extra).start()
        stopped = False
        try:
            loud, small = server.connect("loud-token"), server.connect("small-token")
            ops = server.connect("ops-token")  # the shards' counters
            small.stub.Subscribe(pb.SubscribeRequest(query=QUERIES[2]), metadata=small.metadata)
            queries = [random_pattern(rng, n) for n in range(patterns)]
            began = time.perf_counter()
            request = pb.SubscribeBatchRequest(
                subscriptions=[pb.SubscribeRequest(query=q) for q in queries]
            )
            reply = loud.stub.SubscribeBatch(request, metadata=loud.metadata, timeout=600)
            subscribed = sum(r.HasField("subscription") for r in reply.results)
            subscribe_seconds = time.perf_counter() - began
            loud_seconds, steps = [], []
            t = 0
            with small_client_beside(small, 1) as beside:
                for _ in range(batches):
                    events, t_next = random_batch(rng, t)
                    before = shard_counters(ops)
                    began = time.perf_counter()
                    request = pb.PublishRequest(events=events)
                    answer = loud.stub.PublishBatch(request, metadata=loud.metadata, timeout=600)
                    loud_seconds.append(time.perf_counter() - began)
                    assert answer.accepted == len(events), answer.rejected
                    after = shard_counters(ops)
                    steps.append(steps_per_epoch(before, after))
                    t = t_next
            counters = shard_counters(ops)
            began = time.perf_counter()
            code = server.stop()
            stop_seconds = time.perf_counter() - began
            stopped = True
        finally:
            if not stopped:
                server.stop()
    return {
        "pooled": pooled,
        "patterns": patterns,
        "subscribed": subscribed,
        "subscribe_seconds": round(subscribe_seconds, 2),
        "batches": batches,
        "loud_batch": summary(loud_seconds),
        "loud_batch_s": [round(s, 3) for s in loud_seconds],
        "small_beside": summary(beside),
        "steps_per_epoch_max": round(max(steps)),
        "sigterm_seconds": round(stop_seconds, 2),
        "exit": code,
        "counters": {
            name: counters.get(name, 0)
            for name in ("epochs", "steps", "cut", "instances", "dropped", "matches", "spawned")
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cesar.perf.fuzzbench", description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="100 patterns, 4 batches (CI)")
    parser.add_argument("--patterns", type=int, default=1_000, help="random patterns subscribed")
    parser.add_argument("--batches", type=int, default=40, help="random batches published")
    parser.add_argument("--no-budget", action="store_true", help="client and engine budgets off")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the report here too")
    args = parser.parse_args(argv)
    patterns, batches = (100, 4) if args.smoke else (args.patterns, args.batches)
    measured = fuzz(patterns, batches, not args.no_budget, args.seed)
    print_report({"date": now(), "machine": machine(), **measured}, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
