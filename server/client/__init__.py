"""cesar's Python client: every call of the API with Python values, errors as exceptions
that keep the server's reason, and alerts as an iterator that resumes and reconnects.

docs/client.md is the guide; :class:`Client` blocks, :class:`AsyncClient` is the same
over asyncio.
"""

from cesar.client.aio import AsyncClient, AsyncListener
from cesar.client.blocking import Client, Listener
from cesar.client.delivery import DeliveryError, RotatingFile, StandardOutput, Webhook
from cesar.client.errors import (
    AlreadyExists,
    Cancelled,
    CesarError,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from cesar.client.model import Alert, Published, Rejection, Stream, Subscription

__all__ = [
    "Alert",
    "AlreadyExists",
    "AsyncClient",
    "AsyncListener",
    "Cancelled",
    "CesarError",
    "Client",
    "DeadlineExceeded",
    "DeliveryError",
    "FailedPrecondition",
    "InvalidArgument",
    "Listener",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "Published",
    "Rejection",
    "ResourceExhausted",
    "RotatingFile",
    "StandardOutput",
    "Stream",
    "Subscription",
    "Unauthenticated",
    "Unavailable",
    "Webhook",
]
