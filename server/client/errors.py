"""The client's exceptions: one class per gRPC status a cesar server answers with.

Each keeps the server's reason word for word (``reason``) and the status name
(``code``), so a program catches what it can mend and shows the rest:

>>> try:
...     raise error("INVALID_ARGUMENT", "1:8: expected a stream name")
... except InvalidArgument as exc:
...     (exc.code, exc.reason, str(exc))
('INVALID_ARGUMENT', '1:8: expected a stream name', 'INVALID_ARGUMENT: 1:8: expected a stream name')
"""

from __future__ import annotations

import grpc


class CesarError(Exception):
    """A call the server refused, or could not answer; ``reason`` is the server's text."""

    code = "UNKNOWN"

    def __init__(self, reason: str) -> None:
        super().__init__(f"{self.code}: {reason}")
        self.reason = reason


class InvalidArgument(CesarError):
    """A malformed query (with line and column), event, name or request."""

    code = "INVALID_ARGUMENT"


class NotFound(CesarError):
    """An unknown subscription or stream, or one that is not the caller's."""

    code = "NOT_FOUND"


class AlreadyExists(CesarError):
    """A stream name taken, or an idempotency key that made something else."""

    code = "ALREADY_EXISTS"


class PermissionDenied(CesarError):
    """The token's scope does not allow the call, or the thing is another client's."""

    code = "PERMISSION_DENIED"


class Unauthenticated(CesarError):
    """No token, or one the server does not know."""

    code = "UNAUTHENTICATED"


class FailedPrecondition(CesarError):
    """The call does not fit the server's state now (a stream still read, ...)."""

    code = "FAILED_PRECONDITION"


class ResourceExhausted(CesarError):
    """Past one of the caller's budgets; the reason names it."""

    code = "RESOURCE_EXHAUSTED"


class OutOfRange(CesarError):
    """A resume point past the last alert."""

    code = "OUT_OF_RANGE"


class Unavailable(CesarError):
    """No server answered (down, restarting, or shutting down)."""

    code = "UNAVAILABLE"


class DeadlineExceeded(CesarError):
    """The call's deadline passed first."""

    code = "DEADLINE_EXCEEDED"


class Cancelled(CesarError):
    """The call was cancelled."""

    code = "CANCELLED"


_BY_CODE = {
    kind.code: kind
    for kind in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        PermissionDenied,
        Unauthenticated,
        FailedPrecondition,
        ResourceExhausted,
        OutOfRange,
        Unavailable,
        DeadlineExceeded,
        Cancelled,
    )
}


def error(code: str, reason: str) -> CesarError:
    """The exception for status ``code`` (its name, e.g. ``NOT_FOUND``) and ``reason``."""
    kind = _BY_CODE.get(code)
    if kind is None:
        made = CesarError(reason)
        made.code = code
        made.args = (f"{code}: {reason}",)
        return made
    return kind(reason)


def from_rpc(exc: grpc.RpcError) -> CesarError:
    """The exception for a failed gRPC call."""
    code = exc.code()
    return error(code.name, exc.details() or code.name)
