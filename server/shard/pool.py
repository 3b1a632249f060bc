"""The front's handle on its shard processes: start (or reach), call, watch, stop.

Shards are the front's children (below) or run on their own, possibly on
other machines (:class:`RemoteShards`: ``cesar serve --shard HOST:PORT``): the
pool then connects to each address, with TLS when given a CA, presenting the
shared secret, and :meth:`ShardPool.reconnect` waits for a restarted one.

Each shard is ``python -m cesar.server.shard.process`` with a pipe on its stdin:
the front writes a fresh secret as its first line (the shard answers only calls
that carry it, so no other process on the host can drive a shard), the planner's
constants as its second (given, or measured once while the shards import,
:func:`~cesar.server.host.calibrate.calibrate`), and keeps the pipe open (the shard
exits when it closes, i.e. when the front is gone); the shard prints ``ready <port>`` on its stdout.
Calls that go to several shards are issued together and awaited in shard order,
so results are deterministic.

Calls to one shard go through its own sender thread, one at a time, so each
shard sees its calls in the order they were made, whatever thread made them
and whether or not the caller waits.  An install is not awaited: the front
has stored the subscriptions, and the shards build them while it compiles the
next batch (an install's failure surfaces at the next call that checks it).
:meth:`ShardPool.apply_later` sends epochs without waiting, so the front can
take the next batch while the shards apply this one.
"""

from __future__ import annotations

import functools
import logging
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental

from cesar.server.engine.planned import PlanCosts
from cesar.server.host.calibrate import calibrate
from cesar.server.wire.transport import GRPC_OPTIONS
from cesar.v1 import cesar_pb2, shard_pb2, shard_pb2_grpc

log = logging.getLogger("cesar.front")


STREAMING = frozenset({"Apply"})
"""Shard methods that stream their answer."""

SHARD_CHANNEL = [*GRPC_OPTIONS, (grpc.experimental.ChannelOptions.SingleThreadedUnaryStream, 1)]
"""A shard channel's options: the Apply stream is read on the sender thread that called it,
without the channel's spin thread (grpc starts one for each call made while no other is open:
one a batch here; a call costs its caller 0.36–0.43 ms of CPU read so, 0.66–0.97 with one, on
the 2-core VM of perf/RESULTS.md)."""

APPLY = "/cesar.v1.Shard/Apply"
"""The Apply method's path, for the stub's method without a response parser (:func:`_stub`)."""


def _stub(channel: grpc.Channel) -> shard_pb2_grpc.ShardStub:
    """A shard's stub whose Apply yields each response as the bytes the shard wrote (as bytes
    too: :func:`~cesar.server.wire.alertbytes.shard_alerts`), which the front numbers without
    a message per alert (:func:`~cesar.server.wire.alertbytes.numbered`)."""
    stub = shard_pb2_grpc.ShardStub(channel)
    stub.Apply = channel.unary_stream(
        APPLY, request_serializer=shard_pb2.ApplyRequest.SerializeToString
    )
    return stub


_STATS = cesar_pb2.StatsRequest()


class ShardFailure(RuntimeError):
    """A shard process died or failed a call; the front cannot continue consistently."""


@dataclass(frozen=True)
class RemoteShards:
    """Shards started on their own (``cesar shard --listen``): their addresses in shard order,
    the secret they expect, the PEM root certificates to check their TLS (None: plaintext)."""

    addresses: tuple[str, ...]
    secret: str
    tls_ca: bytes | None = None
    connect_timeout: float = 30.0


class Asking:
    """Calls queued to the shards: :meth:`answers` waits for them (ShardFailure if a shard, or
    an install sent before, failed).

    A call to a shard queues behind the Apply calls in flight there: the front queues it
    under its lock (so it sees every batch begun before) and waits outside it.  A Stats call
    that waited under the lock held every publish until the apply ahead of it ended (the
    feed's pieces, the front's idle checkpoint and GetRouting all waited on it, measured).
    """

    def __init__(
        self,
        pool: ShardPool,
        unchecked: list[tuple[int, Future[Any]]],
        calls: list[tuple[int, Future[Any]]],
    ) -> None:
        self.pool = pool
        self.unchecked = unchecked
        """The installs and removals sent earlier without waiting, checked with these calls."""
        self.calls = calls

    def answers(self) -> list[Any]:
        """Each call's answer, in the order asked."""
        self.pool._all(self.unchecked)
        return self.pool._all(self.calls)


