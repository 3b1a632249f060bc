"""``cesar loadtest``: drive a server over gRPC with subscribers, publishers and churn.

    cesar loadtest --serve 2 --subscribers 20 --per-subscriber 5000 --publishers 2 \\
        --rate 1000 --duration 300 --churn 5 --out perf/results/load100k
    cesar loadtest --server HOST:PORT --tokens FILE --prefix L2_ ...   # a running server
    cesar loadtest --smoke --out DIR                                     # CI: ~1 minute

``--serve N`` starts ``cesar serve --shards N`` on loopback (a scratch data
directory and a tokens file with one client per subscriber plus one for the
publishers, which also reads the server-wide Stats: scope ``client,admin``);
``--server`` drives a running one, whose tokens file lists the subscribers'
tokens first and the publishers' last (with the admin scope for the memory
figures: a client's own Stats has none).

Phases:

1. *Subscribe*: each of S clients registers its K queries (:mod:`cesar.perf.loadwork`)
   with SubscribeBatch, ``--batch`` at a time, all clients at once, then opens
   one Listen stream for all of its subscriptions (resuming from seq 0, so
   nothing made before the stream is registered is missed).
2. *Load*, for ``--duration`` seconds or ``--max-events``: P publishers share
   an event clock.  Epoch t (``--epoch-size`` simultaneous quotes) is split
   into P pieces published at once (PublishBatch, idempotency key
   ``loadtest:t:p``); once all are acknowledged a watermark closes the epoch,
   and epoch t + 1 starts when the target ``--rate`` allows (at once with
   rate 0) — after that watermark is acknowledged too, or, with ``--in-flight
   N``, while up to N - 1 earlier closing watermarks are still being applied
   (a publisher that streams, as the feed does, instead of one waiting on each
   epoch).  Meanwhile ``--churn`` times a second a client subscribes one new
   query and unsubscribes the oldest churn subscription that has lived
   ``--churn-life`` seconds.  Every 2 s the front's Stats gives the RSS of the
   front and the shards.
3. *Drain*: until every live subscription's received alerts reach the seq the
   server reports (ListSubscriptions), or ``--drain-timeout``.
4. *Check* (``--check``): the stable subscriptions' alerts against ``cesar
   run``'s engine in-process over the same events — the same multiset per
   subscription, so *lost* and *extra* are both 0; a churn subscription's
   seqs must run 1, 2, 3, ... without a gap.

End-to-end latency is an alert's arrival minus the moment the last piece of
its epoch (the alert's ``t1``) was sent.  Results go to ``OUT/loadtest.json``
and ``OUT/loadtest.png`` (drawn with matplotlib, a development dependency: without it the
load test says so before the load, and draws nothing); the summary is printed as JSON on
standard output (a
progress line shows the run on standard error, on a terminal).  Exit status 1 when
there were errors or the check failed.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc
from rich.progress import Progress

from cesar.automata.schema import Event
from cesar.perf.loadcli import Settings, add_arguments, settings_from
from cesar.perf.loadserver import define, loopback, running_tokens, serve
from cesar.perf.loadwork import AlertKey, Query, Workload, expected_alerts
from cesar.perf.plot import loadtest_figure, unavailable
from cesar.perf.report import machine, now
from cesar.server.cli.progress import progress_bar
from cesar.server.wire.client import Connection, alerts
from cesar.server.wire.convert import to_event, trusted_event
from cesar.v1 import cesar_pb2 as pb

CHURN_WORKERS = 8


def percentiles(values: Sequence[float], scale: float = 1000.0) -> dict[str, float]:
    """p50/p95/p99/max of ``values`` times ``scale`` (seconds → ms by default).

    >>> percentiles([0.001 * i for i in range(1, 101)])
    {'p50': 50.5, 'p95': 95.1, 'p99': 99.0, 'max': 100.0}
    """
    if not values:
        return {}
    cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else []
    pick = (lambda q: cuts[q - 1]) if cuts else (lambda q: values[0])
    return {
        "p50": round(pick(50) * scale, 1),
        "p95": round(pick(95) * scale, 1),
        "p99": round(pick(99) * scale, 1),
        "max": round(max(values) * scale, 1),
    }


@dataclass
class Tally:
    """What the run observed; one lock guards it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    errors: Counter[str] = field(default_factory=Counter)
    error_samples: list[str] = field(default_factory=list)
    epoch_sent: dict[int, float] = field(default_factory=dict)
    latencies: list[tuple[float, float]] = field(default_factory=list)
    alerts: int = 0
    seqs: dict[str, list[int]] = field(default_factory=dict)
    lines: dict[str, Counter[AlertKey]] = field(default_factory=dict)
    subscribe_s: list[float] = field(default_factory=list)
    unsubscribe_s: list[float] = field(default_factory=list)

    def error(self, kind: str, detail: str) -> None:
        with self.lock:
            self.errors[kind] += 1
            if len(self.error_samples) < 20:
                self.error_samples.append(f"{kind}: {detail}")


