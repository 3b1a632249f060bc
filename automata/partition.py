"""The analysis behind placement: the keys a compiled subscription can be partitioned on.

A subscription is *key-partitioned* on attribute ``K`` when every instance it
can create only ever combines events that agree on ``K`` (docs/design.md,
"Placement and routing").  Then events that disagree on ``K`` never interact,
and each shard can run the subscription on the events whose ``K`` hashes to
it.  On the automata (Section 3) that is a property of the edges:

* an edge leaving the start node binds the instance's *key*: the binding
  attributes its map copies from the event's ``K`` (and the constant ``c`` if
  every conjunct requires ``K = c``; a later edge joining on the key whose
  every conjunct requires ``K = c`` makes the key ``c`` from its target on);
* every edge leaving any other node — FORWARD, REBIND and FILTER alike, since
  a FILTER edge's predicate says which events *affect* an instance — must, in
  every DNF conjunct, require the event's ``K`` to equal the key: an atom
  ``$1.b = K`` with ``b`` a key attribute, or ``K = c`` when the key is the
  constant ``c``.  Its target's key attributes are the map entries that copy
  ``$1.b`` or ``K``;
* an UNLESS edge (a negation looking back) must likewise ask only about
  remembered events of the key: ``$1.b = K``, or ``$1.@e.K = K`` (the firing
  event's key).

A query compiled into several automata (resubscription) is key-partitioned on
``K`` when each automaton is and every internal stream carries ``K`` as a key
attribute of its output.

>>> from cesar.automata.compiler import compile_query
>>> from cesar.automata.schema import parse_stream_spec
>>> schemas = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}
>>> sorted(partition_keys(compile_query(
...     "SELECT Name FROM Stock NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock",
...     schemas, "q").automata, schemas))
['Name']
>>> sorted(partition_keys(compile_query(
...     "Stock NEXT{$2.Price > $1.Price} Stock", schemas, "q").automata, schemas))
[]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cesar.automata.automaton import Automaton, Edge, EdgeKind
from cesar.automata.normal import Conjunct
from cesar.automata.schema import StreamSchema, Value
from cesar.automata.terms import Attr, Cmp, Const, Scope
from cesar.automata.windows import Window


@dataclass(frozen=True)
class _Key:
    """What an instance at a node knows about its events' ``K``: binding copies and a constant."""

    attributes: frozenset[str]
    constant: tuple[Value] | None = None


def _event_attr(term: object, name: str) -> bool:
    return isinstance(term, Attr) and term.scope is Scope.EVENT and term.name == name


def _pinned(atoms: Sequence[Cmp], key: str) -> tuple[Value] | None:
    """The constant ``c`` of an atom ``key = c`` among ``atoms``, if any."""
    for atom in atoms:
        if atom.op != "=":
            continue
        for a, b in ((atom.left, atom.right), (atom.right, atom.left)):
            if _event_attr(a, key) and isinstance(b, Const):
                return (b.value,)
    return None


def _joined(atoms: Sequence[Cmp], key: str, bound: frozenset[str]) -> bool:
    """Whether some atom is ``$1.b = key`` with ``b`` in ``bound``."""
    for atom in atoms:
        if atom.op != "=":
            continue
        for a, b in ((atom.left, atom.right), (atom.right, atom.left)):
            if (
                _event_attr(a, key)
                and isinstance(b, Attr)
                and b.scope is Scope.LEFT
                and b.name in bound
            ):
                return True
    return False


def _start_key(edge: Edge, key: str) -> _Key:
    copies = frozenset(a.name for a in edge.map if _event_attr(a.term, key))
    pins = {_pinned(c.static.atoms + c.dynamic.atoms, key) for c in edge.conjuncts}
    constant = pins.pop() if len(pins) == 1 else None
    return _Key(copies, constant)


def _step_key(edge: Edge, key: str, at: _Key) -> _Key | None:
    """The target's key after ``edge`` from a node with key ``at``; None if ``edge`` mixes keys."""
    pins = set()
    for conjunct in edge.conjuncts:
        atoms = conjunct.static.atoms + conjunct.dynamic.atoms
        pin = _pinned(atoms, key)
        pinned = at.constant is not None and pin == at.constant
        if not pinned and not _joined(atoms, key, at.attributes):
            return None
        pins.add(pin)
    if edge.kind is EdgeKind.FILTER:
        return at
    constant = at.constant
    if constant is None and len(pins) == 1:
        constant = pins.pop()  # every event taken holds K = c, and K joins the key: key c
    copies = frozenset(
        a.name
        for a in edge.map
        if _event_attr(a.term, key)
        or (
            isinstance(a.term, Attr) and a.term.scope is Scope.LEFT and a.term.name in at.attributes
        )
    )
    return _Key(copies, constant)


def _meet(a: _Key | None, b: _Key) -> _Key:
    if a is None:
        return b
    return _Key(a.attributes & b.attributes, a.constant if a.constant == b.constant else None)


