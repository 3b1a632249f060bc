"""Compiling off the event path: a pool of compile processes for Subscribe, SubscribeBatch and
Explain.

Compiling is pure CPU work in Python.  In the front's process it would hold the interpreter
lock for as long as a batch compiles (60 s at the budget), and every thread of the event path
— a one-event publish, an alert stream — would wait its turn at each step (47 s for one
publish, measured).  A :class:`Compiler` runs each compile in one of ``workers`` processes
(``spawn``: nothing of the front's threads or sockets is inherited), with the same checks,
deadline and budget as before (:func:`~cesar.server.front.subscribing.prepare_all`):

* a batch goes in chunks of :data:`CHUNK` queries, one chunk at a time, so another client's
  Subscribe or Explain waits for at most one chunk in a worker, never a whole batch;
* the deadline (the caller's) and the batch's compile budget are monotonic instants, which
  a worker on the same machine reads on the same clock;
* a worker keeps its own query-shape cache (:class:`~cesar.automata.shape.QueryCache`), so
  queries of one shape compile once per worker; its counters come back with each chunk
  (:attr:`Compiler.counters`);
* a worker leaves when the front does (it watches its parent), and ignores the terminal's
  Ctrl-C (the front's shutdown stops it).  A worker that dies is an UNAVAILABLE error for
  the calls it served, and a new pool is started.

Each chunk's result comes back pickled: unpickling a compiled query in the front costs about
half a millisecond, taken a chunk at a time.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from cesar.automata.schema import StreamSchema
from cesar.automata.shape import QueryCache
from cesar.server.front import limits
from cesar.server.front.auth import Client
from cesar.server.front.errors import FrontError, ResourceExhausted, Unavailable
from cesar.server.front.subscribing import (
    Prepared,
    SubscribeItem,
    check_deadline,
    explained,
    explained_data,
    prepare,
)

CHUNK = 50
"""Queries of a batch compiled in one task: a worker is taken for at most one chunk at a time."""

T = TypeVar("T")

_cache = QueryCache()
"""A worker's query-shape cache (each worker process has its own; the front's is apart)."""


class Compiler:
    """The front's compile processes (module docstring); thread-safe."""

    def __init__(self, workers: int = limits.COMPILE_WORKERS) -> None:
        self.workers = workers
        self.counters: Counter[str] = Counter()
        """The workers' shape-cache counters (``compiled``, ``bound``, ...), summed."""
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_worker_started,
                    initargs=(os.getpid(),),
                )
            return self._pool

    def start(self) -> None:
        """Start the workers now (they take about a second to import the compiler), so the
        first Subscribe does not wait for them."""
        executor = self._executor()
        for _ in range(self.workers):
            executor.submit(int)

    def _run(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` in a worker; its exception raised here.  A dead worker is
        UNAVAILABLE (and the pool is started again)."""
        executor = self._executor()
        try:
            return executor.submit(call, *args).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is executor:
                    self._pool = None
            executor.shutdown(wait=False, cancel_futures=True)
            raise Unavailable(
                "a compile process died (out of memory?); nothing was registered: retry"
            ) from None

    def prepare_all(
        self,
        client: Client,
        items: Sequence[SubscribeItem],
        schemas: Mapping[str, StreamSchema],
        first: int,
        deadline: float | None,
    ) -> list[Prepared | FrontError]:
        """:func:`~cesar.server.front.subscribing.prepare_all` in the workers, a chunk at a
        time: the unnamed items as ``s<first>``, ``s<first+1>``, ...; DeadlineExceeded past
        ``deadline``, ResourceExhausted past the batch's compile budget."""
        started = time.monotonic()
        prepared: list[Prepared | FrontError] = []
        number = first
        for begin in range(0, len(items), CHUNK):
            chunk = list(items[begin : begin + CHUNK])
            _check_budget(started, len(prepared), len(items), deadline)
            done, counted = self._run(
                _prepare_chunk,
                client,
                chunk,
                dict(schemas),
                number,
                (started, deadline),
                (len(prepared), len(items)),
            )
            number += sum(not isinstance(one, FrontError) for one in done)
            prepared += done
            with self._lock:
                self.counters.update(counted)
        return prepared

    def explained(
        self, client: Client, text: str, schemas: Mapping[str, StreamSchema], dot: bool
    ) -> tuple[str, str, str | None]:
        """:func:`~cesar.server.front.subscribing.explained` in a worker."""
        return self._run(explained, client, text, dict(schemas), dot)

    def explained_data(
        self, client: Client, text: str, schemas: Mapping[str, StreamSchema]
    ) -> dict[str, object]:
        """:func:`~cesar.server.front.subscribing.explained_data` in a worker."""
        return self._run(explained_data, client, text, dict(schemas))

    def close(self) -> None:
        """Stop the workers (a compile under way is abandoned)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _check_budget(started: float, done: int, total: int, deadline: float | None) -> None:
    """DeadlineExceeded past ``deadline``; ResourceExhausted once the batch has compiled for
    its budget (``done`` of ``total`` compiled)."""
    now = time.monotonic()
    check_deadline(deadline, now)
    if now - started > limits.MAX_BATCH_COMPILE_SECONDS:
        raise ResourceExhausted(
            f"the batch compiled for more than {limits.MAX_BATCH_COMPILE_SECONDS} s "
            f"(max_batch_compile_seconds) and was stopped after {done} of "
            f"{total} queries; nothing was registered: send smaller batches"
        )


def _prepare_chunk(
    client: Client,
    items: list[SubscribeItem],
    schemas: dict[str, StreamSchema],
    first: int,
    times: tuple[float, float | None],
    place: tuple[int, int],
) -> tuple[list[Prepared | FrontError], Counter[str]]:
    """In a worker: prepare ``items`` in order, the unnamed ones numbered from ``first``,
    checking before each the deadline and the batch's budget (``times``: the batch's start
    and the deadline; ``place``: the items compiled before these, and the batch's size); with
    what the worker's shape cache counted meanwhile."""
    (started, deadline), (before, total) = times, place
    counted = Counter(_cache.counters)
    prepared: list[Prepared | FrontError] = []
    number = first
    for item in items:
        _check_budget(started, before + len(prepared), total, deadline)
        checked = prepare(client, item, schemas, f"s{number}", _cache)
        number += not isinstance(checked, FrontError)
        prepared.append(checked)
    return prepared, _cache.counters - counted


def _worker_started(parent: int) -> None:
    """A worker's start: it ignores Ctrl-C (the front stops it) and leaves once its parent
    is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
