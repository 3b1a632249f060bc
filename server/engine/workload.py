"""A workload: input streams plus queries, compiled producers first, run on any evaluator.

:class:`Workload` compiles several queries that may read each other's
PUBLISHed streams (resubscription, Section 3.5 of the Cayuga paper), orders
them producers first and runs them on one of :data:`ENGINE_MODES`: the
reference evaluator (the algebra, literally; a pattern's own oracle), one automaton per query
(Algorithm 1), or the multi-query engine with or without merging and indices.
All give the same multiset of published events; ``cesar run`` and the
benchmarks use it.

>>> from cesar.automata.schema import parse_stream_spec, Event
>>> stock = parse_stream_spec("Stock(Name:string,Price:float)")
>>> workload = Workload.build([stock], [("big", "FILTER{Price > 10} Stock")])
>>> [e.values for e in workload.run([Event.of("Stock", 0, 0, {"Name": "A", "Price": 11.0})])]
[(('Name', 'A'), ('Price', 11.0))]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from cesar.automata.compiler import CompiledQuery, compile_pattern, compile_query
from cesar.automata.derived import check_inputs, enrich_all
from cesar.automata.errors import CelError
from cesar.automata.evaluate import Faults
from cesar.automata.parser import parse_query
from cesar.automata.pattern.nested_reference import evaluate_nested
from cesar.automata.pattern.parser import is_pattern, parse_pattern
from cesar.automata.pattern.plans import unplanned_pin
from cesar.automata.pattern.reference import evaluate as evaluate_pattern
from cesar.automata.reference import evaluate
from cesar.automata.runtime import Runner
from cesar.automata.schema import Event, SchemaError, StreamSchema, schemas_by_name
from cesar.automata.translate import DEFAULT_OPTIONS, Options, stream_refs
from cesar.server.engine.engine import Engine, EngineOptions

ENGINE_MODES: dict[str, EngineOptions | None] = {
    "engine": EngineOptions(),
    "nomerge": EngineOptions(merge=False),
    "naive": EngineOptions(merge=False, indices=False),
    "planned": EngineOptions(plans=True),
    "automaton": None,
    "reference": None,
}
"""The evaluators of ``cesar run`` and ``cesar bench``, named in
:data:`~cesar.server.engine.modes.ENGINE_NAMES`' order: the multi-query engine's options (the
optimisations on, then off one by one, then with pattern plans), or None for one automaton
per query and for the reference evaluator."""


class WorkloadError(ValueError):
    """A set of queries that cannot run together (a name clash or a read cycle)."""


@dataclass
class Workload:
    """Input streams plus queries, compiled producers before consumers."""

    inputs: dict[str, StreamSchema]
    queries: list[CompiledQuery] = field(default_factory=list)
    released: int = 0
    """Of the last :meth:`run`'s events, how many AFTER MATCH SKIP held until the input
    ended (the engines release them then; the reference evaluator sees the whole input)."""

    @property
    def schemas(self) -> dict[str, StreamSchema]:
        """Every stream a query may read: inputs and the outputs compiled so far."""
        return {**self.inputs, **{q.name: q.output for q in self.queries}}

    @staticmethod
    def build(
        inputs: Iterable[StreamSchema],
        sources: Sequence[tuple[str, str]],
        options: Options = DEFAULT_OPTIONS,
        automata: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> Workload:
        """Compile ``(default name, text)`` pairs in an order where producers come first.

        ``automata=False`` compiles patterns for the reference evaluator only (without
        their automata), so that it runs patterns the engine does not run yet.
        ``progress(done, total)`` is told after each query compiled (a command's bar).

        Raises :class:`WorkloadError` for input streams declared twice, queries
        that read each other in a cycle, and any query that does not compile (the
        message names the query and carries its :class:`CelError`).
        """
        try:
            workload = Workload(schemas_by_name(inputs))
        except SchemaError as exc:
            raise WorkloadError(str(exc)) from None
        parsed: list[tuple[str, str, str, set[str]]] = []
        for label, text in sources:
            try:
                publish, refs = _reads(text)
            except CelError as exc:
                raise WorkloadError(f"query {label}: {exc}") from None
            parsed.append((label, text, publish or label, refs))
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
        schemas = workload.schemas
        inputs_named = frozenset(schemas)
        while ready:
            i = heapq.heappop(ready)
            label, text, _, _ = parsed[i]
            try:
                if automata or not is_pattern(text):
                    compiled = compile_query(text, schemas, label, options)
                else:
                    compiled = compile_pattern(text, schemas, label, options, build=False)
                check_inputs(compiled.windows, inputs_named)
            except CelError as exc:
                raise WorkloadError(f"query {label}: {exc.with_source(text)}") from None
            workload.queries.append(compiled)
            if progress is not None:
                progress(len(workload.queries), len(parsed))
            schemas[compiled.name] = compiled.output
            for reader in readers.get(i, ()):
                waiting_on[reader] -= 1
                if waiting_on[reader] == 0:
                    heapq.heappush(ready, reader)
        if len(workload.queries) < len(parsed):
            names = ", ".join(label for i, (label, *_) in enumerate(parsed) if waiting_on[i])
            raise WorkloadError(f"queries {names} read each other's streams in a cycle")
        return workload

    def check_plans(self, engine: str) -> None:
        """WorkloadError if ``engine`` (one of :data:`ENGINE_MODES`) cannot honour a query's
        ``PLAN`` pin: one without plans, or one automaton per query.  The reference evaluator
        takes every pin (a plan never changes the matches, which it defines)."""
        if engine == "reference" or (ENGINE_MODES.get(engine) or EngineOptions()).plans:
            return
        for query in self.queries:
            refused = None if query.pattern is None else unplanned_pin(query.pattern)
            if refused is not None:
                raise WorkloadError(f"{query.name}: {refused} (--engine {engine})")

    def subscribed(self, engine: str = "engine") -> Engine:
        """A multi-query engine of ``engine``'s options (one of :data:`ENGINE_MODES` that has
        options) with every query subscribed, producers first: :meth:`run`'s engine before
        its first event, for a benchmark that times the run apart from the subscribes.

        Raises :class:`ValueError` for a mode without engine options."""
        options = ENGINE_MODES.get(engine)
        if options is None:
            raise ValueError(f"{engine!r} is not a multi-query engine mode")
        multi = Engine(options)
        for query in self.queries:
            multi.subscribe(query.name, query.automata, None, query.pattern)
        return multi

    def run(
        self,
        events: Sequence[Event],
        faults: Faults | None = None,
        engine: str = "reference",
        progress: Callable[[int], None] | None = None,
    ) -> list[Event]:
        """Every published event of every query over ``events``.

        ``engine`` is one of :data:`ENGINE_MODES`: ``"reference"`` (the algebra,
        literally), ``"automaton"`` (one automaton per query, Algorithm 1),
        ``"engine"`` (the merged DAG with FR/AN/AI indices), ``"nomerge"`` and
        ``"naive"`` (the engine without state merging, and also without the AN
        and AI indices), ``"planned"`` (the engine choosing each pattern's evaluation
        plan, :mod:`cesar.server.engine.plans`).  All give the same multiset.
        ``progress`` is told how many of ``events`` are done, now and then (the
        automata and the engine: every 1,024 events; the reference: after each query).
        ``events`` are the whole input: what AFTER MATCH SKIP holds when they end is
        released (counted in :attr:`released`).
        """
        self.check_plans(engine)
        feed: Iterable[Event] = events if progress is None else _counted(events, progress)
        self.released = 0
        if engine == "automaton":
            automata = [a for query in self.queries for a in query.automata]
            runner = Runner(automata, faults)
            matches = runner.run(feed)
            held = runner.finish()
            self.released = len(held)
            return matches + held
        if ENGINE_MODES.get(engine) is not None:
            multi = self.subscribed(engine)
            matches = multi.run(feed)
            held = multi.finish()
            self.released = len(held)
            if faults is not None:
                faults.arithmetic += multi.faults.arithmetic
            return matches + held
        if engine != "reference":
            raise ValueError(f"unknown engine {engine!r}")
        streams: dict[str, list[Event]] = {}
        for event in events:
            streams.setdefault(event.stream, []).append(event)
        out: list[Event] = []
        for number, query in enumerate(self.queries, 1):
            if query.algebra is not None:
                inputs = enrich_all(streams, query.windows) if query.windows else streams
                produced = evaluate(query.algebra, inputs, faults, name=query.name)
            elif query.nested is not None:
                produced = evaluate_nested(query.nested, streams, faults)
            else:
                assert query.pattern is not None
                produced = evaluate_pattern(query.pattern, streams, faults)
            streams[query.name] = produced
            out.extend(produced)
            if progress is not None:
                progress(len(events) * number // len(self.queries))
        return out


def _reads(text: str) -> tuple[str | None, set[str]]:
    """A query's PUBLISH name (None without one) and the streams it names; CelError if malformed."""
    if is_pattern(text):
        pattern = parse_pattern(text)
        return pattern.publish, {name for c in pattern.components for name in c.types}
    query = parse_query(text)
    return query.publish, {ref.name for ref in stream_refs(query.expr)}


def _counted(events: Sequence[Event], progress: Callable[[int], None]) -> Iterator[Event]:
    """``events``, telling ``progress`` the count taken every 1,024 and at the end."""
    for number, event in enumerate(events, 1):
        yield event
        if not number % 1024:
            progress(number)
    progress(len(events))
