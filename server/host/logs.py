"""Structured logs: one JSON object per line on stderr.

Every record carries time, level, process role (``front``, ``shard-0``, ...),
logger, message, and the ``extra`` fields the call site passes.

>>> import io, json
>>> record = logging.LogRecord("cesar.front", logging.INFO, "", 0, "started", (), None)
>>> record.port = 50051
>>> json.loads(JsonFormatter("front").format(record))["port"]
50051
"""

from __future__ import annotations

import json
import logging
import time

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line with its extra fields."""

    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "role": self.role,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD:
                out[key] = value
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(level: str, role: str) -> None:
    """Send the ``cesar`` loggers to stderr as JSON lines at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter(role))
    root = logging.getLogger("cesar")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
