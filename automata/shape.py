"""Query shapes: a query compiled once per shape, the constants of the others bound in.

Subscriptions of a pub/sub service come from a few shapes with different
constants (a ticker, a threshold, the name it publishes).  Parsing and
compiling one costs about 300 µs; a database's plan cache with
auto-parameterization (normalized statements, simple parameterization) does
that work once per shape.  This module is that cache, for CEL and for patterns
(a pattern's tokens come from its own tokenizer; a duration, a percentage and a
selection strategy are part of its shape).

A query's :class:`Shape` is its token sequence with every literal (``INT``,
``FLOAT``, ``STRING``; a duration keeps its unit and is part of the shape)
and the PUBLISH name replaced by a *slot*; the slots' values are the query's
constants.  The second time a shape is seen, :class:`QueryCache` derives a
template: it compiles the query once more with every slot holding a sentinel
(a value no query is likely to hold, which the compiler is told never to fold:
a literal compared with another constant becomes TRUE or FALSE and leaves no
trace, as ``b.LEN >= 2`` does where a Kleene closure's first event makes LEN 1)
and compares the two compiled forms field by field.  Where they differ the
sentinel must stand alone at a leaf — a constant as it is or negated, or the
name — and the original value at the same leaf; then the leaf is a slot.
Anything else (the compiler folded a constant with another, compared two
constants, dropped one, or the structure changed) marks the shape as not
parametric, and its queries are compiled in full.  A hit lexes the text and
rebuilds only the paths from the root to the slots' leaves.

What a hit may differ in from a full compile: the order of a conjunction's
atoms where the canonical order (:mod:`cesar.automata.normal`) sorts by a
constant, and a repeated atom kept twice where equal constants would have
made it one — the same predicate either way.

>>> from cesar.automata.compiler import compile_query
>>> from cesar.automata.schema import parse_stream_spec
>>> schemas = {"S": parse_stream_spec("S(Name:string,Price:float)")}
>>> cache = QueryCache()
>>> for name, price in [("IBM", 10), ("MSFT", 12), ("AAPL", 20)]:
...     text = f"FILTER{{Name = '{name}' AND Price > {price}}} S"
...     q = cache.compile(shape_of(text), schemas, "q")
>>> q == compile_query("FILTER{Name = 'AAPL' AND Price > 20} S", schemas, "q"), cache.counters
(True, Counter({'compiled': 2, 'templates': 1, 'bound': 1}))
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from functools import cache
from typing import Any

from cesar.automata.compiler import CompiledQuery, compile_query
from cesar.automata.errors import CelError
from cesar.automata.normal import OpaqueFolded
from cesar.automata.parser import LITERALS, literal_value, scan
from cesar.automata.pattern.parser import is_pattern, tokenize
from cesar.automata.schema import AttrType, StreamSchema, Value
from cesar.automata.terms import Const, Pos
from cesar.automata.translate import DEFAULT_OPTIONS, Options

CAPACITY = 1_024
"""Shapes a :class:`QueryCache` remembers; the oldest goes first."""
MAX_TOKENS = 400
"""The longest shape a :class:`QueryCache` remembers, in tokens (a subscription is usually 20
to 100): the cache holds at most CAPACITY × MAX_TOKENS tokens and their templates, whatever a
client sends."""

_SENTINEL_TEXT = {
    "INT": lambda i: str(987_654_321_000 + 1_000_003 * i),
    "FLOAT": lambda i: f"{876_543_210 + 1_009 * i}.375",
    "STRING": lambda i: f"'\u2063sentinel {i}\u2063'",
}
_SENTINEL_NAME = "ShapeSentinel_q7x3"
"""The name a template is compiled under (a query may not publish onto an existing stream)."""

_VALUED = frozenset({"NAME", "ATTRREF", "CMP", "DURATION", "STRATEGY", "PERCENT_LIT", "QUOTED"})
"""Token types whose text is part of the shape (of the others, the type is)."""
_OPENING = frozenset({"LPAR", "LBRACE", "LBRACK"})
_CLOSING = frozenset({"RPAR", "RBRACE", "RBRACK"})

_LITERAL_TYPES = {
    AttrType.INT: frozenset({"INT"}),
    AttrType.FLOAT: frozenset({"INT", "FLOAT"}),
    AttrType.STRING: frozenset({"STRING"}),
}
"""Literal kinds whose value a constant of each type holds losslessly."""


@dataclass(frozen=True, slots=True)
class Shape:
    """A CEL text split into its shape (``key``) and its literals; see the module docstring."""

    text: str
    key: tuple[object, ...]
    kinds: tuple[str, ...]
    literals: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]
    publish: str | None
    publish_span: tuple[int, int] | None

    def values(self) -> list[Value]:
        """The literals' values, in order; ValueError for a number CEL cannot hold."""
        return [literal_value(k, t) for k, t in zip(self.kinds, self.literals, strict=True)]


