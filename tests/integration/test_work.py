"""The work budgets through the server (server/engine/work.py): a client's thousand random
patterns are held to that client's budget, another client reading the same streams loses
nothing, SIGTERM stops the server within its grace, and it restarts and serves."""

from __future__ import annotations

import random
import time
from pathlib import Path

from cesar.perf.fuzzbench import (
    STREAMS,
    random_batch,
    random_pattern,
    shard_counters,
    steps_per_epoch,
)
from cesar.perf.serverproc import Server, collect, listed, subscribe
from cesar.v1 import cesar_pb2 as pb

GRACE = 10
"""``cesar serve``'s default ``--grace`` (docs/operations.md, "Shutdown")."""
BUDGET = 5_000
"""The loud client's budget in the tokens file (the default, 50,000, is perf/fuzzbench.py's)."""
TOKENS = (
    f"loud-token loud max_client_steps_per_epoch={BUDGET}\nsmall-token small\nops ops scope=admin\n"
)


def s_event(t: int, k: int) -> pb.Event:
    attributes = {"k": pb.Value(int_value=k), "v": pb.Value(int_value=0)}
    return pb.Event(stream="S", t0=t, t1=t, attributes=attributes)


def test_a_thousand_random_patterns_are_held_to_their_clients_budget(tmp_path: Path) -> None:
    rng = random.Random(7)
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKENS)
    streams = [a for spec in STREAMS for a in ("--stream", spec)]
    server = Server(tmp_path / "data", *streams, "--tokens", str(tokens)).start()
    try:
        loud, small = server.connect("loud-token"), server.connect("small-token")
        ops = server.connect("ops")
        ones = subscribe(small, "FILTER{k = 1} S PUBLISH Ones")
        request = pb.SubscribeBatchRequest(
            subscriptions=[pb.SubscribeRequest(query=random_pattern(rng, n)) for n in range(1000)]
        )
        reply = loud.stub.SubscribeBatch(request, metadata=loud.metadata)
        assert all(r.HasField("subscription") for r in reply.results)
        expected, t, steps = 0, 0, []
        for _ in range(6):
            events, t = random_batch(rng, t)
            before = shard_counters(ops)
            answer = loud.stub.PublishBatch(
                pb.PublishRequest(events=events), metadata=loud.metadata
            )
            assert answer.accepted == len(events), answer.rejected
            after = shard_counters(ops)
            steps.append(steps_per_epoch(before, after))
            expected += sum(e.stream == "S" and e.attributes["k"].int_value == 1 for e in events)
        end = pb.PublishRequest(events=[s_event(t + 1, 0)])  # closes the last instant
        assert loud.stub.PublishBatch(end, metadata=loud.metadata).accepted == 1
        # Each shard holds about half the patterns: their client's budget (steps in an epoch of
        # a lane) bounds each shard's epoch at about twice it.
        assert max(steps) <= 2.5 * BUDGET, steps
        assert shard_counters(ops)["cut"] > 0
        told = {s.id: s.last_seq for s in listed(loud)}
        notices = [
            a.notice
            for a in collect(
                loud, sum(told.values()), pb.ListenRequest(after_seq=dict.fromkeys(told, 0))
            )
            if a.notice
        ]
        assert notices and all("max_client_steps_per_epoch" in n for n in notices if "cut" in n)
        alerts = collect(small, expected, pb.ListenRequest(after_seq={ones.id: 0}))
        assert [a for a in alerts if a.notice] == []  # the other client was never cut
        assert {s.id: s.last_seq for s in listed(small)} == {ones.id: expected}
        began = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - began < GRACE + 5  # SIGTERM honoured within the grace
        server.start()  # the server restarts with all of it and serves
        loud, small = server.connect("loud-token"), server.connect("small-token")
        assert len(listed(loud)) == 1000
        request = pb.PublishRequest(events=[s_event(t + 2, 1), s_event(t + 3, 0)])
        assert small.stub.PublishBatch(request, metadata=small.metadata).accepted == 2
        assert collect(small, 1, pb.ListenRequest(after_seq={ones.id: expected}))
    finally:
        server.stop()
