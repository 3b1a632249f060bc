"""What a shard's own endpoint (``cesar shard --metrics-port``) exports to Prometheus.

The same ``cesar_shard_*`` families the front exports for every shard (read
over the shard link), labelled ``shard``, plus what only the shard can time:

* ``cesar_shard_<counter>_total{shard}``: the engines' work since the shard
  started (events, matches, instances touched, predicates evaluated, ...);
* ``cesar_shard_<gauge>{shard}``: :data:`SHARD_GAUGES` (live instances, DAG
  nodes, subscriptions, lanes, RSS);
* ``cesar_shard_apply_seconds{shard}``: histogram of one Apply call (a batch
  of epochs from the front) from its arrival to its alerts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from prometheus_client.core import Metric

from cesar.server.host.metrics import Histogram, families

SHARD_GAUGES = frozenset(
    {
        "lanes",
        "instances",
        "nodes",
        "rss_bytes",
        "subscriptions",
        "active_nodes_sum",
        "events_waiting",
        "applies_in_flight",
    }
)
"""A shard's values that go up and down; the others only count up (from its last start).
The last two are the front's view of the shard, in the front's export only: events waiting
for it in open epochs, and Apply calls sent to it and not answered (its backlog)."""


def collect(
    index: int, counters: Callable[[], Mapping[str, int]], apply: Histogram
) -> list[Metric]:
    """Every family of shard ``index``, read now."""
    labels = {"shard": str(index)}
    values = dict(counters())
    return [
        *families("cesar_shard", [(labels, values)], set(values) - SHARD_GAUGES),
        apply.family("cesar_shard_apply_seconds", "an Apply call, from arrival to alerts", labels),
    ]
