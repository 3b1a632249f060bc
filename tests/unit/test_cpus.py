"""CPU lists and placements (:mod:`cesar.server.host.cpus`), on made-up hosts."""

from __future__ import annotations

import os

import pytest

from cesar.server.host.cpus import MAX_CPU, Placement, PlacementError, parse_cpus, pin, place


def test_lists_read_as_taskset_reads_them() -> None:
    assert parse_cpus("3") == {3}
    assert parse_cpus("0-2,5, 7-7") == {0, 1, 2, 5, 7}
    for bad, reason in [
        ("", "'' is not a CPU number or range"),
        ("a", "'a' is not a CPU number or range"),
        ("3-1", "'3-1': CPUs are 0-4095, low to high"),
        ("-1", "'-1' is not a CPU number or range"),
        (str(MAX_CPU + 1), f"'{MAX_CPU + 1}': CPUs are 0-4095, low to high"),
    ]:
        with pytest.raises(PlacementError) as caught:
            parse_cpus(bad)
        assert str(caught.value) == reason


def test_auto_takes_the_last_cpus_one_a_shard_and_leaves_the_rest_to_the_front() -> None:
    host = frozenset({0, 1, 2, 3})
    assert place("auto", 1, host) == Placement((3,), frozenset({0, 1, 2}))
    assert place("auto", 3, host) == Placement((3, 2, 1), frozenset({0}))
    assert place("auto", 1, frozenset({4, 9})) == Placement((9,), frozenset({4}))
    with pytest.raises(PlacementError, match="auto keeps a CPU for the front: 4 shards on CPUs"):
        place("auto", 4, host)


def test_a_list_gives_shard_i_the_ith_cpu() -> None:
    host = frozenset({0, 1, 2, 3})
    assert place("2,0", 2, host) == Placement((2, 0), frozenset({1, 3}))
    assert place("0,1,2,3", 4, host) == Placement((0, 1, 2, 3), frozenset())
    for spec, shards, reason in [
        ("1", 2, "one CPU per shard: 1 given, 2 shards"),
        ("1,1", 2, "two shards on one CPU: give each its own"),
        ("1,5", 2, r"CPU 5 is not one this process may use \(CPUs 0,1,2,3\)"),
        ("0-1", 1, "'0-1': one CPU number per shard"),
        ("9999", 1, "9999: CPUs are 0-4095"),
    ]:
        with pytest.raises(PlacementError, match=reason):
            place(spec, shards, host)


def test_pin_moves_every_thread_and_refuses_what_the_host_lacks() -> None:
    import threading

    before = frozenset(os.sched_getaffinity(0))
    one = frozenset({min(before)})
    started = threading.Event()
    stop = threading.Event()

    def wait() -> None:
        started.set()
        stop.wait()

    helper = threading.Thread(target=wait)
    helper.start()
    started.wait()
    try:
        pin(one)
        assert os.sched_getaffinity(helper.native_id or 0) == one
        assert os.sched_getaffinity(0) == one
        with pytest.raises(PlacementError, match="not available here"):
            pin(frozenset({MAX_CPU}))
        assert os.sched_getaffinity(0) == one
    finally:
        stop.set()
        helper.join()
        pin(before)
