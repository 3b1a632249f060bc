"""cesar.client.delivery: a JSON Lines file that rotates, and a webhook on a real loopback
HTTP server that fails, then answers."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cesar.client import Alert, DeliveryError, RotatingFile, Webhook


def alerts(*seqs: int) -> list[Alert]:
    return [Alert("s1", seq, notice="x" * 8) for seq in seqs]


def sent(*seqs: int) -> list[dict[str, object]]:
    return [{"subscription": "s1", "seq": seq, "notice": "x" * 8} for seq in seqs]


class Receiver(ThreadingHTTPServer):
    """Answers each POST with the next status of ``statuses`` (then 200), keeping the bodies
    it answered 200."""

    def __init__(self, statuses: list[int]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.statuses = statuses
        self.bodies: list[object] = []
        self.posts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/alerts"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.posts += 1
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        if status == 200:
            self.server.bodies.append((self.headers["Authorization"], json.loads(body)))
        self.send_response(status)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def receiver(request: pytest.FixtureRequest) -> Iterator[Receiver]:
    server = Receiver(list(request.param))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


@pytest.mark.parametrize("receiver", [[503, 429]], indirect=True)
def test_a_webhook_retries_what_it_may_and_delivers_each_batch_once(receiver: Receiver) -> None:
    waits: list[float] = []
    said: list[str] = []
    hook = Webhook(receiver.url, {"Authorization": "Bearer t"}, waits.append, said.append)
    hook.deliver(alerts(1, 2))
    hook.deliver(alerts(3))
    assert receiver.bodies == [("Bearer t", sent(1, 2)), ("Bearer t", sent(3))]
    assert waits == [0.5, 1.0] and hook.retries == 2 and receiver.posts == 4
    assert "HTTP 503; retrying in 0.5 s" in said[0] and "HTTP 429" in said[1]


@pytest.mark.parametrize("receiver", [[400]], indirect=True)
def test_a_webhook_that_refuses_the_request_is_an_error_not_a_retry(receiver: Receiver) -> None:
    hook = Webhook(receiver.url, {}, lambda _: None, lambda _: None)
    with pytest.raises(DeliveryError, match="HTTP 400"):
        hook.deliver(alerts(1))
    assert receiver.posts == 1


def test_a_webhook_nobody_answers_is_retried_with_a_growing_wait() -> None:
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 8:
            raise KeyboardInterrupt

    hook = Webhook("http://127.0.0.1:9/alerts", {}, sleep, lambda _: None)  # discard: refused
    with pytest.raises(KeyboardInterrupt):
        hook.deliver(alerts(1))
    assert waits == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_file_rotates_past_its_size_and_keeps_the_newest(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "alerts.jsonl"
    sink = RotatingFile(path, rotate_bytes=100, keep=2)
    for seq in range(1, 10):
        sink.deliver(alerts(seq))
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["alerts.jsonl", "alerts.jsonl.1", "alerts.jsonl.2"]
    kept = [
        json.loads(line)["seq"]
        for name in ("alerts.jsonl.2", "alerts.jsonl.1", "alerts.jsonl")
        for line in (tmp_path / name).read_text().splitlines()
    ]
    assert kept == [5, 6, 7, 8, 9]  # 55 bytes a line, two a file; the oldest files went


def test_a_webhook_stops_retrying_at_its_deadline() -> None:
    import time

    waits: list[float] = []
    deadline = time.monotonic() + 2.0

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)

    hook = Webhook("http://127.0.0.1:9/alerts", {}, sleep, lambda _: None, deadline)
    with pytest.raises(DeliveryError, match="deadline passed while retrying: 1 alerts"):
        hook.deliver(alerts(1))
    assert waits[:2] == [0.5, 1.0] and sum(waits) <= 2.1
    assert time.monotonic() >= deadline - 0.05
