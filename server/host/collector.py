"""The cyclic garbage collector, tuned for a process that holds a large, long-lived heap.

CPython collects its youngest generation every 700 net allocations of
container objects, and each tenth young collection also walks the middle
generation.  A server holding 100,000 subscriptions allocates thousands of
short-lived containers per query it compiles and per epoch it processes
(syntax trees, terms, instances, alert events), so with the defaults it
spends a third of its compile time in the collector (perf/RESULTS.md,
"Compile once").  :func:`tune_collector` raises the thresholds: young
collections every 50,000 allocations, the middle generation every 20 of them.
Reference counting still frees everything acyclic at once; cycles wait a
little longer, which costs a few megabytes at most.

>>> tune_collector()
>>> gc.get_threshold() == THRESHOLDS
True
"""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 10)
"""Young allocations per collection; young collections per middle; middle per old."""


def tune_collector() -> None:
    """Set :data:`THRESHOLDS` for this process (the front, a shard, ``cesar run``)."""
    gc.set_threshold(*THRESHOLDS)
