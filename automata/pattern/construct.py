"""Patterns → event automata: the entry point, the union stream and what the engine refuses.

:func:`build_pattern_automata` compiles a resolved pattern: SEQ through
:mod:`cesar.automata.pattern.sequence` (SASE+ §3's NFAb), AND through
:mod:`cesar.automata.pattern.join` (a node per set of bound components).  A
node reads one stream; where a run must see several, the pattern reads an
internal union of its streams first (:func:`needs_union`).

What the engine cannot run raises :class:`NotCompiled` with the reason: a
negation whose condition names a later component without WITHIN (a run judges
it when it completes, against the events remembered for the window), and an
AND of more than :data:`~cesar.automata.pattern.join.MAX_COMPONENTS` components.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace

from cesar.automata.automaton import Automaton, EdgeKind, Node
from cesar.automata.derived import extended
from cesar.automata.errors import CelSemanticError
from cesar.automata.pattern.ast import Strategy
from cesar.automata.pattern.drafts import Binding, Draft, edges_of
from cesar.automata.pattern.join import MAX_COMPONENTS, JoinBuilder
from cesar.automata.pattern.lookback import UNION_TYPE, looking_back
from cesar.automata.pattern.nesting import Alternative, Nested, show
from cesar.automata.pattern.placing import Negation
from cesar.automata.pattern.poset import Order, Unordered, order_of
from cesar.automata.pattern.resolve import Resolved
from cesar.automata.pattern.sequence import SeqBuilder
from cesar.automata.schema import AttrType, StreamSchema, TimeUnit
from cesar.automata.terms import (
    TRUE,
    ZERO,
    Attr,
    Const,
    Scope,
    conjoin,
)
from cesar.automata.translate import DEFAULT_OPTIONS, Options


class NotCompiled(CelSemanticError):
    """A pattern the engine cannot run yet (the reference evaluator defines it)."""


def build_pattern_automata(
    pattern: Resolved,
    schemas: Mapping[str, StreamSchema],
    options: Options = DEFAULT_OPTIONS,
    order: Order | None = None,
) -> tuple[Automaton, ...]:
    """The automata of ``pattern``: a union stream's first if it needs one (see
    :func:`needs_union`), its own last.  Raises :class:`NotCompiled` for what the
    engine cannot run yet.  ``order``: an AND's components are ordered by it (a nested
    alternative's, :mod:`cesar.automata.pattern.poset`)."""
    _check(pattern)
    schemas = extended(schemas, (window for _, window in pattern.windows))

    def builder(union: str | None) -> SeqBuilder:
        if pattern.operator == "AND":
            return JoinBuilder(pattern, schemas, options, union, order)
        return SeqBuilder(pattern, schemas, options, union)

    built: tuple[Automaton, ...]
    if not needs_union(pattern):
        built = (builder(None).build(),)
    else:
        union = _union(pattern, schemas, options)
        built = union, builder(union.output.name).build()
    # The windows are computed on the input streams, before any automaton reads them; the
    # pattern's own automaton names them (a shared union is the same for every reader).
    return (*built[:-1], replace(built[-1], windows=pattern.windows))


def build_nested_automata(
    nested: Nested,
    schemas: Mapping[str, StreamSchema],
    options: Options = DEFAULT_OPTIONS,
) -> tuple[Automaton, ...]:
    """The automata of a nested pattern (:mod:`cesar.automata.pattern.nesting`).

    Each alternative compiles alone, and each publishes the pattern's stream: no hop
    between the alternatives and the output, and the engine merges each alternative with the
    same alternative of other patterns, as if it were a pattern of its own.  Raises
    :class:`NotCompiled` for an alternative the ordered join does not run
    (:mod:`cesar.automata.pattern.poset`).
    """
    name = nested.output.name
    built: list[Automaton] = []
    for alternative, resolved in zip(nested.alternatives, nested.resolved, strict=True):
        *internal, last = _build_alternative(alternative, resolved, schemas, options)
        built.extend((*internal, replace(last, output=replace(last.output, name=name))))
    return tuple(built)


def _build_alternative(
    alternative: Alternative,
    resolved: Resolved,
    schemas: Mapping[str, StreamSchema],
    options: Options,
) -> tuple[Automaton, ...]:
    """The automata of one alternative: a flat one's as a flat pattern's, one nesting a SEQ
    and an AND as a join automaton ordered by the structure
    (:mod:`cesar.automata.pattern.poset`, :mod:`cesar.automata.pattern.join`)."""
    if alternative.flat:
        return build_pattern_automata(resolved, schemas, options)
    try:
        order = order_of(alternative.group, [step.var for step in resolved.steps])
    except Unordered as exc:
        raise NotCompiled(
            f"the alternative {show(alternative.group)} nests a SEQ and an AND, and {exc}: the "
            "engine does not run that yet; the reference evaluator does",
            resolved.pattern.pos,
        ) from None
    joined = replace(
        resolved, operator="AND", conjuncts=conjoin(*(step.begin for step in resolved.steps))
    )
    _check(joined)
    return build_pattern_automata(joined, schemas, options, order)