def _pattern_tokens(text: str) -> Iterator[tuple[str, str, int]]:
    """(type, text, offset) of each token of a pattern; a string in typographic quotes is
    part of the shape (:func:`~cesar.automata.parser.literal_value` reads ASCII quotes)."""
    for token in tokenize(text):
        kind, value = token.type, str(token)
        if kind == "STRING" and not value.startswith("'"):
            kind = "QUOTED"
        assert token.start_pos is not None
        yield kind, value, token.start_pos


def shape_of(text: str) -> Shape:
    """The shape of ``text``, CEL or a pattern: one pass of its tokenizer, O(len(text)).

    Raises :class:`~cesar.automata.errors.CelSyntaxError` where the tokenizer
    does (so does parsing the text).

    >>> s = shape_of("FILTER{Name = 'IBM'} S PUBLISH Ibm")
    >>> s.literals, s.publish, s.key == shape_of("filter{Name='MSFT'} S PUBLISH X").key
    (("'IBM'",), 'Ibm', True)
    >>> p = shape_of("PATTERN SEQ(S a, S b) WHERE a.x > 5 AND b.x < a.x WITHIN 3 MIN PUBLISH P")
    >>> p.literals, p.publish, p.key == shape_of(p.text.replace("5", "7")).key
    (('5',), 'P', True)
    """
    pattern = is_pattern(text)
    tokens = _pattern_tokens(text) if pattern else scan(text)
    key: list[object] = ["PATTERN"] if pattern else []
    kinds: list[str] = []
    literals: list[str] = []
    spans: list[tuple[int, int]] = []
    publish: str | None = None
    publish_span: tuple[int, int] | None = None
    depth = 0
    after_publish = False
    for kind, value, start in tokens:
        if after_publish and kind == "NAME" and depth == 0:
            key.append("publish name")
            publish, publish_span = value, (start, start + len(value))
        elif kind in LITERALS:
            key.append(kind)
            kinds.append(kind)
            literals.append(value)
            spans.append((start, start + len(value)))
        elif kind in _VALUED:
            key.append((kind, value))
        else:
            key.append(kind)
        if kind in _OPENING:
            depth += 1
        elif kind in _CLOSING:
            depth -= 1
        after_publish = kind == "PUBLISH"
    return Shape(
        text, tuple(key), tuple(kinds), tuple(literals), tuple(spans), publish, publish_span
    )


class NotParametric(Exception):
    """The compiled forms differ other than at a slot's leaf."""


@dataclass(frozen=True, slots=True)
class _Constant:
    """A leaf holding literal ``slot`` (negated if ``negate``) as a constant of ``type``."""

    slot: int
    negate: bool
    type: AttrType
    pos: Pos

    def bind(self, values: list[Value], name: str) -> Const:
        value = values[self.slot]
        if self.negate:
            assert not isinstance(value, str)
            value = -value
        if self.type is AttrType.FLOAT:
            value = float(value)
        return Const(value, self.type, self.pos)


@dataclass(frozen=True, slots=True)
class _Name:
    """A leaf holding the query's name (its PUBLISH name or the default)."""


Plan = _Constant | _Name | dict[Any, "Plan"]
"""Where a compiled form holds slots: a leaf, or the changed fields / items of a node."""


