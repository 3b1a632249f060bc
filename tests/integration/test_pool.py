"""The front's calls to a real shard process over loopback gRPC: sent ahead, run in order."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import grpc
import pytest

from cesar.server.host.calibrate import given
from cesar.server.shard.pool import ShardPool
from cesar.v1 import cesar_pb2, shard_pb2

STATS = cesar_pb2.StatsRequest()


@pytest.fixture
def pool() -> Iterator[ShardPool]:
    shards = ShardPool(1, costs=given(os.environ["CESAR_PLAN_COSTS"]))
    try:
        yield shards
    finally:
        shards.stop()


def stamped(pool: ShardPool, order: str) -> tuple[tuple[str, str], ...]:
    return (*pool.metadata[0], ("cesar-order", order))


def waiting(pool: ShardPool, calls: int) -> None:
    """Wait until ``calls`` numbered calls have had to wait at the shard (asked by a call
    without a number, which goes at once)."""
    deadline = time.monotonic() + 30
    while pool.stubs[0].Stats(STATS, metadata=pool.metadata[0]).counters["calls_waited"] < calls:
        assert time.monotonic() < deadline, "the numbered call never reached the shard"
        time.sleep(0.01)


def test_the_front_sends_its_next_calls_before_the_shard_ends_the_one_it_runs(
    pool: ShardPool,
) -> None:
    assert pool.load(0, 1) == []
    asked = [pool.ask("Stats", STATS, [0]) for _ in range(100)]  # none awaited yet
    answers = [a.answers()[0] for a in asked]
    waited = [a.counters["calls_waited"] for a in answers]
    assert waited == sorted(waited), "answered in the order sent"
    assert waited[-1] > 0, "no call arrived while the one before it ran: one call at a time"


def test_a_call_that_arrives_before_the_one_numbered_ahead_of_it_waits_for_it(
    pool: ShardPool,
) -> None:
    stub = pool.stubs[0]
    second = stub.Stats.future(STATS, metadata=stamped(pool, "t:2"))
    waiting(pool, 1)
    assert not second.done(), "call 2 ran before call 1 arrived"
    stub.Stats(STATS, metadata=stamped(pool, "t:1"))
    assert second.result(timeout=10).counters["calls_waited"] == 1
    # a newer session (the front reconnected): calls of the old one still waiting fail
    stale = stub.Stats.future(STATS, metadata=stamped(pool, "t:4"))
    waiting(pool, 2)
    stub.Stats(STATS, metadata=stamped(pool, "u:1"))
    with pytest.raises(grpc.RpcError) as failed:
        stale.result(timeout=10)
    assert failed.value.code() is grpc.StatusCode.ABORTED
    assert "a newer session of the front began" in failed.value.details()


def test_a_malformed_order_header_is_refused(pool: ShardPool) -> None:
    with pytest.raises(grpc.RpcError) as failed:
        pool.stubs[0].Stats(STATS, metadata=stamped(pool, "t:0"))
    assert failed.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert pool.stubs[0].Stats(STATS, metadata=pool.metadata[0]).shard == 0


def test_a_restarted_shard_is_refused_at_once_not_after_waiting_for_a_turn(
    pool: ShardPool,
) -> None:
    started = time.monotonic()  # call 57 of a session this shard never saw, and not loaded
    with pytest.raises(grpc.RpcError) as failed:
        pool.stubs[0].Apply(shard_pb2.ApplyRequest(), metadata=stamped(pool, "t:57")).next()
    assert failed.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert time.monotonic() - started < 5
