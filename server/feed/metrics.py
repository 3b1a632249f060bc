"""What ``cesar feed --metrics-port`` exports to Prometheus: the feed's totals and its pace.

Read at each scrape from the :class:`~cesar.server.feed.job.Feed` on the
driver.  Families:

* ``cesar_feed_<total>_total`` for each of :data:`~cesar.server.feed.job.COUNTERS`
  (rows read, accepted, rejected, late, unrouted, sent, duplicates): the totals
  kept in the feed's state under its checkpoint, so they carry on across
  restarts of the feed;
* ``cesar_feed_micro_batches_total``: micro-batches this process ran;
* ``cesar_feed_watermark``: the newest watermark sent to the server (stream
  time units; absent before the first), and ``cesar_feed_newest_t1``;
* ``cesar_feed_routing_version``: the routing table the last batch used;
* ``cesar_feed_batch_seconds``: histogram of a micro-batch's wall time.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from cesar.server.feed.job import COUNTERS, Feed
from cesar.server.host.metrics import families


def collect(feed: Feed) -> list[Metric]:
    """Every family, read now."""
    with feed.figures:
        state, micro_batches, routing_version = feed.last, feed.micro_batches, feed.routing_version
        seconds = feed.batch_seconds.family("cesar_feed_batch_seconds", "a micro-batch's wall time")
    out = families("cesar_feed", [({}, dict(state.totals))], COUNTERS)
    out.append(
        CounterMetricFamily(
            "cesar_feed_micro_batches", "micro-batches this process ran", value=micro_batches
        )
    )
    for name, value, text in (
        ("watermark", state.watermark, "the newest watermark sent (stream time units)"),
        ("newest_t1", state.seen, "the newest t1 of a valid row (stream time units)"),
        ("routing_version", routing_version, "the routing table the last batch used"),
    ):
        if value is not None:
            out.append(GaugeMetricFamily(f"cesar_feed_{name}", text, value=value))
    out.append(seconds)
    return out
