"""Translation between protobuf messages and the core's domain objects.

The servicers stay thin: they call these functions and the front, nothing
else.  Validation of incoming events is :func:`cesar.automata.schema.validate_event`,
so a malformed event is rejected with the same field and reason as in
``cesar run``.
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.schema import Event, EventError, StreamSchema, Value, validate_event
from cesar.v1 import cesar_pb2 as pb


def value_of(message: pb.Value) -> object:
    """The Python value a :class:`pb.Value` holds (None when unset)."""
    kind = message.WhichOneof("kind")
    return None if kind is None else getattr(message, kind)


def to_value(value: Value) -> pb.Value:
    """A Python attribute value as a :class:`pb.Value`."""
    if isinstance(value, bool):
        return pb.Value(bool_value=value)
    if isinstance(value, int):
        return pb.Value(int_value=value)
    if isinstance(value, float):
        return pb.Value(float_value=value)
    return pb.Value(string_value=value)


def to_event(event: Event) -> pb.Event:
    """A domain event as a :class:`pb.Event`."""
    return pb.Event(
        stream=event.stream,
        t0=event.t0,
        t1=event.t1,
        attributes={name: to_value(value) for name, value in event.values},
    )


def from_event(message: pb.Event, schemas: Mapping[str, StreamSchema]) -> Event:
    """Validate a :class:`pb.Event` against its stream's schema; raise :class:`EventError`."""
    schema = schemas.get(message.stream)
    if schema is None:
        reason = "missing" if not message.stream else f"unknown stream {message.stream!r}"
        raise EventError(None, "stream", reason)
    raw: dict[str, object] = {name: value_of(v) for name, v in message.attributes.items()}
    for name, value in raw.items():
        if value is None:
            raise EventError(schema.name, name, "value not set")
    raw["t1"] = message.t1
    raw["t0"] = message.t1 if message.point else message.t0
    return validate_event(schema, raw)


def trusted_event(message: pb.Event) -> Event:
    """A :class:`pb.Event` the front has validated already, without checking it again."""
    return Event(
        message.stream,
        message.t0,
        message.t1,
        tuple(sorted((name, value_of(v)) for name, v in message.attributes.items())),  # type: ignore[misc]
    )


def rejection(index: int, error: EventError) -> pb.Rejection:
    """The rejection of event ``index`` for ``error``; attributes are ``attributes.<name>``."""
    field = error.field or ""
    if field and field not in ("stream", "t0", "t1"):
        field = f"attributes.{field}"
    return pb.Rejection(index=index, field=field, reason=error.reason)