def _output_key(automaton: Automaton, key: str) -> _Key | None:
    """The final node's key if ``automaton`` is key-partitioned on ``key``, else None."""
    keys: dict[int, _Key] = {}
    for edge in automaton.edges:
        if edge.source == 0 and edge.kind is not EdgeKind.UNLESS:
            keys[edge.target] = _meet(keys.get(edge.target), _start_key(edge, key))
    changed = True
    while changed:
        changed = False
        for edge in automaton.edges:
            # A STAY edge matters only for events its node's FILTER edge lets in; an UNLESS
            # edge makes no instance (below).
            if (
                edge.source == 0
                or edge.source not in keys
                or edge.kind in (EdgeKind.STAY, EdgeKind.UNLESS)
            ):
                continue
            step = _step_key(edge, key, keys[edge.source])
            if step is None:
                return None
            met = _meet(keys.get(edge.target), step)
            if met != keys.get(edge.target):
                keys[edge.target] = met
                changed = True
    for edge in automaton.edges:
        if edge.kind is EdgeKind.UNLESS and not _remembers_key(edge, key, keys):
            return None
    return keys.get(automaton.final, _Key(frozenset()))


def _remembers_key(edge: Edge, key: str, keys: Mapping[int, _Key]) -> bool:
    """Whether an UNLESS edge asks only about remembered events of the run's key: every
    conjunct joins the remembered ``key`` with a key attribute of its source's binding or
    with the firing event's (``$1.@e.key``, the run's key once the guarded edge fires), or
    pins it to the source's constant."""
    at = keys.get(edge.source, _Key(frozenset()))
    bound = at.attributes | {f"@e.{key}"}
    for conjunct in edge.conjuncts:
        atoms = conjunct.static.atoms + conjunct.dynamic.atoms
        pinned = at.constant is not None and _pinned(atoms, key) == at.constant
        if not pinned and not _joined(atoms, key, bound):
            return False
    return True


def partition_keys(
    automata: Sequence[Automaton], streams: Mapping[str, StreamSchema]
) -> frozenset[str]:
    """Every attribute the subscription made of ``automata`` is key-partitioned on.

    Empty means global.  ``automata`` lists producers first, as
    :attr:`~cesar.automata.compiler.CompiledQuery.automata` does; ``streams`` holds
    the schemas of the streams they read.  A key must be an attribute of every
    stream read and of every internal stream, which must carry it, and a key of every
    time-window aggregate read (a shard holding part of a window's partition would
    aggregate part of it).
    """
    internal = {a.name: a for a in automata if a.internal}
    read = {edge.stream for a in automata for edge in a.edges}
    names = [set(streams[s].names) for s in read if s not in internal]
    names += [set(a.output.names) for a in internal.values()]
    candidates = set.intersection(*names) if names else set()
    for a in automata:
        for _, window in a.windows:
            if isinstance(window, Window):
                candidates &= set(window.key)
    found = set()
    for key in candidates:
        outputs = [_output_key(a, key) for a in automata]
        if all(
            out is not None and (not a.internal or key in out.attributes)
            for a, out in zip(automata, outputs, strict=True)
        ):
            found.add(key)
    return frozenset(found)


def pinned_key(automata: Sequence[Automaton], key: str) -> Value | None:
    """The one value of ``key`` every match of the subscription holds, if it has one.

    For a subscription key-partitioned on ``key`` (:func:`partition_keys`)
    whose every path to the final node of each automaton publishing its stream takes an
    edge requiring ``key = c``: every match holds ``c``, so only the shard
    owning ``c`` can produce its output.

    >>> from cesar.automata.compiler import compile_query
    >>> from cesar.automata.schema import parse_stream_spec
    >>> schemas = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}
    >>> pinned_key(compile_query("FILTER{Name = 'IBM'} Stock NEXT{$1.Name = $2.Name} Stock",
    ...     schemas, "q").automata, "Name")
    'IBM'
    >>> pinned_key(compile_query("FILTER{Name = 'IBM'} (Stock NEXT{$1.Name = $2.Name} Stock)",
    ...     schemas, "q").automata, "Name")
    'IBM'
    """
    name = automata[-1].name  # every alternative of a pattern with OR publishes it
    outs = [_output_key(a, key) for a in automata if a.name == name]
    constants = {out.constant if out is not None else None for out in outs}
    if len(constants) != 1:
        return None
    (constant,) = constants
    return constant[0] if constant is not None else None


def static_interest(automata: Sequence[Automaton]) -> dict[str, tuple[Conjunct, ...]]:
    """Per stream read from outside, the static conjuncts an event must satisfy one of to matter.

    An event of stream ``S`` can fire an ∃-edge or affect an instance through a
    FILTER edge only if it satisfies the static part of one of that edge's DNF
    conjuncts; an event satisfying none of them, on every edge reading ``S``,
    changes no output and need not be delivered.  A TRUE (empty) conjunct
    means every event matters.  This is what the feed filters events for
    global subscriptions by (docs/design.md, "Placement and routing").

    >>> from cesar.automata.compiler import compile_query
    >>> from cesar.automata.schema import parse_stream_spec
    >>> schemas = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}
    >>> q = compile_query("FILTER{Name = 'IBM'} Stock NEXT{$2.Price > 99} Stock", schemas, "q")
    >>> from cesar.automata.terms import to_cel
    >>> [to_cel(c.pred()) for c in static_interest(q.automata)["Stock"]]
    ["Name = 'IBM'", 'Price > 99']
    """
    internal = {a.name for a in automata if a.internal}
    found: dict[str, dict[Conjunct, None]] = {}
    for automaton in automata:
        for edge in automaton.edges:
            if edge.stream in internal or edge.kind is EdgeKind.STAY:
                continue
            statics = found.setdefault(edge.stream, {})
            for conjunct in edge.conjuncts:
                statics[conjunct.static] = None
    return {
        stream: (Conjunct(()),) if Conjunct(()) in statics else tuple(statics)
        for stream, statics in found.items()
    }