class Shared(Asking):
    """``asking``'s calls, which several callers wait for, each getting its own copies of the
    answers (messages the caller may change); ``sent``: :attr:`ShardPool.sent` just after
    them (None: other calls were sent among them)."""

    def __init__(self, asking: Asking, sent: int | None) -> None:
        super().__init__(asking.pool, asking.unchecked, asking.calls)
        self.sent = sent

    def answers(self) -> list[Any]:
        copies = []
        for answer in super().answers():
            copy = type(answer)()
            copy.CopyFrom(answer)
            copies.append(copy)
        return copies

    def answered(self) -> bool:
        """Whether every shard has answered (or failed)."""
        return all(future.done() for _, future in self.calls)


class Applying(Asking):
    """Epochs sent to the shards: :meth:`result` waits for their alerts."""

    @property
    def sent(self) -> bool:
        """Whether any shard was sent anything (an epoch), or has an install or removal
        checked with it."""
        return bool(self.calls or self.unchecked)

    def result(self) -> list[bytes]:
        """The shards' Apply responses as they were sent (serialized ``ApplyResponse``
        messages, :func:`~cesar.server.wire.alertbytes.numbered` reads them), shard by
        shard."""
        alerts: list[bytes] = []
        for responses in self.answers():
            alerts.extend(responses)
        return alerts


