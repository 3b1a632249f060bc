"""The compiler pipeline's entry point: CEL text → syntax tree → algebra → event automata.

``compile_query(text, schemas)`` runs the pure stages and returns a
:class:`CompiledQuery`; ``compile_parsed`` starts from a parsed tree and
``compile_expr`` from an algebra expression (the server's ``Algebra``
messages), so all three front ends share the back half.

>>> from cesar.automata.schema import parse_stream_spec, Event
>>> schemas = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}
>>> q = compile_query("FILTER{Price > 10} Stock PUBLISH Expensive", schemas)
>>> q.output.spec()
'Expensive(Name:string,Price:float)'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from cesar.automata.algebra import Expr, Project
from cesar.automata.ast import Query, map_calls
from cesar.automata.automaton import Automaton
from cesar.automata.construct import build_automata
from cesar.automata.derived import DERIVING, Derived, derived_call, extended, read_by
from cesar.automata.errors import CelError, CelSemanticError
from cesar.automata.normal import DnfLimitError
from cesar.automata.parser import parse_query
from cesar.automata.pattern.ast import Pattern
from cesar.automata.pattern.construct import build_nested_automata, build_pattern_automata
from cesar.automata.pattern.nesting import Nested, resolve_nested
from cesar.automata.pattern.parser import is_pattern, parse_pattern
from cesar.automata.pattern.plans import pinned
from cesar.automata.pattern.resolve import Resolved, resolve
from cesar.automata.schema import StreamSchema, TimeUnit
from cesar.automata.terms import Attr, Call, Scope, Term
from cesar.automata.translate import DEFAULT_OPTIONS, Options, stream_refs, translate

MAX_PATTERN_COMPONENTS = 64
"""Components of one pattern: its automaton's edges and compile time grow with their square
(64 compile in about 0.15 s; 2,000 would take minutes)."""


@dataclass(frozen=True)
class CompiledQuery:
    """A compiled subscription: text, algebra, output schema, streams read, and automata.

    ``automata`` lists internal resubscription automata first and the one
    publishing ``output`` last.  A pattern (docs/patterns.md) has no algebra;
    ``pattern`` is its resolved form instead, and ``nested`` the resolved alternatives of
    one with OR or nested groups (``pattern`` is then set only for one alternative the
    engine runs).  ``windows``: the time-window aggregates it
    reads, per stream (:mod:`cesar.automata.derived`).
    """

    text: str
    algebra: Expr | None
    output: StreamSchema
    reads: frozenset[str]
    automata: tuple[Automaton, ...]
    pattern: Resolved | None = None
    windows: tuple[tuple[str, Derived], ...] = ()
    nested: Nested | None = None

    @property
    def name(self) -> str:
        """The stream the query publishes."""
        return self.output.name


def compile_query(
    text: str,
    schemas: Mapping[str, StreamSchema],
    default_name: str | None = None,
    options: Options = DEFAULT_OPTIONS,
) -> CompiledQuery:
    """Compile one CEL query against the streams of ``schemas``.

    ``text`` is CEL, or a pattern when its first word is PATTERN or EVENT
    (:func:`compile_pattern`).  Raises :class:`~cesar.automata.errors.CelError`
    (syntax or semantic) with line, column and an excerpt of ``text``.
    Publishing onto a stream that already exists in ``schemas`` is an error.
    """
    if is_pattern(text):
        return compile_pattern(text, schemas, default_name, options)
    return compile_parsed(parse_query(text), text, schemas, default_name, options)


def compile_pattern(
    text: str,
    schemas: Mapping[str, StreamSchema],
    default_name: str | None = None,
    options: Options = DEFAULT_OPTIONS,
    build: bool = True,
) -> CompiledQuery:
    """Compile a pattern (SASE / SASE+, docs/patterns.md): parse, resolve, build its automata.

    Raises :class:`~cesar.automata.errors.CelError` as :func:`compile_query`, and
    :class:`~cesar.automata.pattern.construct.NotCompiled` (a semantic error)
    for a pattern the engine does not run yet.  ``build=False`` stops before the
    automata (none are returned): for the pattern's literal evaluator, which
    runs every pattern.
    """
    try:
        tree = parse_pattern(text)
        if len(tree.components) > MAX_PATTERN_COMPONENTS:
            raise CelSemanticError(
                f"a pattern holds at most {MAX_PATTERN_COMPONENTS} components, not "
                f"{len(tree.components)} (max_pattern_components: compiling grows with their "
                "square)",
                tree.pos,
            )
        if tree.nested is not None:
            nested = resolve_nested(tree, schemas, default_name, options.functions)
            _new_stream(nested.output.name, schemas, tree)
            built = build_nested_automata(nested, schemas, options) if build else ()
            return CompiledQuery(
                text,
                None,
                nested.output,
                nested.reads,
                built,
                nested.single,
                nested.windows,
                nested,
            )
        pattern = resolve(tree, schemas, default_name, options.functions)
        _new_stream(pattern.output.name, schemas, tree)
        try:
            pinned(pattern)
        except ValueError as exc:
            raise CelSemanticError(str(exc), pattern.pattern.pos) from None
        automata = build_pattern_automata(pattern, schemas, options) if build else ()
    except RecursionError:
        raise CelSemanticError("the pattern nests too deeply", (1, 1)).with_source(text) from None
    except DnfLimitError as exc:
        raise CelSemanticError(f"the compiled automaton's {exc}", (1, 1)).with_source(
            text
        ) from None
    except CelError as exc:
        raise exc.with_source(text) from None
    return CompiledQuery(
        text, None, pattern.output, pattern.reads, automata, pattern, pattern.windows
    )


def _new_stream(name: str, schemas: Mapping[str, StreamSchema], tree: Pattern) -> None:
    if name in schemas:
        raise CelSemanticError(f"stream {name} already exists; PUBLISH under a new name", tree.pos)


def compile_parsed(
    query: Query,
    text: str,
    schemas: Mapping[str, StreamSchema],
    default_name: str | None = None,
    options: Options = DEFAULT_OPTIONS,
) -> CompiledQuery:
    """Compile the syntax tree ``query`` parsed from ``text``: ``compile_query`` after parsing.

    For a caller that needs the tree first (the server reads the PUBLISH name
    before it knows a subscription's default name) without parsing twice.
    """
    try:
        query, windows = _windows(query, schemas)
        if not windows:
            translation = translate(query, schemas, default_name, options)
            return compile_expr(
                translation.algebra, translation.output, translation.reads, schemas, text, options
            )
        wider = extended(schemas, windows)
        translation = translate(query, wider, default_name, options)
        if translation.output.name in schemas:
            raise StreamExistsError(
                f"stream {translation.output.name} already exists; PUBLISH under a new name"
            )
        algebra, output = unpublished(translation.algebra, translation.output)
        compiled = compile_expr(algebra, output, translation.reads, wider, text, options)
        first, *rest = compiled.automata
        pairs = read_by(wider, translation.reads, windows)
        automata = (replace(first, windows=pairs), *rest)
        return replace(compiled, automata=automata, windows=pairs)
    except StreamExistsError as exc:
        raise CelSemanticError(str(exc), query.pos).with_source(text) from None
    except RecursionError:
        raise CelSemanticError("the query nests too deeply", query.pos).with_source(text) from None
    except DnfLimitError as exc:
        raise CelSemanticError(f"the compiled automaton's {exc}", query.pos).with_source(
            text
        ) from None
    except CelError as exc:
        raise exc.with_source(text) from None


def _windows(query: Query, schemas: Mapping[str, StreamSchema]) -> tuple[Query, list[Derived]]:
    """``query`` with each window call (``AVG_OVER(Price, 30 MIN, Name)``) rewritten to the
    attribute of its event it becomes (:mod:`cesar.automata.derived`), and the windows."""
    found: list[Derived] = []
    units = [schemas[r.name].unit for r in stream_refs(query) if r.name in schemas]

    def attr_of(term: Term) -> tuple[Scope, str] | None:
        return (term.scope, term.name) if isinstance(term, Attr) else None

    def calls(call: Call) -> Term | None:
        if call.name not in DERIVING:
            return None
        window, scope = derived_call(call, units[0] if units else TimeUnit.TICK, attr_of)
        found.append(window)
        return Attr(scope, window.name, call.pos)

    rewritten = map_calls(query, calls)
    assert isinstance(rewritten, Query)
    return rewritten, found


def unpublished(expr: Expr, output: StreamSchema) -> tuple[Expr, StreamSchema]:
    """``expr`` and ``output`` without the derived attributes (``HOUR(t1)``,
    ``AVG_OVER(Price, 30, Name)_1``): a query publishes the attributes of its streams and
    those it names in SELECT (``AVG_OVER(Price, 30 MIN, Name) AS Avg``), as a pattern does.

    A derived attribute's name is its call, and no declared name holds a parenthesis.
    """
    kept = tuple(name for name, _ in output.attributes if "(" not in name)
    if len(kept) == len(output.attributes):
        return expr, output
    projected = Project(expr, kept)
    return projected, replace(output, attributes=projected.attributes)


class StreamExistsError(ValueError):
    """A query would PUBLISH onto a stream that already exists."""


def compile_expr(
    expr: Expr,
    output: StreamSchema,
    reads: frozenset[str],
    schemas: Mapping[str, StreamSchema],
    text: str = "",
    options: Options = DEFAULT_OPTIONS,
) -> CompiledQuery:
    """The back half of the pipeline: an algebra expression publishing ``output`` → automata.

    Every front end ends here: CEL (:func:`compile_parsed`) and the server's
    ``Algebra`` messages.  Raises :class:`StreamExistsError` when ``output``'s
    name is in ``schemas`` and :class:`~cesar.automata.normal.DnfLimitError`
    when a predicate's DNF exceeds the limit.
    """
    if output.name in schemas:
        raise StreamExistsError(f"stream {output.name} already exists; PUBLISH under a new name")
    return CompiledQuery(text, expr, output, reads, build_automata(expr, output, options))
