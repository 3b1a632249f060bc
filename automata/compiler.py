"""The compiler pipeline's entry point and multi-query programs.

``compile_query(text, catalog)`` runs the pure stages CEL text → syntax tree
→ algebra → event automata and returns a :class:`CompiledQuery`.  A
:class:`Program` compiles several queries that may read each other's
PUBLISHed streams (resubscription, Section 3.5), orders them producers first
and runs them on the reference evaluator or on the automata.

>>> from automata.schema import parse_stream_spec, Event
>>> catalog = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}
>>> q = compile_query("FILTER{Price > 10} Stock PUBLISH Expensive", catalog)
>>> q.output.spec()
'Expensive(Name:string,Price:float)'
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from automata.algebra import Expr
from automata.ast import Query
from automata.automaton import Automaton
from automata.construct import build_automata
from automata.engine import Engine, EngineOptions
from automata.errors import CelError, CelSemanticError
from automata.evaluate import Faults
from automata.normal import DnfLimitError
from automata.parser import parse_query
from automata.reference import evaluate
from automata.runtime import Runner
from automata.schema import Event, SchemaError, StreamSchema, schemas_by_name
from automata.translate import DEFAULT_OPTIONS, Options, stream_refs, translate


@dataclass(frozen=True)
class CompiledQuery:
    """A compiled subscription: text, algebra, output schema, streams read, and automata.

    ``automata`` lists internal resubscription automata first and the one
    publishing ``output`` last.
    """

    text: str
    algebra: Expr
    output: StreamSchema
    reads: frozenset[str]
    automata: tuple[Automaton, ...]

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
    return compile_parsed(parse_query(text), text, catalog, default_name, options)


def compile_parsed(
    query: Query,
    text: str,
    catalog: Mapping[str, StreamSchema],
    default_name: str | None = None,
    options: Options = DEFAULT_OPTIONS,
) -> CompiledQuery:
    """Compile the syntax tree ``query`` parsed from ``text``: ``compile_query`` after parsing.

    For a caller that needs the tree first (the server reads the PUBLISH name
    before it knows a subscription's default name) without parsing twice.
    """
    try:
        translation = translate(query, catalog, default_name, options)
        if translation.output.name in catalog:
            raise CelSemanticError(
                f"stream {translation.output.name} already exists; PUBLISH under a new name",
                query.pos,
            )
        automata = build_automata(translation.algebra, translation.output, options)
    except DnfLimitError as exc:
        raise CelSemanticError(f"the compiled automaton's {exc}", query.pos).with_source(
            text
        ) from None
    except CelError as exc:
        raise exc.with_source(text) from None
    return CompiledQuery(text, translation.algebra, translation.output, translation.reads, automata)


ENGINE_OPTIONS = {
    "engine": EngineOptions(),
    "nomerge": EngineOptions(merge=False),
    "naive": EngineOptions(merge=False, indices=False),
}


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
        parsed: list[tuple[str, str, str, set[str]]] = []
        for label, text in sources:
            try:
                query = parse_query(text)
            except CelError as exc:
                raise ProgramError(f"query {label}: {exc}") from None
            refs = {ref.name for ref in stream_refs(query.expr)}
            parsed.append((label, text, query.publish or label, refs))
        # Kahn's algorithm, taking ready queries in the order given: O(queries + reads).
        producer = {publish: i for i, (_, _, publish, _) in enumerate(parsed)}
        waiting_on = [0] * len(parsed)
        readers: dict[int, list[int]] = {}
        for i, (_, _, publish, refs) in enumerate(parsed):
            for ref in refs - {publish}:
                if ref in producer:
                    waiting_on[i] += 1
                    readers.setdefault(producer[ref], []).append(i)
        ready = [i for i, count in enumerate(waiting_on) if count == 0]
        heapq.heapify(ready)
        catalog = program.catalog
        while ready:
            i = heapq.heappop(ready)
            label, text, _, _ = parsed[i]
            try:
                compiled = compile_query(text, catalog, label, options)
            except CelError as exc:
                raise ProgramError(f"query {label}: {exc}") from None
            program.queries.append(compiled)
            catalog[compiled.name] = compiled.output
            for reader in readers.get(i, ()):
                waiting_on[reader] -= 1
                if waiting_on[reader] == 0:
                    heapq.heappush(ready, reader)
        if len(program.queries) < len(parsed):
            names = ", ".join(label for i, (label, *_) in enumerate(parsed) if waiting_on[i])
            raise ProgramError(f"queries {names} read each other's streams in a cycle")
        return program

    def run(
        self, events: Sequence[Event], faults: Faults | None = None, engine: str = "reference"
    ) -> list[Event]:
        """Every published event of every query over ``events``.

        ``engine`` is one of :data:`ENGINES`: ``"reference"`` (the algebra,
        literally), ``"automaton"`` (one automaton per query, Algorithm 1),
        ``"engine"`` (the merged DAG with FR/AN/AI indices), ``"nomerge"`` and
        ``"naive"`` (the engine without state merging, and also without the AN
        and AI indices).  All give the same multiset.
        """
        if engine == "automaton":
            automata = [a for query in self.queries for a in query.automata]
            return Runner(automata, faults).run(events)
        if engine in ENGINE_OPTIONS:
            multi = Engine(ENGINE_OPTIONS[engine])
            for query in self.queries:
                multi.subscribe(query.name, query.automata)
            matches = multi.run(events)
            if faults is not None:
                faults.arithmetic += multi.faults.arithmetic
            return matches
        if engine != "reference":
            raise ValueError(f"unknown engine {engine!r}")
        streams: dict[str, list[Event]] = {}
        for event in events:
            streams.setdefault(event.stream, []).append(event)
        out: list[Event] = []
        for query in self.queries:
            produced = evaluate(query.algebra, streams, faults, name=query.name)
            streams[query.name] = produced
            out.extend(produced)
        return out