class Run:
    """One load test against one server."""

    def __init__(self, settings: Settings, address: str, tokens: list[str]) -> None:
        self.s = settings
        self.address = address
        self.tokens = tokens
        self.work = Workload(
            settings.template,
            settings.seed,
            query_file=Path(settings.query_file) if settings.query_file else None,
            prefix=settings.prefix,
        )
        self.tally = Tally()
        self.stable: dict[str, Query] = {}
        self.events: list[Event] = []
        self.started = 0.0
        self.stop = threading.Event()
        self.published = 0
        self.timeline: list[dict[str, float]] = []
        self.streams: list[Any] = []
        self.churn_ids: set[str] = set()
        self.gone: set[str] = set()
        self.piece_sent = [0.0] * settings.publishers
        self.next_epoch: tuple[int, list[list[Event]]] = (0, [])

    # ------------------------------------------------------------- subscribe

    def _subscribe_client(self, client: int) -> list[tuple[str, Query]]:
        conn = Connection.open(self.address, token=self.tokens[client])
        first = client * self.s.per_subscriber
        queries = [self.work.query(n) for n in range(first, first + self.s.per_subscriber)]
        made: list[tuple[str, Query]] = []
        for start in range(0, len(queries), self.s.batch):
            chunk = queries[start : start + self.s.batch]
            tick = time.perf_counter()
            request = pb.SubscribeBatchRequest(subscriptions=[q.request() for q in chunk])
            try:
                response = conn.stub.SubscribeBatch(request, metadata=conn.metadata)
            except grpc.RpcError as exc:
                self.tally.error("subscribe", f"{exc.code().name}: {exc.details()}")
                continue
            with self.tally.lock:
                self.tally.subscribe_s.append(time.perf_counter() - tick)
            for query, result in zip(chunk, response.results, strict=True):
                if result.HasField("failure"):
                    self.tally.error(
                        "subscribe", f"{result.failure.code}: {result.failure.message}"
                    )
                else:
                    made.append((result.subscription.id, query))
        conn.close()
        return made

    def _listen(self, client: int, ids: list[str], ready: threading.Barrier) -> None:
        conn = Connection.open(self.address, token=self.tokens[client])
        request = pb.ListenRequest(after_seq=dict.fromkeys(ids, 0))
        stream = conn.stub.Listen(request, metadata=conn.metadata)
        self.streams.append(stream)
        ready.wait()
        tally = self.tally
        try:
            for alert in alerts(stream):
                arrived = time.perf_counter()
                event = trusted_event(alert.event)
                key = (event.t0, event.t1, event.values)
                with tally.lock:
                    tally.alerts += 1
                    sent = tally.epoch_sent.get(event.t1)
                    if sent is not None:
                        tally.latencies.append((arrived - self.started, arrived - sent))
                    tally.seqs.setdefault(alert.subscription, []).append(alert.seq)
                    if alert.subscription in self.stable:
                        tally.lines.setdefault(alert.subscription, Counter())[key] += 1
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                self.tally.error("listen", f"{exc.code().name}: {exc.details()}")
        finally:
            conn.close()

    # ------------------------------------------------------------------ load

    def _publish(self, index: int, conn: Connection, barrier: threading.Barrier) -> None:
        tally = self.tally
        while not self.stop.is_set():
            t, pieces = self.next_epoch
            piece = pieces[index]
            request = pb.PublishRequest(
                events=[to_event(e) for e in piece], idempotency_key=f"{self.s.prefix}:{t}:{index}"
            )
            with tally.lock:
                self.piece_sent[index] = time.perf_counter()
            try:
                ack = conn.stub.PublishBatch(request, metadata=conn.metadata)
                for rejection in ack.rejected:
                    tally.error("rejected", f"{rejection.field}: {rejection.reason}")
            except grpc.RpcError as exc:
                tally.error("publish", f"{exc.code().name}: {exc.details()}")
            barrier.wait()

    def _close_epoch(self, conn: Connection) -> None:
        """Barrier action: every piece of the epoch is acknowledged; close it, ready the next."""
        t, pieces = self.next_epoch
        with self.tally.lock:
            self.tally.epoch_sent[t] = max(self.piece_sent)
        closing = self.closing
        closing.append(
            conn.stub.PublishBatch.future(pb.PublishRequest(watermark=t), metadata=conn.metadata)
        )
        while len(closing) >= self.s.in_flight or (closing and closing[0].done()):
            self._closed(closing.popleft())
        for piece in pieces:
            self.events.extend(piece)
        self.published += sum(len(p) for p in pieces)
        elapsed = time.perf_counter() - self.started
        if elapsed >= self.s.duration or self.published >= self.s.max_events:
            self.stop.set()
            return
        self.next_epoch = (t + 1, self._split(self.work.epoch(t + 1, self.s.epoch_size)))
        if self.s.rate:
            due = self.started + self.published / self.s.rate
            time.sleep(max(0.0, due - time.perf_counter()))

    def _closed(self, call: Any) -> None:
        """Wait for one epoch's closing watermark to be acknowledged; count its error."""
        try:
            call.result()
        except grpc.RpcError as exc:
            self.tally.error("publish", f"{exc.code().name}: {exc.details()}")

    def _split(self, epoch: list[Event]) -> list[list[Event]]:
        return [epoch[p :: self.s.publishers] for p in range(self.s.publishers)]

    def _churn(self) -> None:
        """Subscribe ``churn`` new queries a second; drop each after ``churn_life`` seconds.

        Calls go through a pool of CHURN_WORKERS threads, so the rate holds while
        single calls wait on the server's lock.
        """
        conns = [Connection.open(self.address, token=t) for t in self.tokens[: self.s.subscribers]]
        held: deque[tuple[float, int, str]] = deque()
        number = self.s.subscribers * self.s.per_subscriber
        interval = 1.0 / self.s.churn
        due = time.perf_counter()
        with ThreadPoolExecutor(CHURN_WORKERS) as pool:
            while not self.stop.wait(max(0.0, due - time.perf_counter())):
                due += interval
                pool.submit(self._churn_subscribe, conns, number, held)
                number += 1
                expired = time.perf_counter() - self.s.churn_life
                while held and held[0][0] < expired:
                    _, owner, sub_id = held.popleft()
                    pool.submit(self._churn_unsubscribe, conns[owner], sub_id)
        for c in conns:
            c.close()

    def _churn_subscribe(
        self, conns: list[Connection], number: int, held: deque[tuple[float, int, str]]
    ) -> None:
        client = number % len(conns)
        tick = time.perf_counter()
        try:
            request = self.work.query(number).request()
            row = conns[client].stub.Subscribe(request, metadata=conns[client].metadata)
        except grpc.RpcError as exc:
            self.tally.error("subscribe", f"{exc.code().name}: {exc.details()}")
            return
        with self.tally.lock:
            self.tally.subscribe_s.append(time.perf_counter() - tick)
            self.churn_ids.add(row.id)
        held.append((tick, client, row.id))

    def _churn_unsubscribe(self, conn: Connection, sub_id: str) -> None:
        tick = time.perf_counter()
        try:
            conn.stub.Unsubscribe(pb.UnsubscribeRequest(id=sub_id), metadata=conn.metadata)
        except grpc.RpcError as exc:
            self.tally.error("unsubscribe", f"{exc.code().name}: {exc.details()}")
            return
        with self.tally.lock:
            self.tally.unsubscribe_s.append(time.perf_counter() - tick)
            self.gone.add(sub_id)

    def _sample(self, conn: Connection, progress: Progress, task: Any) -> None:
        last = (time.perf_counter(), 0, 0)
        while True:
            stopped = self.stop.wait(2.0)
            now = time.perf_counter()
            try:
                stats = conn.stub.Stats(pb.StatsRequest(), metadata=conn.metadata)
                rss_front = stats.front["rss_bytes"] / 2**20
                rss_shards = sum(s.counters["rss_bytes"] for s in stats.shards) / 2**20
            except grpc.RpcError as exc:
                self.tally.error("stats", f"{exc.code().name}: {exc.details()}")
                rss_front = rss_shards = 0.0
            with self.tally.lock:
                alerts = self.tally.alerts
                window = [lat for at, lat in self.tally.latencies if at >= last[0] - self.started]
                errors = sum(self.tally.errors.values())
            span = now - last[0]
            lat = percentiles(window)
            point = {
                "t": round(now - self.started, 2),
                "events_per_s": round((self.published - last[1]) / span, 1),
                "alerts_per_s": round((alerts - last[2]) / span, 1),
                "latency_p50_ms": lat.get("p50", 0.0),
                "latency_p99_ms": lat.get("p99", 0.0),
                "rss_front_mb": round(rss_front, 1),
                "rss_shards_mb": round(rss_shards, 1),
            }
            self.timeline.append(point)
            last = (now, self.published, alerts)
            progress.update(
                task,
                completed=min(now - self.started, self.s.duration),
                description=(
                    f"events {self.published:,} ({point['events_per_s']:,.0f}/s)  "
                    f"alerts {alerts:,} ({point['alerts_per_s']:,.0f}/s)  "
                    f"p50 {point['latency_p50_ms']:,.0f} ms  "
                    f"RSS {rss_front + rss_shards:,.0f} MB  errors {errors}"
                ),
            )
            if stopped:
                return

    # ----------------------------------------------------------------- phases

    def execute(self) -> dict[str, Any]:
        """Run every phase; the results."""
        s = self.s
        conn = Connection.open(self.address, token=self.tokens[-1])
        define(conn, self.work.stream_spec)
        tick = time.perf_counter()
        threads = [_Worker(self._subscribe_client, c) for c in range(s.subscribers)]
        owned = [t.join() for t in threads]
        subscribe_s = time.perf_counter() - tick
        for made in owned:
            self.stable.update(made)
        batch_s = list(self.tally.subscribe_s)
        self.tally.subscribe_s.clear()

        ready = threading.Barrier(s.subscribers + 1)
        listeners = [
            threading.Thread(target=self._listen, args=(c, [i for i, _ in owned[c]], ready))
            for c in range(s.subscribers)
        ]
        for thread in listeners:
            thread.start()
        ready.wait()
        time.sleep(1.0)  # the streams are registered server-side; seq 0 resumes cover the rest

        publishers = [
            Connection.open(self.address, token=self.tokens[-1]) for _ in range(s.publishers)
        ]
        barrier = threading.Barrier(s.publishers, action=lambda: self._close_epoch(conn))
        self.closing: deque[Any] = deque()
        self.started = time.perf_counter()
        self.next_epoch = (0, self._split(self.work.epoch(0, s.epoch_size)))
        # on standard error, and only on a terminal: standard output is the JSON summary
        with progress_bar(transient=False) as progress:
            task = progress.add_task("starting", total=s.duration)
            sampler = threading.Thread(target=self._sample, args=(conn, progress, task))
            sampler.start()
            workers = [
                threading.Thread(target=self._publish, args=(p, publishers[p], barrier))
                for p in range(s.publishers)
            ]
            if s.churn:
                workers.append(threading.Thread(target=self._churn))
            for thread in workers:
                thread.start()
            for thread in workers:
                thread.join()
            while self.closing:
                self._closed(self.closing.popleft())
            load_s = time.perf_counter() - self.started
            sampler.join()
        for c in publishers:
            c.close()

        drained = self._drain()
        for stream in self.streams:
            stream.cancel()
        for thread in listeners:
            thread.join()
        conn.close()
        check = self._check() if s.check else {}
        lat = percentiles([lat for _, lat in self.tally.latencies])
        return {
            "settings": asdict(s),
            "machine": machine(),
            "date": now(),
            "subscribe": {
                "subscriptions": len(self.stable),
                "seconds": round(subscribe_s, 1),
                "per_s": round(len(self.stable) / subscribe_s, 1) if subscribe_s else 0.0,
                "batch_latency_ms": percentiles(batch_s),
            },
            "load": {
                "seconds": round(load_s, 1),
                "events": self.published,
                "events_per_s": round(self.published / load_s, 1),
                "alerts": self.tally.alerts,
                "alerts_per_s": round(self.tally.alerts / load_s, 1),
                "latency_ms": lat,
                "churn_subscribes": len(self.churn_ids),
                "churn_per_s": round(len(self.churn_ids) / load_s, 2),
                "churn_unsubscribes": len(self.gone),
                "churn_subscribe_ms": percentiles(self.tally.subscribe_s),
                "churn_unsubscribe_ms": percentiles(self.tally.unsubscribe_s),
                "peak_rss_mb": max(
                    (p["rss_front_mb"] + p["rss_shards_mb"] for p in self.timeline), default=0.0
                ),
            },
            "drained": drained,
            "errors": dict(self.tally.errors),
            "error_samples": self.tally.error_samples,
            "check": check,
            "timeline": self.timeline,
        }

    def _drain(self) -> bool:
        """Wait until every subscription of this run has all its alerts; whether it did."""
        conns = [Connection.open(self.address, token=t) for t in self.tokens[: self.s.subscribers]]
        deadline = time.monotonic() + self.s.drain_timeout
        try:
            while time.monotonic() < deadline:
                behind = 0
                for c in conns:
                    listing = c.stub.ListSubscriptions(
                        pb.ListSubscriptionsRequest(), metadata=c.metadata
                    )
                    with self.tally.lock:
                        for sub in listing.subscriptions:
                            if sub.id not in self.stable and sub.id not in self.churn_ids:
                                continue  # an earlier run's, on a running server
                            got = self.tally.seqs.get(sub.id, ())
                            behind += sub.last_seq > (got[-1] if got else 0)
                if not behind:
                    return True
                time.sleep(1.0)
            return False
        finally:
            for c in conns:
                c.close()

    def _check(self) -> dict[str, Any]:
        """The stable subscriptions' alerts against ``cesar run``'s engine over the same events."""
        tick = time.perf_counter()
        expected = expected_alerts(self.work, self.stable, self.events)
        lost = extra = 0
        for sub_id in self.stable:
            want = expected.get(sub_id, Counter())
            got = self.tally.lines.get(sub_id, Counter())
            lost += sum((want - got).values())
            extra += sum((got - want).values())
        gaps = sum(
            seqs != list(range(1, len(seqs) + 1))
            for sub_id, seqs in self.tally.seqs.items()
            if sub_id in self.churn_ids
        )
        return {
            "stable_subscriptions": len(self.stable),
            "expected_alerts": sum(sum(c.values()) for c in expected.values()),
            "received_stable_alerts": sum(sum(c.values()) for c in self.tally.lines.values()),
            "lost": lost,
            "extra": extra,
            "churn_subscriptions_with_gaps": gaps,
            "seconds": round(time.perf_counter() - tick, 1),
        }


