"""A subscription's source — CEL text, pattern text or an Algebra message — and its one compiler.

The front compiles what a client sends, the shard what the front installs and
the benchmarks what they load; each goes through :func:`parse_source` then
:func:`compile_source`, so the choice between the three front ends is made here
once.  :func:`install_request` is what travels to a shard, and
:func:`check_nesting` refuses, before anything is stored, a query whose
messages protobuf could not decode again (its nesting limit is
:data:`PROTOBUF_DEPTH` messages): what the front accepts, it can reload.

>>> from cesar.automata.schema import parse_stream_spec
>>> from cesar.automata.shape import QueryCache
>>> schemas = {"S": parse_stream_spec("S(x:int)")}
>>> parsed = parse_source(Source("FILTER{x > 1} S PUBLISH Big"))
>>> parsed.publish, compile_source(parsed, schemas, "s1", QueryCache()).name
('Big', 'Big')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from google.protobuf.message import DecodeError, Message

from cesar.automata.compiler import CompiledQuery
from cesar.automata.errors import CelError
from cesar.automata.schema import SchemaError, StreamSchema, parse_stream_spec
from cesar.automata.shape import QueryCache, Shape, shape_of
from cesar.server.wire.algebra_proto import AlgebraMessageError, compile_algebra, to_algebra
from cesar.v1 import cesar_pb2 as pb
from cesar.v1 import shard_pb2

PROTOBUF_DEPTH = 100
"""Message nesting protobuf's decoder accepts (upb's default)."""
WRAPPING = 4
"""Levels around a query's Algebra in the deepest message that carries it
(SubscribeBatchResponse → SubscribeResult → Subscription → Algebra)."""
MAX_ALGEBRA_DEPTH = PROTOBUF_DEPTH - WRAPPING
"""The deepest Algebra message a subscription may have, so every message carrying it decodes."""


_TOO_DEEP = (
    f"the query's algebra nests more than {MAX_ALGEBRA_DEPTH} messages deep (protobuf decodes "
    f"at most {PROTOBUF_DEPTH} levels): chain fewer operators, or PUBLISH a part and read its "
    "stream from another subscription"
)


class SourceError(ValueError):
    """A source that does not compile, or whose compiled form would not travel; says why."""


@dataclass(frozen=True)
class Source:
    """What a subscription was written in: CEL or pattern ``text``, or an ``algebra`` message.

    A shard receives both for a CEL query: the text to find its shape's template,
    the algebra the front compiled to build it in full.
    """

    text: str = ""
    algebra: pb.Algebra | None = None


@dataclass(frozen=True)
class Parsed:
    """A source parsed: its text's shape, CEL or pattern (none for an algebra message alone),
    and the PUBLISH name it gives, if any."""

    source: Source
    shape: Shape | None = None
    publish: str | None = None


def parse_source(source: Source) -> Parsed:
    """Parse ``source`` (an algebra message alone: check its nesting); raise SourceError."""
    if source.algebra is not None:
        check_nesting(source.algebra)
    try:
        if source.text:
            shape = shape_of(source.text)
            return Parsed(source, shape=shape, publish=shape.publish)
    except CelError as exc:
        raise SourceError(str(exc)) from None
    return Parsed(source)


def compile_source(
    parsed: Parsed, schemas: Mapping[str, StreamSchema], name: str, cache: QueryCache
) -> CompiledQuery:
    """Compile a parsed source against ``schemas``, publishing under ``name`` unless it names
    its stream; raise SourceError.

    A CEL query or a pattern goes through ``cache`` (bound from its shape's template
    when it has one; a CEL query built from the algebra message when the source
    carries one), an algebra message alone through
    :func:`~cesar.server.wire.algebra_proto.compile_algebra`.  The stream it publishes
    must be one a stream spec can say (its name and attributes within the limits of
    :func:`~cesar.automata.schema.parse_stream_spec`).
    """
    query = _compiled(parsed, schemas, name, cache)
    try:  # what it publishes is a stream its readers' shards parse from its spec
        parse_stream_spec(query.output.spec())
    except SchemaError as exc:
        raise SourceError(f"the stream it publishes: {exc}") from None
    return query


def _compiled(
    parsed: Parsed, schemas: Mapping[str, StreamSchema], name: str, cache: QueryCache
) -> CompiledQuery:
    source = parsed.source
    algebra = source.algebra
    try:
        if parsed.shape is None:
            if algebra is None:
                raise SourceError("give exactly one of query (CEL text) and algebra")
            return compile_algebra(algebra, schemas, name)
        if algebra is None:
            return cache.compile(parsed.shape, schemas, name)
        message = algebra
        return cache.compile(
            parsed.shape, schemas, name, full=lambda: compile_algebra(message, schemas, name)
        )
    except (CelError, AlgebraMessageError) as exc:
        raise SourceError(str(exc)) from None


def install_request(
    query: CompiledQuery,
    lane: str,
    subscription: str,
    schemas: Mapping[str, StreamSchema],
    client: tuple[str, int] = ("", 0),
) -> shard_pb2.InstallRequest:
    """What a shard needs to build ``query``: its text, its algebra and the schemas it reads
    (no algebra for a query reading time-window aggregates: the shard compiles the text,
    which names them as calls), and the ``client`` (name, steps per epoch) whose work budget
    it shares.

    Raises SourceError when its algebra nests too deeply to travel (:func:`check_nesting`).
    """
    algebra = None
    if query.algebra is not None and not query.windows:  # a window is compiled from its call
        try:
            algebra = to_algebra(query.algebra)
        except DecodeError:  # protobuf refuses to build a message nested past its limit
            raise SourceError(_TOO_DEEP) from None
        check_nesting(algebra)
    return shard_pb2.InstallRequest(
        lane=lane,
        subscription=subscription,
        name=query.name,
        stream_specs=[schemas[s].spec() for s in sorted(query.reads)],
        algebra=algebra,
        shape_text=query.text,
        client=client[0],
        client_steps=client[1],
    )


def check_nesting(algebra: pb.Algebra) -> None:
    """SourceError if ``algebra`` is deeper than :data:`MAX_ALGEBRA_DEPTH` messages.

    Cost: O(size of the message).
    """
    if message_depth(algebra, MAX_ALGEBRA_DEPTH + 1) > MAX_ALGEBRA_DEPTH:
        raise SourceError(_TOO_DEEP)


def message_depth(message: Message, stop: int) -> int:
    """Levels of nested messages in ``message`` (itself: 1), counted up to ``stop``.

    >>> message_depth(pb.Algebra(stream=pb.StreamRef(name="S")), 10)
    2
    """
    deepest = 1
    level = [message]
    while level and deepest < stop:
        inner: list[Message] = []
        for item in level:
            for field, value in item.ListFields():
                if field.type != field.TYPE_MESSAGE:
                    continue
                if field.is_repeated:
                    if field.message_type.GetOptions().map_entry:
                        continue
                    inner.extend(value)
                else:
                    inner.append(value)
        if inner:
            deepest += 1
        level = inner
    return deepest