class _Differ:
    """Compares a compiled form with the one compiled from sentinels; builds the plan."""

    def __init__(
        self, kinds: tuple[str, ...], values: list[Value], sentinels: list[Value], name: str
    ) -> None:
        self.kinds = kinds
        self.values = values
        self.name = name
        self.slot_of: dict[Value, int] = {}
        for slot, sentinel in enumerate(sentinels):
            self.slot_of[sentinel] = slot
        self.seen: set[int] = set()

    def diff(self, orig: Any, pert: Any) -> Plan | None:
        """None where ``orig`` and ``pert`` are equal, else the plan; raises NotParametric."""
        if orig is pert:
            return None
        kind = type(orig)
        if kind is not type(pert):
            raise NotParametric(f"{kind.__name__} against {type(pert).__name__}")
        if kind is Const:
            if orig.type is pert.type and orig.value == pert.value:
                return None
            return self._constant(orig, pert)
        if kind is str:
            if orig == pert:
                return None
            if pert == _SENTINEL_NAME and orig == self.name:
                return _Name()
            raise NotParametric(f"text {orig!r} against {pert!r}")
        if kind is tuple or kind is list:
            if len(orig) != len(pert):
                raise NotParametric("lengths differ")
            items = {
                i: plan
                for i, (a, b) in enumerate(zip(orig, pert, strict=True))
                if (plan := self.diff(a, b))
            }
            return items or None
        if kind is dict:
            if orig.keys() != pert.keys():
                raise NotParametric("keys differ")
            items = {k: plan for k, v in orig.items() if (plan := self.diff(v, pert[k]))}
            return items or None
        if is_dataclass(orig):
            changed = {}
            for f in fields(orig):
                if f.compare:
                    plan = self.diff(getattr(orig, f.name), getattr(pert, f.name))
                    if plan is not None:
                        changed[f.name] = plan
            return changed or None
        if orig != pert:
            raise NotParametric(f"{kind.__name__} values differ")
        return None

    def _constant(self, orig: Const, pert: Const) -> _Constant:
        value = pert.value
        if isinstance(value, bool):
            raise NotParametric(f"truth value {orig.value!r} is not a literal of the query")
        slot, negate = self.slot_of.get(value), False
        if slot is None and not isinstance(value, str):
            slot, negate = self.slot_of.get(-value), True
        if slot is None or orig.type is not pert.type:
            raise NotParametric(f"constant {orig.value!r} is not a literal of the query")
        if self.kinds[slot] not in _LITERAL_TYPES.get(orig.type, ()):
            raise NotParametric(f"a {self.kinds[slot]} literal stands as {orig.type.value}")
        expected = self.values[slot]
        if negate:
            assert not isinstance(expected, str)
            expected = -expected
        if orig.value != expected:
            raise NotParametric(f"constant {orig.value!r} is not literal {slot} of the query")
        self.seen.add(slot)
        return _Constant(slot, negate, orig.type, orig.pos)


Builder = Callable[[list[Value], str], Any]
"""Makes one node of a compiled form from the slots' values and the name."""


def _builder(node: Any, plan: Plan) -> Builder:
    """What rebuilds ``node`` with the slots of ``plan`` filled; its other parts are kept."""
    if isinstance(plan, _Constant):
        return plan.bind
    if isinstance(plan, _Name):
        return lambda values, name: name
    parts = [(key, _builder(_part(node, key), inner)) for key, inner in plan.items()]
    kind: type = type(node)
    if kind is tuple or kind is list:
        items = list(node)

        def sequence(values: list[Value], name: str) -> Any:
            out = items.copy()
            for index, build in parts:
                out[index] = build(values, name)
            return kind(out)

        return sequence
    base = dict(node) if kind is dict else {f: getattr(node, f) for f in _init_fields(kind)}

    def make(values: list[Value], name: str) -> Any:
        kwargs = base.copy()
        for key, build in parts:
            kwargs[key] = build(values, name)
        return kwargs if kind is dict else kind(**kwargs)

    return make


def _part(node: Any, key: Any) -> Any:
    return node[key] if isinstance(node, (tuple, list, dict)) else getattr(node, key)


@cache
def _init_fields(kind: type) -> tuple[str, ...]:
    """The fields a dataclass's constructor takes (those it derives are derived again)."""
    return tuple(f.name for f in fields(kind) if f.init)


@dataclass(frozen=True)
class Template:
    """How to make a compiled query of one shape from its constants: :meth:`bind`."""

    build: Builder
    reads: tuple[tuple[str, StreamSchema], ...]

    def bind(
        self, shape: Shape, schemas: Mapping[str, StreamSchema], default_name: str | None
    ) -> CompiledQuery | None:
        """The query of ``shape`` compiled (None if only a full compile can tell).

        None when a literal is out of range, a stream read has another schema
        now, or the name is taken: compiling in full then says why.  Cost: the
        slots' paths, not the query's size.
        """
        name = shape.publish or default_name
        if name is None or name in schemas:
            return None
        for stream, schema in self.reads:
            if schemas.get(stream) != schema:
                return None
        try:
            values = shape.values()
        except ValueError:
            return None
        bound: CompiledQuery = self.build(values, name)
        return replace(bound, text=shape.text)


