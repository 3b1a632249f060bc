"""CPU placement: each child shard on a CPU of its own, the front and its helpers on the rest.

A shard is one single-threaded engine (docs/architecture.md); unpinned, the scheduler runs
the front, a Spark feed or a client on whichever core the shard was using, and the shard
waits its turn.  ``cesar serve --shard-cpus`` gives shard ``i`` one CPU and keeps the front
(and every thread and child it starts later) off them; ``cesar feed --cpus`` and
``cesar shard --cpus`` place a process by hand.  Measured in perf/RESULTS.md ("Shards on CPUs
of their own"): the Spark feed into one shard on two cores.

CPU lists are written as ``taskset -c`` takes them:

>>> sorted(parse_cpus("0-2,5"))
[0, 1, 2, 5]
>>> place("auto", 1, frozenset({0, 1}))
Placement(shards=(1,), rest=frozenset({0}))
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MAX_CPU = 4_095
"""The largest CPU number a list may name (Linux's default ``NR_CPUS`` bound)."""


class PlacementError(ValueError):
    """A CPU list or placement that cannot be used on this host, with the reason."""


@dataclass(frozen=True)
class Placement:
    """Where ``cesar serve`` runs: one CPU per child shard, in shard order, and the CPUs left
    for the front (empty: the front stays where it was started)."""

    shards: tuple[int, ...]
    rest: frozenset[int]


def allowed() -> frozenset[int]:
    """The CPUs this process may run on (its affinity, as ``taskset`` or a cgroup set it)."""
    return frozenset(os.sched_getaffinity(0))


def parse_cpus(text: str) -> frozenset[int]:
    """The CPUs of a list such as ``0-2,5``: numbers and inclusive ranges, comma-separated."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise PlacementError(f"{part.strip()!r} is not a CPU number or range") from None
        if not 0 <= first <= last <= MAX_CPU:
            raise PlacementError(f"{part.strip()!r}: CPUs are 0-{MAX_CPU}, low to high")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def usable(cpus: frozenset[int], available: frozenset[int]) -> frozenset[int]:
    """``cpus`` if this process may run on each of them, else :class:`PlacementError`."""
    missing = sorted(cpus - available)
    if missing:
        raise PlacementError(
            f"CPU {', '.join(map(str, missing))} is not one this process may use "
            f"({_listed(available)})"
        )
    return cpus


def place(spec: str, shards: int, available: frozenset[int]) -> Placement:
    """The placement ``--shard-cpus spec`` asks for, for ``shards`` children on ``available``.

    ``auto``: the last ``shards`` CPUs, shard 0 on the last, if one is left for the front;
    otherwise a list of one CPU per shard, in shard order.  O(CPUs).
    """
    if spec == "auto":
        if shards >= len(available):
            raise PlacementError(
                f"auto keeps a CPU for the front: {shards} shards on {_listed(available)} "
                f"(what this process may use) leave none; at most {len(available) - 1}"
            )
        chosen = tuple(sorted(available, reverse=True)[:shards])
    else:
        chosen = tuple(_one_each(spec))
        if len(chosen) != shards:
            raise PlacementError(f"one CPU per shard: {len(chosen)} given, {shards} shards")
        if len(set(chosen)) != len(chosen):
            raise PlacementError("two shards on one CPU: give each its own")
        usable(frozenset(chosen), available)
    return Placement(chosen, available - frozenset(chosen))


def _one_each(spec: str) -> list[int]:
    cpus = []
    for part in spec.split(","):
        try:
            cpu = int(part)
        except ValueError:
            raise PlacementError(f"{part.strip()!r}: one CPU number per shard (or auto)") from None
        if not 0 <= cpu <= MAX_CPU:
            raise PlacementError(f"{cpu}: CPUs are 0-{MAX_CPU}")
        cpus.append(cpu)
    return cpus


def pin(cpus: frozenset[int]) -> None:
    """Run this process on ``cpus`` from now on: every thread it has, and so every thread and
    child process it starts later (which may pin itself elsewhere).  :class:`PlacementError`
    if the host does not give it exactly those.  O(threads)."""
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:
        raise PlacementError(f"{_listed(cpus)}: not available here") from None
    got = allowed()
    if got != cpus:
        missing = ",".join(map(str, sorted(cpus - got)))
        raise PlacementError(
            f"CPU {missing} is not available here (this host gives {_listed(got)})"
        )
    tasks = Path("/proc/self/task")
    for task in tasks.iterdir() if tasks.is_dir() else ():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except ProcessLookupError:  # the thread ended meanwhile
            continue


def _listed(cpus: frozenset[int]) -> str:
    return "CPUs " + ",".join(map(str, sorted(cpus))) if cpus else "no CPU"