class ShardPool:
    """``count`` shard processes and a stub for each; child shards plan with ``costs`` (None:
    measured here at start)."""

    def __init__(
        self,
        count: int,
        shard_args: Sequence[str] = (),
        log_level: str = "INFO",
        data_dir: Path | None = None,
        remote: RemoteShards | None = None,
        metrics_port: int | None = None,
        costs: PlanCosts | None = None,
        cpus: Sequence[int] = (),
    ) -> None:
        self.count = len(remote.addresses) if remote is not None else count
        self.cpus = cpus
        """Child shard ``i`` runs on CPU ``cpus[i]`` (empty: where the front runs)."""
        self.metrics_port = metrics_port
        """Children's metrics: shard ``i`` on ``metrics_port + i`` (0: any; None: none)."""
        self.data_dir = data_dir
        self.remote = remote
        self.processes: list[subprocess.Popen[bytes]] = []
        self.channels: list[grpc.Channel] = []
        self.stubs: list[shard_pb2_grpc.ShardStub] = []
        self.metadata: list[tuple[tuple[str, str], ...]] = []
        self.pending: list[list[Future[Any]]] = [[] for _ in range(self.count)]
        """Per shard, the calls sent without waiting (installs, removals) and not yet checked."""
        self.senders = [
            ThreadPoolExecutor(1, thread_name_prefix=f"shard-{i}") for i in range(self.count)
        ]
        self.failed: str | None = None
        """The first failed call since the shards were (re)loaded: their state is unknown."""
        self.in_flight = [0] * self.count
        """Per shard, Apply calls sent and not answered yet: its backlog."""
        self._flight = threading.Lock()
        """Guards :attr:`in_flight` and :attr:`sent`."""
        self.sent = 0
        """Calls sent to the shards so far (all shards, every method)."""
        self._stats: Shared | None = None
        """The newest Stats calls, shared while unanswered (:meth:`stats`)."""
        try:
            if remote is None:  # all start at once, then each is reached
                for index in range(self.count):
                    self._spawn(index, shard_args, log_level)
                measured = costs is None
                if costs is None:  # while they import: one measurement of this host for all
                    costs = calibrate()
                log.info(
                    "plan constants measured" if measured else "plan constants given",
                    extra={"look": costs.look, "chain": costs.chain, "recompute": costs.recompute},
                )
                for index in range(self.count):
                    self._reach(index, costs)
            else:
                for index in range(self.count):
                    self._connect(index, remote)
        except BaseException:
            self.stop()
            raise

    def _connect(self, index: int, remote: RemoteShards) -> None:
        """Reach the shard at ``remote.addresses[index]`` and check that it takes our secret."""
        address = remote.addresses[index]
        if remote.tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(root_certificates=remote.tls_ca)
            channel = grpc.secure_channel(address, credentials, options=SHARD_CHANNEL)
        else:
            channel = grpc.insecure_channel(address, options=SHARD_CHANNEL)
        self.channels.append(channel)
        self.stubs.append(_stub(channel))
        self.metadata.append((("authorization", f"Bearer {remote.secret}"),))
        try:
            grpc.channel_ready_future(channel).result(timeout=remote.connect_timeout)
            self.stubs[index].Stats(
                cesar_pb2.StatsRequest(), metadata=self.metadata[index], timeout=30
            )
        except grpc.FutureTimeoutError:
            raise ShardFailure(
                f"shard {index} at {address} is not reachable "
                f"(waited {remote.connect_timeout:g} s): is `cesar shard --listen {address}` "
                "running, with TLS if --shard-tls-ca is given?"
            ) from None
        except grpc.RpcError as exc:
            raise ShardFailure(
                f"shard {index} at {address}: {exc.code().name}: {exc.details()} "
                "(does --shard-secret-file hold the shard's secret?)"
            ) from None
        log.info("shard connected", extra={"shard": index, "address": address})

    def reconnect(self, timeout: float) -> list[int]:
        """Wait up to ``timeout`` seconds for every remote shard to be reachable again; the
        indices of those still unreachable."""
        deadline = time.monotonic() + timeout
        missing = []
        for index, channel in enumerate(self.channels):
            try:
                grpc.channel_ready_future(channel).result(
                    timeout=max(0.1, deadline - time.monotonic())
                )
            except grpc.FutureTimeoutError:
                missing.append(index)
        self.pending = [[] for _ in range(self.count)]
        return missing

    def _spawn(self, index: int, shard_args: Sequence[str], log_level: str) -> None:
        """Start shard ``index``'s process and hand it its secret (:meth:`_reach` waits)."""
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cesar.server.shard.process",
                "--index",
                str(index),
                "--log-level",
                log_level,
                *shard_args,
                *(("--cpus", str(self.cpus[index])) if self.cpus else ()),
                *(
                    ()
                    if self.data_dir is None
                    else ("--data-dir", str(self.data_dir / "shards" / str(index)))
                ),
                *(
                    ()
                    if self.metrics_port is None
                    else ("--metrics-port", str(self.metrics_port and self.metrics_port + index))
                ),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        self.processes.append(process)
        assert process.stdin is not None and process.stdout is not None
        secret = secrets.token_hex(32)
        process.stdin.write(f"{secret}\n".encode())
        process.stdin.flush()
        self.metadata.append((("authorization", f"Bearer {secret}"),))

    def _reach(self, index: int, costs: PlanCosts) -> None:
        """Hand the spawned shard ``index`` the planner's ``costs``, wait until it is ready and
        open its channel."""
        process = self.processes[index]
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(f"{costs.look} {costs.chain} {costs.recompute}\n".encode())
        process.stdin.flush()
        line = process.stdout.readline().decode().split()
        if len(line) != 2 or line[0] != "ready":
            raise ShardFailure(f"shard {index} did not start (exit status {process.wait()})")
        channel = grpc.insecure_channel(f"127.0.0.1:{line[1]}", options=SHARD_CHANNEL)
        grpc.channel_ready_future(channel).result(timeout=30)
        self.channels.append(channel)
        self.stubs.append(_stub(channel))
        log.info("shard started", extra={"shard": index, "pid": process.pid, "port": int(line[1])})

    def dead(self) -> list[int]:
        """Indices of shard processes that have exited."""
        return [i for i, p in enumerate(self.processes) if p.poll() is not None]

    def _all(self, calls: Iterable[tuple[int, Future[Any]]]) -> list[Any]:
        results = []
        for index, future in calls:
            try:
                results.append(future.result())
            except grpc.RpcError as exc:
                self.failed = f"shard {index}: {exc.code().name}: {exc.details()}"
                raise ShardFailure(self.failed) from exc
        return results

    def _send(self, index: int, method: str, request: Any) -> Future[Any]:
        """Queue a call to shard ``index``; calls to one shard run one at a time, in order.
        A streaming call's result is the list of its messages."""
        call = getattr(self.stubs[index], method)
        metadata = self.metadata[index]
        with self._flight:
            self.sent += 1
        if method in STREAMING:
            return self.senders[index].submit(lambda: list(call(request, metadata=metadata)))
        return self.senders[index].submit(call, request, metadata=metadata)

    def _settle(self, targets: Iterable[int]) -> None:
        """Check the installs and removals sent to ``targets`` so far (waiting for them if
        need be)."""
        self._all(self._unchecked(targets))

    def _unchecked(self, targets: Iterable[int]) -> list[tuple[int, Future[Any]]]:
        """The installs and removals sent to ``targets`` and not checked yet, taken: the caller
        checks them."""
        taken: list[tuple[int, Future[Any]]] = []
        for i in targets:
            taken.extend((i, future) for future in self.pending[i])
            self.pending[i] = []
        return taken

    def install(self, batches: Sequence[shard_pb2.InstallBatch]) -> None:
        """Send ``batches[i]`` to shard ``i`` (not those with an empty batch) without waiting."""
        for i, batch in enumerate(batches):
            if batch.subscriptions:
                self.pending[i].append(self._send(i, "Install", batch))

    def remove(self, targets: Iterable[int], request: shard_pb2.RemoveRequest) -> None:
        """Remove a subscription from ``targets`` without waiting, as :meth:`install` sends:
        calls to a shard run in order, so no call sent after it sees the subscription, and
        the next check of a shard's unchecked calls (an Apply's, a Stats', a snapshot's)
        reports a failure.  A shard that does not hold it is skipped."""
        for i in targets:
            removing = self._send(i, "Remove", request)
            self.pending[i].append(self._tolerating(i, removing, grpc.StatusCode.NOT_FOUND))

    @staticmethod
    def _tolerating(index: int, call: Future[Any], code: grpc.StatusCode) -> Future[Any]:
        """``call``'s future, answered None (logged) where the shard refused it with ``code``."""
        out: Future[Any] = Future()

        def landed(done: Future[Any]) -> None:
            try:
                out.set_result(done.result())
            except grpc.RpcError as exc:
                if exc.code() != code:
                    out.set_exception(exc)
                    return
                log.warning("shard call refused", extra={"shard": index, "error": exc.details()})
                out.set_result(None)

        call.add_done_callback(landed)
        return out

    def apply_later(self, requests: Sequence[Sequence[shard_pb2.ApplyRequest]]) -> Applying:
        """Send each shard its epochs (``requests[i]``: shard ``i``'s, in order) without
        waiting; :meth:`Applying.result` waits."""
        targets = [i for i, r in enumerate(requests) if r]
        unchecked = self._unchecked(targets)
        calls = [(i, self._send(i, "Apply", request)) for i in targets for request in requests[i]]
        with self._flight:
            for i, _ in calls:
                self.in_flight[i] += 1
        for i, future in calls:  # a call done already runs its callback here, at once
            future.add_done_callback(functools.partial(self._landed, i))
        return Applying(self, unchecked, calls)

    def _landed(self, shard: int, _: Future[Any]) -> None:
        """An Apply call to ``shard`` was answered (or failed)."""
        with self._flight:
            self.in_flight[shard] -= 1

    def ask(self, method: str, request: Any, targets: Iterable[int]) -> Asking:
        """Queue ``method`` to each of ``targets`` (a unary call) behind the calls sent before,
        with the installs and removals sent to them checked when answered (:class:`Asking`)."""
        targets = list(targets)
        unchecked = self._unchecked(targets)
        return Asking(self, unchecked, [(i, self._send(i, method, request)) for i in targets])

    def stats(self) -> Asking:
        """Ask every shard for its counters: the answers are ShardStats in shard order.

        Callers while a Stats call is unanswered and no other call was sent to a shard
        since share it: a new call would be queued behind the same calls, so its answers
        would be the same.  However many clients poll, a shard answers at most one Stats
        between two other calls (each walks all its subscriptions' plans).
        """
        shared = self._stats
        if shared is None or shared.sent != self.sent or shared.answered():
            before = self.sent
            asking = self.ask("Stats", _STATS, range(self.count))
            alone = self.sent == before + len(asking.calls)
            shared = self._stats = Shared(asking, self.sent if alone else None)
        return shared

    def place(self, subscription: str, shards: Sequence[int]) -> Asking:
        """Ask each of ``shards`` where ``subscription`` sits there (PlaceResponse, in the
        order of ``shards``): the template edges it uses, what it holds, the steps charged
        to it."""
        return self.ask("Place", shard_pb2.PlaceRequest(subscription=subscription), shards)

    def snapshot(self, position: int, keep: Sequence[int]) -> list[shard_pb2.SnapshotResponse]:
        """Every shard saves its run state as the snapshot at ``position``, keeping ``keep``."""
        self._settle(range(self.count))
        request = shard_pb2.SnapshotRequest(position=position, keep=keep)
        calls = [(i, self._send(i, "Snapshot", request)) for i in range(self.count)]
        return self._all(calls)

    def load(self, position: int, server: int) -> list[str]:
        """Every shard starts over from the snapshot at ``position`` (0: empty) of the server
        with identity ``server``; the reasons of the shards that refused it (empty: all
        loaded)."""
        self._settle(range(self.count))
        calls = [
            (
                i,
                self._send(
                    i,
                    "Load",
                    shard_pb2.LoadRequest(
                        position=position, shard=i, shards=self.count, server=server
                    ),
                ),
            )
            for i in range(self.count)
        ]
        responses: list[shard_pb2.LoadResponse] = self._all(calls)
        return [f"shard {i}: {r.reason}" for i, r in enumerate(responses) if not r.ok]

    def resume(self) -> int:
        """Every shard restores the run state it loaded; the live instances restored."""
        self._settle(range(self.count))
        request = shard_pb2.ResumeRequest()
        calls = [(i, self._send(i, "Resume", request)) for i in range(self.count)]
        return sum(r.instances for r in self._all(calls))

    def stop(self, grace: float = 10.0) -> None:
        """Close the pipes (shards exit), wait up to ``grace`` seconds, then kill stragglers."""
        for sender in self.senders:
            sender.shutdown(wait=False, cancel_futures=True)
        for channel in self.channels:
            channel.close()
        for process in self.processes:
            if process.stdin is not None:
                process.stdin.close()
        deadline = time.monotonic() + grace
        for process in self.processes:
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