def derive(
    shape: Shape,
    query: CompiledQuery,
    schemas: Mapping[str, StreamSchema],
    default_name: str | None,
    options: Options = DEFAULT_OPTIONS,
) -> Template:
    """The template of ``shape`` from its compiled ``query``; raises NotParametric.

    Compiles the query once more with sentinels in every slot.
    """
    pieces = []
    last = 0
    marks = [
        (span, _SENTINEL_TEXT[kind](i))
        for i, (kind, span) in enumerate(zip(shape.kinds, shape.spans, strict=True))
    ]
    if shape.publish_span is not None:
        marks.append((shape.publish_span, _SENTINEL_NAME))
    for (start, end), text in sorted(marks):
        pieces += [shape.text[last:start], text]
        last = end
    pieces.append(shape.text[last:])
    name = shape.publish or default_name
    if name is None:
        raise NotParametric("the query has no name")
    values = shape.values()
    sentinels = [literal_value(k, _SENTINEL_TEXT[k](i)) for i, k in enumerate(shape.kinds)]
    if set(values) & set(sentinels) or len(set(sentinels)) != len(sentinels):
        raise NotParametric("a literal holds a sentinel")
    opaque = frozenset(sentinels) | {-s for s in sentinels if not isinstance(s, str)}
    try:
        other = compile_query(
            "".join(pieces), schemas, _SENTINEL_NAME, replace(options, opaque=opaque)
        )
    except CelError as exc:
        raise NotParametric(f"with sentinels the query does not compile: {exc}") from None
    except OpaqueFolded as exc:
        raise NotParametric(f"a literal decides the compiled form: {exc}") from None
    differ = _Differ(shape.kinds, values, sentinels, name)
    whole = {
        f.name: plan
        for f in fields(query)
        if f.name != "text"
        and (plan := differ.diff(getattr(query, f.name), getattr(other, f.name))) is not None
    }
    if len(differ.seen) != len(values):
        raise NotParametric("a literal does not stand at a leaf of its own")
    if _Name() not in _leaves(whole):
        raise NotParametric("the name does not stand at a leaf of its own")
    reads = tuple((s, schemas[s]) for s in sorted(query.reads))
    return Template(_builder(query, whole), reads)


def _leaves(plan: Plan) -> list[Plan]:
    if isinstance(plan, dict):
        return [leaf for inner in plan.values() for leaf in _leaves(inner)]
    return [plan]


class QueryCache:
    """Compiled queries by shape: the first of a shape compiled in full, a template from the
    second, the rest bound.  Holds :data:`CAPACITY` shapes of at most :data:`MAX_TOKENS`
    tokens (longer queries are compiled in full); safe to share between threads.

    ``counters``: ``compiled`` (in full), ``bound``, ``templates`` derived and
    ``not_parametric`` shapes.
    """

    def __init__(self, capacity: int = CAPACITY, options: Options = DEFAULT_OPTIONS) -> None:
        self.capacity = capacity
        self.options = options
        self.counters: Counter[str] = Counter()
        self._entries: dict[tuple[object, ...], Template | str] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, shape: Shape) -> bool:
        return shape.key in self._entries

    def compile(
        self,
        shape: Shape,
        schemas: Mapping[str, StreamSchema],
        default_name: str | None = None,
        full: Callable[[], CompiledQuery] | None = None,
    ) -> CompiledQuery:
        """``compile_query(shape.text, schemas, default_name)``, bound from a template when the
        shape has one.  Raises what compiling in full raises.

        ``full`` compiles in full instead of ``compile_query`` (a shard builds the
        algebra the front sent); the text is then parsed only to derive a template.
        """
        entry = self._entries.get(shape.key)
        if isinstance(entry, Template):
            bound = entry.bind(shape, schemas, default_name)
            if bound is not None:
                self.counters["bound"] += 1
                return bound
        if full is None:
            query = compile_query(shape.text, schemas, default_name, self.options)
        else:
            query = full()
        self.counters["compiled"] += 1
        if len(shape.key) > MAX_TOKENS:
            return query
        if entry is None:
            self._store(shape.key, "seen")
        elif entry == "seen":
            try:
                self._store(shape.key, derive(shape, query, schemas, default_name, self.options))
                self.counters["templates"] += 1
            except NotParametric:
                self._store(shape.key, "not parametric")
                self.counters["not_parametric"] += 1
        return query

    def _store(self, key: tuple[object, ...], entry: Template | str) -> None:
        with self._lock:
            self._entries.pop(key, None)
            if len(self._entries) >= self.capacity:
                del self._entries[next(iter(self._entries))]
            self._entries[key] = entry
