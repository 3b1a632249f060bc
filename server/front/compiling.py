"""Compiling off the event path: a pool of compile processes for Subscribe, SubscribeBatch and
Explain.

Compiling is pure CPU work in Python.  In the front's process it would hold the interpreter
lock for as long as a batch compiles (60 s at the budget), and every thread of the event path
— a one-event publish, an alert stream — would wait its turn at each step (47 s for one
publish, measured).  A :class:`Compiler` runs each compile in one of ``workers`` child
processes (a fresh interpreter each, nothing of the front's threads or sockets inherited,
talking pickles over its standard input and output), with the same checks, deadline and
budget as the front applied itself:

* a batch goes in chunks of :data:`CHUNK` queries, one chunk at a time, so another client's
  Subscribe or Explain waits for at most one chunk in a worker, never a whole batch;
* the deadline (the caller's) and the batch's compile budget are monotonic instants, which
  a worker on the same machine reads on the same clock;
* a worker keeps its own query-shape cache (:class:`~cesar.automata.shape.QueryCache`), so
  queries of one shape compile once per worker; its counters come back with each chunk
  (:attr:`Compiler.counters`);
* a worker leaves when the front does (its standard input closes), and ignores the
  terminal's Ctrl-C (the front's shutdown stops it).  A worker that dies is an UNAVAILABLE
  error for the call it served, and another is started for the next.

Each chunk's result comes back pickled: unpickling a compiled query in the front costs about
half a millisecond, taken a chunk at a time.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Any, TypeVar, cast

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
    """The front's compile processes (module docstring); thread-safe.

    Each worker is ``python -m cesar.server.front.compiling``, a child reading pickled
    calls on its standard input and writing their pickled results on its standard output
    (:func:`main`); a call takes a free worker, or waits for one.
    """

    def __init__(self, workers: int = limits.COMPILE_WORKERS) -> None:
        self.workers = workers
        self.counters: Counter[str] = Counter()
        """The workers' shape-cache counters (``compiled``, ``bound``, ...), summed."""
        self._lock = threading.Lock()
        self._free: queue.LifoQueue[Worker | None] = queue.LifoQueue()
        for _ in range(workers):
            self._free.put(None)  # a worker started when first needed
        self._all: list[Worker] = []
        self._closed = False

    def start(self) -> None:
        """Start a worker now (it takes about a second to import the compiler), so the first
        Subscribe does not wait for it; the others start when calls overlap."""
        worker = self._free.get()
        self._free.put(worker or self._spawn())

    def _spawn(self) -> Worker:
        worker = Worker()
        with self._lock:
            self._all.append(worker)
        return worker

    def _run(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)`` in a worker; its exception raised here.  A worker that died is
        UNAVAILABLE (and replaced by a new one)."""
        if self._closed:
            raise Unavailable("the server is shutting down")
        worker = self._free.get() or self._spawn()
        try:
            outcome, value = worker.call(call, args)
        except (OSError, EOFError, pickle.UnpicklingError):
            worker.stop()
            with self._lock:
                self._all.remove(worker)
            self._free.put(None)
            raise Unavailable(
                "a compile process died (out of memory?); nothing was registered: retry"
            ) from None
        self._free.put(worker)
        if outcome == "raised":
            raise value
        return cast(T, value)

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
        """Stop the workers (a compile under way is abandoned: its call is UNAVAILABLE)."""
        self._closed = True
        with self._lock:
            workers, self._all = self._all, []
        for worker in workers:
            worker.stop()


class Worker:
    """One compile process and its pipes; used by one call at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cesar.server.front.compiling"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def call(self, call: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
        """("returned", value) or ("raised", exception) of ``call(*args)`` in the process;
        OSError or EOFError if it died."""
        assert self.process.stdin is not None and self.process.stdout is not None
        _send(self.process.stdin, (call, args))
        result: tuple[str, Any] = _receive(self.process.stdout)
        return result

    def stop(self) -> None:
        """End the process (it leaves when its standard input closes)."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _send(pipe: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(len(data).to_bytes(8, "big") + data)
    pipe.flush()


def _receive(pipe: IO[bytes]) -> Any:
    head = pipe.read(8)
    if len(head) < 8:
        raise EOFError("the compile process ended")
    size = int.from_bytes(head, "big")
    data = pipe.read(size)
    if len(data) < size:
        raise EOFError("the compile process ended")
    return pickle.loads(data)


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


def main() -> None:
    """A compile process: calls from standard input, results to standard output, until the
    front closes its standard input (it stopped or died).  Ctrl-C is the front's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write on the answers' pipe
    while True:
        try:
            call, args = _receive(requests)
        except EOFError:
            return
        try:
            answer: tuple[str, Any] = ("returned", call(*args))
        except Exception as exc:  # the front raises it as it would have raised it itself
            answer = ("raised", exc)
        _send(answers, answer)


if __name__ == "__main__":
    main()
