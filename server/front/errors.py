"""Errors of the front for its callers; each names the gRPC status it maps to."""

from __future__ import annotations


class FrontError(Exception):
    """An error for the caller; ``code`` names the gRPC status."""

    code = "INTERNAL"


class InvalidArgument(FrontError):
    code = "INVALID_ARGUMENT"


class NotFound(FrontError):
    code = "NOT_FOUND"


class AlreadyExists(FrontError):
    code = "ALREADY_EXISTS"


class PermissionDenied(FrontError):
    code = "PERMISSION_DENIED"


class FailedPrecondition(FrontError):
    code = "FAILED_PRECONDITION"


class ResourceExhausted(FrontError):
    code = "RESOURCE_EXHAUSTED"


class OutOfRange(FrontError):
    code = "OUT_OF_RANGE"


class Unavailable(FrontError):
    code = "UNAVAILABLE"


class DeadlineExceeded(FrontError):
    code = "DEADLINE_EXCEEDED"
