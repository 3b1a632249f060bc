"""The compiler pipeline's entry point and multi-query programs.

``compile_query(text, catalog)`` runs CEL text → syntax tree → algebra and
returns a :class:`CompiledQuery`.  A :class:`Program` compiles several queries
that may read each other's PUBLISHed streams (resubscription, Section 3.5),
orders them producers first and evaluates them with the reference evaluator.

>>> from automata.schema import parse_stream_spec, Event
>>> catalog = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}
>>> q = compile_query("FILTER{Price > 10} Stock PUBLISH Expensive", catalog)
>>> q.output.spec()
'Expensive(Name:string,Price:float)'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from automata.algebra import Expr
from automata.errors import CelError, CelSemanticError
from automata.evaluate import Faults
from automata.parser import parse_query
from automata.reference import evaluate
from automata.schema import Event, SchemaError, StreamSchema, schemas_by_name
from automata.translate import DEFAULT_OPTIONS, Options, stream_refs, translate


@dataclass(frozen=True)
class CompiledQuery:
    """A compiled subscription: its text, algebra, output schema and the streams it reads."""

    text: str
    algebra: Expr
    output: StreamSchema
    reads: frozenset[str]

    @property
    def name(self) -> str:
        """The stream the query publishes."""
        return self.output.name


def compile_query(
    text: str,
    catalog: Mapping[str, StreamSchema],
    default_name: str | None = None,
    options: Options = DEFAULT_OPTIONS,
) -> CompiledQuery:
    """Compile one CEL query against the streams of ``catalog``.

    Raises :class:`~automata.errors.CelError` (syntax or semantic) with line,
    column and an excerpt of ``text``.  Publishing onto a stream that already
    exists in ``catalog`` is an error.
    """
    query = parse_query(text)
    try:
        translation = translate(query, catalog, default_name, options)
        if translation.output.name in catalog:
            raise CelSemanticError(
                f"stream {translation.output.name} already exists; PUBLISH under a new name",
                query.pos,
            )
    except CelError as exc:
        raise exc.with_source(text) from None
    return CompiledQuery(text, translation.algebra, translation.output, translation.reads)


class ProgramError(ValueError):
    """A set of queries that cannot run together (a name clash or a read cycle)."""


@dataclass
class Program:
    """Input streams plus queries, compiled producers before consumers."""

    inputs: dict[str, StreamSchema]
    queries: list[CompiledQuery] = field(default_factory=list)

    @property
    def catalog(self) -> dict[str, StreamSchema]:
        """Every stream a query may read: inputs and the outputs compiled so far."""
        return {**self.inputs, **{q.name: q.output for q in self.queries}}

    @staticmethod
    def build(
        inputs: Iterable[StreamSchema],
        sources: Sequence[tuple[str, str]],
        options: Options = DEFAULT_OPTIONS,
    ) -> Program:
        """Compile ``(default name, text)`` pairs in an order where producers come first.

        Raises :class:`ProgramError` for input streams declared twice, queries
        that read each other in a cycle, and any query that does not compile (the
        message names the query and carries its :class:`CelError`).
        """
        try:
            program = Program(schemas_by_name(inputs))
        except SchemaError as exc:
            raise ProgramError(str(exc)) from None
        pending: list[tuple[str, str, str, set[str]]] = []
        for label, text in sources:
            try:
                query = parse_query(text)
            except CelError as exc:
                raise ProgramError(f"query {label}: {exc}") from None
            refs = {ref.name for ref in stream_refs(query.expr)}
            pending.append((label, text, query.publish or label, refs))
        while pending:
            waiting = {publish for _, _, publish, _ in pending}
            ready = [p for p in pending if not p[3] & (waiting - {p[2]})]
            if not ready:
                names = ", ".join(label for label, _, _, _ in pending)
                raise ProgramError(f"queries {names} read each other's streams in a cycle")
            label, text, _, _ = ready[0]
            try:
                program.queries.append(compile_query(text, program.catalog, label, options))
            except CelError as exc:
                raise ProgramError(f"query {label}: {exc}") from None
            pending.remove(ready[0])
        return program

    def run(self, events: Sequence[Event], faults: Faults | None = None) -> list[Event]:
        """Evaluate every query with the reference evaluator; all published events."""
        streams: dict[str, list[Event]] = {}
        for event in events:
            streams.setdefault(event.stream, []).append(event)
        out: list[Event] = []
        for query in self.queries:
            produced = evaluate(query.algebra, streams, faults, name=query.name)
            streams[query.name] = produced
            out.extend(produced)
        return out
