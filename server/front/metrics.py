"""What the front exports to Prometheus: its counters, every shard's, rejections and batch latency.

At each scrape the front's :meth:`~cesar.server.front.front.Front.stats` is
read (the shards answer it over their links), so a shard on another machine is
scraped through its front; no value is kept twice.  Families:

* ``cesar_front_<counter>_total`` (events accepted and rejected, alerts,
  batches, subscribes, ...) and ``cesar_front_<gauge>`` (subscriptions,
  streams, open Listen streams, events waiting in open epochs, RSS, ...);
* ``cesar_shard_<counter>_total{shard}`` (the engines' work: events, matches,
  instances touched, ...) and ``cesar_shard_<gauge>{shard}`` (live instances,
  DAG nodes, subscriptions, RSS);
* ``cesar_front_rejections_total{stream, field, kind}`` (kind: late, ahead, invalid; the
  stream is empty for an event that names no input stream);
* ``cesar_front_batch_seconds`` (histogram: a published batch from its
  request to its acknowledgement);
* ``cesar_front_listen_lag_alerts`` and ``cesar_front_listen_lag_seconds``:
  how far the furthest-behind live Listen stream is behind the committed
  alerts (alert ids of every owner after the last it read; seconds since the
  first of them was committed), 0 when all are up to date.

docs/operations.md lists example queries.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from cesar.server.front.front import Front
from cesar.server.host.metrics import families
from cesar.server.shard.metrics import SHARD_GAUGES

FRONT_GAUGES = frozenset(
    {
        "subscriptions",
        "streams",
        "batches_logged",
        "open_epoch_events",
        "listens",
        "rss_bytes",
        "checkpoint_position",
        "checkpoint_bytes",
        "checkpoint_ms",
        "log_compacted_to",
    }
)
"""The front's values that go up and down; the others only count up."""


def collect(front: Front) -> list[Metric]:
    """Every family, read now."""
    stats = front.server_stats()
    values = dict(stats.front)  # every front counter, at 0 until it first counts
    out = families("cesar_front", [({}, values)], set(values) - FRONT_GAUGES)
    rows = [({"shard": str(shard.shard)}, dict(shard.counters)) for shard in stats.shards]
    names = {name for _, counters in rows for name in counters}
    out += families("cesar_shard", rows, names - SHARD_GAUGES)
    rejected = CounterMetricFamily(
        "cesar_front_rejections",
        "events rejected, by stream, field and kind (late, ahead, invalid)",
        labels=["stream", "field", "kind"],
    )
    with front.lock:
        counted = sorted(front.commits.rejections.items())
    for (stream, field, kind), count in counted:
        rejected.add_metric([stream, field, kind], count)
    out.append(rejected)
    out.append(
        front.commits.batch_seconds.family(
            "cesar_front_batch_seconds", "a published batch from request to acknowledgement"
        )
    )
    behind, seconds = front.listeners.lag()
    for name, value, text in (
        ("alerts", behind, "committed alerts after the last the furthest-behind Listen has read"),
        ("seconds", seconds, "since the oldest alert the furthest-behind Listen has not read"),
    ):
        out.append(GaugeMetricFamily(f"cesar_front_listen_lag_{name}", text, value=value))
    return out
