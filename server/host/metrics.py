"""Metrics for Prometheus: a latency histogram as plain data, and the endpoint that serves them.

A process keeps its figures where they are made (counters in a dict, a
:class:`Histogram` per latency); :func:`serve_metrics` starts an HTTP endpoint
(``prometheus-client``) whose private registry asks a ``collect`` function for
the metric families at each scrape, so nothing is copied between scrapes and no
global registry is touched.

>>> latency = Histogram((0.1, 1.0))
>>> for seconds in (0.05, 0.5, 3.0):
...     latency.observe(seconds)
>>> latency.cumulative()
[('0.1', 1), ('1.0', 2), ('+Inf', 3)]
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Upper bounds in seconds of the latency histograms' buckets."""


class Histogram:
    """Counts of observations per bucket, and their sum; thread-safe.  O(log buckets) a value."""

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        """Count one observation."""
        with self._lock:
            self._counts[bisect.bisect_left(self.bounds, value)] += 1
            self._sum += value

    def cumulative(self) -> list[tuple[str, int]]:
        """``(upper bound, observations <= it)`` per bucket, ``+Inf`` last (Prometheus' form)."""
        with self._lock:
            counts = list(self._counts)
        out, total = [], 0
        for bound, count in zip((*map(str, self.bounds), "+Inf"), counts, strict=True):
            total += count
            out.append((bound, total))
        return out

    @property
    def sum(self) -> float:
        """The sum of the observations."""
        with self._lock:
            return self._sum

    @property
    def count(self) -> int:
        """The number of observations."""
        with self._lock:
            return sum(self._counts)

    def family(
        self, name: str, documentation: str, labels: Mapping[str, str] | None = None
    ) -> HistogramMetricFamily:
        """The histogram as a metric family (one sample set, with ``labels``)."""
        labels = labels or {}
        family = HistogramMetricFamily(name, documentation, labels=sorted(labels))
        family.add_metric([labels[k] for k in sorted(labels)], self.cumulative(), self.sum)
        return family


def families(
    prefix: str,
    rows: Iterable[tuple[Mapping[str, str], Mapping[str, int | float]]],
    monotonic: Iterable[str],
) -> list[Metric]:
    """One family per value name over ``rows`` of ``(labels, values)`` (one sample a row):
    a counter (``<prefix>_<name>_total``) for the names in ``monotonic``, a gauge
    (``<prefix>_<name>``) for the others.

    >>> [f.name for f in families("cesar_shard", [({"shard": "0"}, {"events": 3})], ["events"])]
    ['cesar_shard_events']
    """
    counters = set(monotonic)
    by_name: dict[str, Any] = {}
    for labels, values in rows:
        keys = sorted(labels)
        for name in sorted(values):
            family = by_name.get(name)
            if family is None:
                kind = CounterMetricFamily if name in counters else GaugeMetricFamily
                family = by_name[name] = kind(
                    f"{prefix}_{name}", name.replace("_", " "), labels=keys
                )
            family.add_metric([labels[k] for k in keys], values[name])
    return list(by_name.values())


class _Collector:
    def __init__(self, collect: Callable[[], Iterable[Metric]]) -> None:
        self._collect = collect

    def collect(self) -> Iterable[Metric]:
        return self._collect()


def serve_metrics(host: str, port: int, collect: Callable[[], Iterable[Metric]]) -> int:
    """Serve ``collect()``'s families at ``http://HOST:PORT/metrics`` (port 0: any); the port.

    The endpoint runs on a daemon thread and stops with the process.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(collect))
    server, _ = start_http_server(port, addr=host, registry=registry)
    bound: int = server.server_address[1]
    return bound
