"""The console's HTTP server: pages, their static files and a JSON API behind the tokens.

Python's own ``http.server`` (threaded, one thread a connection): the console serves a
few people looking, not traffic, so a small, maintained stack is enough, and it adds no
dependency.  The API reads the ``Authorization: Bearer <token>`` header as gRPC calls
do (no cookies, so another site cannot act for a logged-in browser); without
``--tokens`` everyone is ``anonymous``.

* ``GET /`` and ``GET /static/<file>``: the page and its files (vendored, no CDN);
* ``GET /api/whoami``, ``/api/subscriptions``, ``/api/subscriptions/<id>`` (and
  ``…/<id>/runtime``, what it does now),
  ``/api/streams``, ``/api/shards``; ``POST /api/explain``, ``POST /api/subscribe`` and
  ``POST /api/try`` (a run on the bundled sample, or with ``"on": "recent"`` on the latest
  events of the server's own input streams, :mod:`cesar.server.console.sample`) with
  ``{"query": text}`` (:mod:`cesar.server.console.views`);
* ``GET /api/alerts?subscription=ID&after=ID:SEQ`` (each repeatable): the caller's alerts
  as Server-Sent Events (``id: ID:SEQ``, ``data:`` the alert as ``cesar listen`` prints
  it), resumed after the seqs given, then live, until the browser goes away.

Errors are JSON ``{"code", "message"}`` with the HTTP status of the gRPC code's
meaning (400, 401, 403, 404, 413, 429); a body that is not a JSON object of text (nested
too deep, a lone surrogate) is a 400.  Budgets: a request body of at most
:data:`MAX_BODY_BYTES`; :data:`TIMEOUT` seconds to send a whole request, line, headers and
body (a connection idle or trickling for longer is cut); at most :data:`MAX_CONNECTIONS`
connections at once (the others wait in the listen queue) and at most
:data:`MAX_REQUESTS_PER_TOKEN` requests of one token at once (429 past it).  An alert
stream leaves the connection budget once granted: it counts among its client's Listen
streams (``max_listens``) instead, and gives its slot back however it ends.  When nobody
looks, the console costs event processing nothing: it runs only when asked.
"""

from __future__ import annotations

import contextlib
import json
import logging
import select
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from cesar.server.console import views
from cesar.server.console.sample import SampleRuns
from cesar.server.front import limits
from cesar.server.front.auth import Client, Clients
from cesar.server.front.errors import FrontError
from cesar.server.front.front import Front

log = logging.getLogger("cesar.console")

MAX_BODY_BYTES = limits.MAX_QUERY_BYTES + 1024
"""Bytes of one request body: a query at its largest, in JSON."""
TIMEOUT = 10.0
"""Seconds a connection may take to send a whole request (or stay idle between two)."""
MAX_CONNECTIONS = 256
"""Connections served at once, alert streams aside (each a thread)."""
MAX_REQUESTS_PER_TOKEN = 8
"""Requests of one token served at once (alert streams aside: ``max_listens`` bounds them)."""

STATUS = {
    "INVALID_ARGUMENT": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "FAILED_PRECONDITION": 409,
    "PAYLOAD_TOO_LARGE": 413,
    "RESOURCE_EXHAUSTED": 429,
    "DEADLINE_EXCEEDED": 504,
    "UNAVAILABLE": 503,
}
"""The HTTP status of each error code the console answers with."""

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}
"""The page's files, and what each is (nothing else is served)."""

HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class ConsoleError(Exception):
    """An answer other than 200: its code (a key of :data:`STATUS`) and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Console(ThreadingHTTPServer):
    """The console on ``host:port`` (0: any free port) over ``front``, behind ``clients``;
    HTTPS with the server's own certificate and key when ``tls`` gives them (the tokens
    travel in every request, so they are encrypted whenever gRPC's are)."""

    daemon_threads = True

    def __init__(
        self,
        front: Front,
        clients: Clients,
        host: str,
        port: int,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        super().__init__((host, port), _Handler)
        self.scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.socket = context.wrap_socket(self.socket, server_side=True)
            self.scheme = "https"
        self.front = front
        self.clients = clients
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.busy: Counter[str] = Counter()
        """Requests under way per client (:data:`MAX_REQUESTS_PER_TOKEN`)."""
        self.busy_lock = threading.Lock()
        self.stopping = threading.Event()
        self.samples = SampleRuns()
        self.held = threading.local()
        """Per serving thread, its connection's :class:`Slot`."""
        self.thread = threading.Thread(target=self.serve_forever, name="console", daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on."""
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        """Its address, e.g. ``http://127.0.0.1:8080/``."""
        host = self.server_address[0]
        return f"{self.scheme}://{host.decode() if isinstance(host, bytes) else host}:{self.port}/"

    def start(self) -> Console:
        """Serve on a daemon thread."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (alert streams end) and close the socket."""
        self.stopping.set()
        self.shutdown()
        self.server_close()

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve at most MAX_CONNECTIONS connections at once."""
        self.slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        slot = Slot(self.slots)
        self.held.slot = slot
        try:
            super().process_request_thread(request, client_address)
        finally:
            slot.release()

    @contextlib.contextmanager
    def serving(self, client: Client) -> Iterator[None]:
        """One request of ``client`` under way; ResourceExhausted past
        :data:`MAX_REQUESTS_PER_TOKEN`."""
        with self.busy_lock:
            if self.busy[client.name] >= MAX_REQUESTS_PER_TOKEN:
                raise ConsoleError(
                    "RESOURCE_EXHAUSTED",
                    f"{client.name} has {MAX_REQUESTS_PER_TOKEN} console requests under way "
                    "(max_requests_per_token): wait for one",
                )
            self.busy[client.name] += 1
        try:
            yield
        finally:
            with self.busy_lock:
                self.busy[client.name] -= 1


class Slot:
    """A connection's place among :data:`MAX_CONNECTIONS`, given back once."""

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self._slots: threading.BoundedSemaphore | None = slots

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.release()


def _query(body: dict[str, Any] | None) -> str:
    """The ``query`` of a POST's JSON body."""
    query = None if body is None else body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ConsoleError("INVALID_ARGUMENT", 'expected {"query": "<CEL or pattern>"}')
    try:
        query.encode()
    except UnicodeEncodeError as exc:
        raise ConsoleError(
            "INVALID_ARGUMENT", f"the query holds a lone surrogate at offset {exc.start}"
        ) from None
    return query


class _Handler(BaseHTTPRequestHandler):
    server: Console
    timeout = TIMEOUT
    protocol_version = "HTTP/1.1"
    server_version = "cesar-console"

    def log_message(self, format: str, *args: object) -> None:
        """Requests are not logged (the server's log is for what it does)."""

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def handle(self) -> None:
        """Serve the connection; one that fails its TLS handshake or goes away is dropped."""
        try:
            super().handle()
        except (ssl.SSLError, ConnectionError, TimeoutError, OSError):
            self.close_connection = True

    def handle_one_request(self) -> None:
        """One request, which must arrive whole within :data:`TIMEOUT` seconds (the
        connection is cut otherwise, however slowly it trickles)."""
        self._deadline = threading.Timer(TIMEOUT, self._cut)
        self._deadline.start()
        try:
            super().handle_one_request()
        finally:
            self._deadline.cancel()

    def _cut(self) -> None:
        """The request's time is up: end the connection (its reads fail at once)."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, method: str) -> None:
        path, _, query = self.path.partition("?")
        try:
            if method == "GET" and (path == "/" or path.startswith("/static/")):
                self._deadline.cancel()
                self._static("index.html" if path == "/" else path.removeprefix("/static/"))
                return
            if method == "GET" and path == "/api/alerts":
                self._deadline.cancel()
                self._alerts(self._client(), parse_qs(query))
                return
            body = self._body() if method == "POST" else None
            self._deadline.cancel()
            client = self._client()
            with self.server.serving(client):
                answer = self._api(client, method, path, body)
            self._json(200, answer)
        except (TimeoutError, ConnectionError):  # a client that stalls or goes: drop it
            self.close_connection = True
        except ConsoleError as exc:
            self._json(STATUS[exc.code], {"code": exc.code, "message": str(exc)})
        except FrontError as exc:
            self._json(STATUS.get(exc.code, 500), {"code": exc.code, "message": str(exc)})

    def _api(self, client: Client, method: str, path: str, body: dict[str, Any] | None) -> Any:
        front = self.server.front
        route = (method, *path.strip("/").split("/"))
        if route == ("GET", "api", "whoami"):
            return views.whoami(client)
        if route == ("GET", "api", "subscriptions"):
            return views.subscriptions(front, client)
        if len(route) == 4 and route[:3] == ("GET", "api", "subscriptions"):
            return views.subscription(front, client, route[3])
        if (
            len(route) == 5
            and route[:3] == ("GET", "api", "subscriptions")
            and route[4] == "runtime"
        ):
            return views.runtime(front, client, route[3])
        if route == ("GET", "api", "streams"):
            return views.streams(front, client)
        if route == ("GET", "api", "shards"):
            return views.shards(front, client)
        if route == ("POST", "api", "explain"):
            return views.explained(front, client, _query(body))
        if route == ("POST", "api", "subscribe"):
            return views.subscribed(front, client, _query(body))
        if route == ("POST", "api", "try"):
            recent = (body or {}).get("on") == "recent"
            return views.tried(front, client, self.server.samples, _query(body), recent)
        raise ConsoleError("NOT_FOUND", f"no {method} {path}")

    def _alerts(self, client: Client, query: dict[str, list[str]]) -> None:
        """Server-Sent Events of the caller's alerts (module docstring); the headers go once
        the stream is granted, so a refusal (an unknown subscription, past the retention, too
        many Listen streams) is a JSON error as for any call."""
        after: dict[str, int] = {}
        for item in query.get("after", []):
            sub, colon, seq = item.rpartition(":")
            if not colon or not seq.isdigit():
                raise ConsoleError("INVALID_ARGUMENT", f"after={item!r}: expected ID:SEQ")
            after[sub] = int(seq)
        listening, records = views.alerts(  # the checks run here, before anything is sent
            self.server.front, client, query.get("subscription", []), after, self._watched
        )
        self.server.held.slot.release()  # a Listen stream now: max_listens bounds it
        try:  # the Listen slot goes back however this ends, the browser gone before the headers
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            for name, value in HEADERS.items():
                self.send_header(name, value)
            self.end_headers()
            self.close_connection = True
            self.wfile.write(b": alerts\n\n")
            self.wfile.flush()
            try:
                for record in records:
                    self._event(record)
            except FrontError as exc:  # e.g. the retention passed a slow reader: said, ended
                error = json.dumps({"code": exc.code, "message": str(exc)})
                self.wfile.write(f"event: error\ndata: {error}\n\n".encode())
        finally:
            listening.close()

    def _event(self, record: dict[str, Any]) -> None:
        line = f"id: {record['subscription']}:{record['seq']}\ndata: {json.dumps(record)}\n\n"
        self.wfile.write(line.encode())
        self.wfile.flush()

    def _watched(self) -> bool:
        """Whether the browser still listens and the console still serves."""
        if self.server.stopping.is_set():
            return False
        readable, _, _ = select.select([self.connection], [], [], 0)
        if not readable:
            return True
        try:
            return bool(self.connection.recv(1, socket.MSG_PEEK))
        except OSError:
            return False

    def _client(self) -> Client:
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        client = self.server.clients.authenticate(token if scheme.lower() == "bearer" else None)
        if client is None:
            raise ConsoleError("UNAUTHENTICATED", "missing or unknown bearer token")
        if not client.may("client"):
            raise ConsoleError("PERMISSION_DENIED", "the console needs a token with scope client")
        return client

    def _body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise ConsoleError("INVALID_ARGUMENT", "a POST needs its Content-Length") from None
        if not 0 <= length <= MAX_BODY_BYTES:
            self.close_connection = True
            raise ConsoleError(
                "PAYLOAD_TOO_LARGE", f"a request body is at most {MAX_BODY_BYTES} bytes"
            )
        try:
            data = json.loads(self.rfile.read(length))
        except (ValueError, UnicodeDecodeError):
            raise ConsoleError("INVALID_ARGUMENT", "the body is not JSON") from None
        except RecursionError:
            raise ConsoleError("INVALID_ARGUMENT", "the body's JSON nests too deep") from None
        if not isinstance(data, dict):
            raise ConsoleError("INVALID_ARGUMENT", "the body is not a JSON object")
        return data

    def _static(self, name: str) -> None:
        kind = STATIC.get(name)
        if kind is None:
            raise ConsoleError("NOT_FOUND", f"no file {name!r}")
        self._send(200, kind, files("cesar.server.console").joinpath("static", name).read_bytes())

    def _json(self, status: int, data: Any) -> None:
        self._send(status, "application/json", json.dumps(data).encode())

    def _send(self, status: int, kind: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