class _Worker(threading.Thread):
    """A thread that hands back its function's result from ``join``."""

    def __init__(self, target: Any, *args: Any) -> None:
        super().__init__()
        self.call = (target, args)
        self.result: Any = None
        self.start()

    def run(self) -> None:
        target, args = self.call
        self.result = target(*args)

    def join(self, timeout: float | None = None) -> Any:
        super().join(timeout)
        return self.result


def run(settings: Settings) -> dict[str, Any]:
    """One load test; the results (also written to ``settings.out``)."""
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    missing = unavailable()
    if missing is not None:  # said before the load, not found after it
        print(f"cesar loadtest: {missing}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as scratch:
        if settings.serve:
            process, address, tokens = serve(settings, Path(scratch))
        else:
            process = None
            address = loopback(settings.server)
            tokens = running_tokens(settings)
        try:
            result = Run(settings, address, tokens).execute()
        finally:
            if process is not None:
                process.send_signal(signal.SIGTERM)
                process.wait(120)
    (out / "loadtest.json").write_text(json.dumps(result, indent=1) + "\n")
    if missing is None:
        loadtest_figure(result, out / "loadtest.png")
    return result


def command(args: argparse.Namespace) -> int:
    """``cesar loadtest``: run, print the summary, exit 1 on errors or a failed check."""
    result = run(settings_from(args))
    summary = {k: result[k] for k in ("subscribe", "load", "drained", "errors", "check")}
    print(json.dumps(summary, indent=1))
    check = result["check"]
    failed = check and (check["lost"] or check["extra"] or check["churn_subscriptions_with_gaps"])
    return 1 if result["errors"] or not result["drained"] or failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    return command(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