def needs_union(p: Resolved) -> bool:
    """True if a node of the pattern's automaton must see events of several streams.

    An engine node reads one stream.  A run waiting for a component sees the
    events of that component's stream, unless it must also see others: a
    negation of another stream, contiguity over several streams, a Kleene
    closure followed by another stream, or ANY.  Such a pattern reads one
    internal stream, ``<name>#1``, the union of its streams with each event's
    stream in :data:`UNION_TYPE`, named by its content (:func:`union_name`), so every
    pattern reading the same streams reads the same union: the engine makes it once, and
    the patterns' automata merge on the DAG as patterns reading input streams do.
    """
    steps = p.steps
    if p.operator == "AND":  # a run waits for the components it has not bound
        types = {t for step in steps for t in step.types}
        return any(len(step.types) > 1 for step in steps) or (len(steps) > 2 and len(types) > 1)
    contiguous = p.strategy in (Strategy.STRICT, Strategy.PARTITION)
    if contiguous and len(p.reads) > 1:
        return True
    for n, step in enumerate(steps):
        if len(step.types) > 1:
            return True
        if step.kleene and n + 1 < len(steps) and steps[n + 1].types != step.types:
            return True
    last = len(steps) - 1
    back = looking_back(p)  # judged against remembered events, of their own streams
    middle = [g for g in p.negations if g.after < last and g not in back]
    trailing = {g.types for g in p.negations if g.after == last}
    if any(g.types != steps[g.after + 1].types for g in middle):
        return True
    return len(trailing) > 1 or any(len(types) > 1 for types in trailing)


def _union(p: Resolved, schemas: Mapping[str, StreamSchema], options: Options) -> Automaton:
    """The internal automaton publishing the union of the pattern's streams."""
    columns: dict[str, AttrType] = {UNION_TYPE: AttrType.STRING}
    for name in sorted(p.reads):
        for attr, typ in schemas[name].attributes:
            known = columns.setdefault(attr, typ)
            if known is not typ:
                if {known, typ} != {AttrType.INT, AttrType.FLOAT}:
                    raise NotCompiled(
                        f"attribute {attr} is {known.value} in one of "
                        f"{', '.join(sorted(p.reads))} and {typ.value} in another: the engine "
                        "cannot yet read them as one stream",
                        p.pattern.pos,
                    )
                columns[attr] = AttrType.FLOAT
    name = union_name(p.reads, columns, p.output.unit)
    output = StreamSchema(name, tuple(columns.items()), p.output.unit)
    drafts = []
    for name in sorted(p.reads):
        schema = schemas[name]
        binding: Binding = {UNION_TYPE: (Const(name, AttrType.STRING), AttrType.STRING)}
        for attr, typ in columns.items():
            if attr != UNION_TYPE:
                present = schema.type_of(attr) is not None
                # No compiled condition reads an absent attribute's zero (_check refuses those
                # that would, and partition tests check the stream first).
                binding[attr] = (Attr(Scope.EVENT, attr) if present else ZERO[typ], typ)
        drafts.append(Draft(EdgeKind.FORWARD, 0, 1, name, TRUE, binding))
    nodes = (Node(0, ()), Node(1, output.attributes))
    return Automaton(output, nodes, edges_of(drafts, options), 1, internal=True, shared=True)


def union_name(reads: Iterable[str], columns: Mapping[str, AttrType], unit: TimeUnit) -> str:
    """The internal stream of the union of ``reads`` with these ``columns`` in time ``unit``:
    the streams and a digest of the rest, so equal unions have one name and others differ.

    >>> union_name(["B", "A"], {UNION_TYPE: AttrType.STRING, "v": AttrType.INT}, TimeUnit.TICK)
    '#union(A,B)/373117cd'
    """
    spec = repr((sorted(columns.items()), unit.name))
    digest = hashlib.blake2b(spec.encode(), digest_size=4).hexdigest()
    return f"#union({','.join(sorted(reads))})/{digest}"


def _check(p: Resolved) -> None:
    """Raise :class:`NotCompiled` for what the engine does not run."""
    pos = p.pattern.pos
    if p.operator == "AND" and len(p.steps) > MAX_COMPONENTS:
        raise NotCompiled(
            f"an AND of {len(p.steps)} components is not run by the engine (it runs up to "
            f"{MAX_COMPONENTS}: a run waits at a node per set of components it has bound)",
            pos,
        )
    if p.operator == "AND" and p.negations and p.window is None:
        raise NotCompiled(
            "a negation in an AND is judged when a run completes, against the events the "
            "engine remembers; it needs WITHIN (the engine would remember every event of the "
            "negated stream)",
            pos,
        )
    for negation in p.negations:
        _check_negation(p, negation)


def _check_negation(p: Resolved, negation: Negation) -> None:
    if negation in looking_back(p) and p.window is None:
        raise NotCompiled(
            f"the negation of {negation.var} names a later component, so a run judges it when "
            "it completes, against the events it remembers; it needs WITHIN (the engine would "
            "remember every event of the negated stream)",
            p.pattern.pos,
        )
