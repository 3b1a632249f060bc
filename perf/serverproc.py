"""A real ``cesar serve`` process for benchmarks and tests, plus clients and expected alerts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import grpc

from cesar.automata.schema import Event, parse_stream_spec
from cesar.examples import QUERIES as EXAMPLE_QUERIES
from cesar.examples import STOCKS_SAMPLE
from cesar.server.engine.workload import Workload
from cesar.server.wire.client import Connection, alerts, publish_requests
from cesar.server.wire.convert import trusted_event
from cesar.server.wire.eventfile import event_json, event_record, read_events
from cesar.v1 import cesar_pb2 as pb

CESAR = Path(sys.executable).with_name("cesar")
STOCK = "Stock(Name:string,Price:float,Volume:int)[min]"
SAMPLE = STOCKS_SAMPLE
QUERIES = [EXAMPLE_QUERIES / f"{n}.cel" for n in ("rising", "drops", "drop_after_rise")]


class Server:
    """``cesar serve`` on a free loopback port over ``data_dir``; restartable."""

    def __init__(self, data_dir: Path, *args: str, shards: int = 2) -> None:
        self.data_dir = data_dir
        self.args = ["--shards", str(shards), "--stream", STOCK, *args]
        self.process: subprocess.Popen[str] | None = None
        self.address = ""
        self.log = data_dir.parent / f"{data_dir.name}.log"

    def start(self) -> Server:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [str(CESAR), "serve", "--data-dir", str(self.data_dir), "--port", "0", *self.args],
            stdout=subprocess.PIPE,
            stderr=open(self.log, "a"),  # noqa: SIM115 - the child keeps it
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        assert line and line[0] == "serving", f"server did not start: {self.log.read_text()}"
        self.address = line[1]
        return self

    def keep_address(self) -> Server:
        """Restarts listen on the port the kernel gave this start (clients reconnect to it)."""
        self.args += ["--port", self.address.rsplit(":", 1)[1]]
        return self

    def connect(self, token: str | None = None, tls_ca: Path | None = None) -> Connection:
        return Connection.open(self.address, token, tls_ca)

    def shard_pids(self) -> list[int]:
        """The pids of the shard processes the front runs now, in shard order (read from
        /proc, whatever the log level)."""
        assert self.process is not None
        found = []
        for task in Path(f"/proc/{self.process.pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
                if b"cesar.server.shard.process" in command:
                    found.append((int(command[command.index(b"--index") + 1]), int(child)))
        return [pid for _, pid in sorted(found)]

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)

    def stop(self) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            tail = "\n".join(self.log.read_text().splitlines()[-60:])
            raise AssertionError(f"server did not stop in 60 s; its log ends:\n{tail}") from None


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not status.exists() or status.read_text().split()[2] != "Z"


def wait_gone(pids: Iterable[int], seconds: float = 10) -> list[int]:
    """The pids still running after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    left = list(pids)
    while left and time.monotonic() < deadline:
        left = [p for p in left if alive(p)]
        time.sleep(0.05)
    return left


def sample_events(path: Path = SAMPLE) -> list[Event]:
    with open(path) as handle:
        return read_events(handle, str(path), {"Stock": parse_stream_spec(STOCK)}).events


def expected_lines(queries: Sequence[tuple[str, str]], events: Sequence[Event]) -> Counter[str]:
    """What ``cesar run`` prints for ``queries`` over ``events`` (one JSON line per alert)."""
    program = Workload.build([parse_stream_spec(STOCK)], queries)
    schemas = {q.name: q.output for q in program.queries}
    return Counter(
        event_json(e, schemas[e.stream]) for e in program.run(list(events), engine="engine")
    )


def alert_line(alert: pb.Alert) -> str:
    return json.dumps(event_record(trusted_event(alert.event)), sort_keys=True)


def normalized(lines: Counter[str]) -> Counter[str]:
    """JSON lines with sorted keys and without ``time`` (t0 and t1 in ISO 8601, derived)."""
    out: Counter[str] = Counter()
    for line, count in lines.items():
        record = json.loads(line)
        record.pop("time", None)
        out[json.dumps(record, sort_keys=True)] += count
    return out


def publish(conn: Connection, events: Sequence[Event], batch: int = 500, close: bool = True) -> int:
    """PublishBatch ``events`` in batches; with ``close`` the last closes its epoch. Accepted."""
    accepted = 0
    for request in publish_requests(events, batch, close):
        response = conn.stub.PublishBatch(request, metadata=conn.metadata)
        assert not response.rejected, response.rejected
        accepted += response.accepted
    return accepted


def quote(t: int, price: float = 150.0, volume: int = 1) -> pb.Event:
    """An IBM quote of the ``Stock`` stream the server defines, at ``t``."""
    return pb.Event(
        stream="Stock",
        t0=t,
        t1=t,
        attributes={
            "Name": pb.Value(string_value="IBM"),
            "Price": pb.Value(float_value=price),
            "Volume": pb.Value(int_value=volume),
        },
    )


def subscribe(conn: Connection, text: str, name: str = "") -> pb.Subscription:
    reply: pb.Subscription = conn.stub.Subscribe(
        pb.SubscribeRequest(query=text, name=name), metadata=conn.metadata
    )
    return reply


def listed(conn: Connection) -> list[pb.Subscription]:
    """The caller's subscriptions, as ListSubscriptions gives them."""
    request = pb.ListSubscriptionsRequest()
    return list(conn.stub.ListSubscriptions(request, metadata=conn.metadata).subscriptions)


def collect(
    conn: Connection, count: int, request: pb.ListenRequest | None = None, timeout: float = 60
) -> list[pb.Alert]:
    """The first ``count`` alerts of a Listen stream (fails on timeout)."""
    stream = conn.stub.Listen(
        request or pb.ListenRequest(), metadata=conn.metadata, timeout=timeout
    )
    out: list[pb.Alert] = []
    if count == 0:
        stream.cancel()
        return out
    for alert in alerts(stream):
        out.append(alert)
        if len(out) == count:
            break
    stream.cancel()
    return out


def scrape(url: str) -> dict[str, float]:
    """``name{labels}`` → value of every sample at a Prometheus endpoint ``url``."""
    with urllib.request.urlopen(url, timeout=30) as response:
        lines = response.read().decode().splitlines()
    samples = {}
    for line in lines:
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def status_of(call, *args, **kwargs) -> tuple[grpc.StatusCode, str]:  # type: ignore[no-untyped-def]
    """The error status of a call that must fail."""
    try:
        call(*args, **kwargs)
    except grpc.RpcError as exc:
        return exc.code(), exc.details()
    raise AssertionError("the call succeeded")
