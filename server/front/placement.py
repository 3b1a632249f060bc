"""Where a new subscription runs: key-partitioned on every shard, or global on one.

The analysis of what a query *allows* is :mod:`cesar.automata.partition`
(the keys every step joins on); this module is the *policy* that picks among
what it allows, given what the :class:`~cesar.server.front.registry.Registry`
already holds:

* a query reading streams that other subscriptions publish must run where
  they are produced: in their lane (one key, or one global shard);
* otherwise a key-partitioned query takes, of its possible keys, the one
  with the most subscriptions already (so they share DAG nodes), and a
  global one the least loaded shard.

A key-partitioned query runs on every shard, except one *pinned* to a key
value (``FILTER{Name = 'IBM'} Stock NEXT{$1.Name = $2.Name} Stock``): only
the shard owning that value can match it, so it runs there alone
(:func:`pinned_shard`).
"""

from __future__ import annotations

from cesar.automata.compiler import CompiledQuery
from cesar.automata.partition import partition_keys, pinned_key
from cesar.server.front.errors import FailedPrecondition
from cesar.server.front.registry import Registry
from cesar.server.wire.routing import shard_of


def place(query: CompiledQuery, registry: Registry) -> tuple[str | None, int]:
    """(key attribute or None, shard) for a new subscription running ``query``.

    Raises FailedPrecondition when the streams it reads are produced in
    different lanes, or in a key lane on a key it does not join every step on.
    """
    keys = partition_keys(query.automata, registry.schemas)
    producers = registry.producers(query.reads)
    if producers:
        lanes = {(p.key, p.row.shard if p.key is None else 0) for p in producers}
        (key, shard), *others = sorted(lanes, key=str)
        if not others and (key is None or key in keys):
            return key, shard
        where = ", ".join(
            f"{p.row.stream} (subscription {p.row.id}: "
            + (f"key-partitioned on {p.key}" if p.key else f"global on shard {p.row.shard}")
            + ")"
            for p in producers
        )
        raise FailedPrecondition(
            f"this query must run where the streams it reads are produced: {where}; "
            "a query reading a key-partitioned stream must join every step on that key"
        )
    if keys:
        return max(sorted(keys), key=lambda k: registry.lanes[k]), 0
    load = registry.global_load
    return None, min(range(registry.shards), key=lambda s: (load[s], s))


def pinned_shard(query: CompiledQuery, key: str | None, shards: int) -> int | None:
    """The one shard a query key-partitioned on ``key`` runs on, if it is pinned to a value."""
    if key is None:
        return None
    value = pinned_key(query.automata, key)
    return None if value is None else shard_of(value, shards)
