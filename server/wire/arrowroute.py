"""The routing table compiled for Arrow: shards and lanes of many events at once (docs/design.md).

:class:`ArrowRoutes` applies the rule of :mod:`cesar.server.wire.routing` to
an Arrow table of one stream's events: ``crc32(key bytes) mod shards`` for
every key attribute of the stream, and each global shard's static interest
(:class:`pb.GlobalInterest`) compiled into Arrow compute calls by
:func:`compile_interest` (a shard's conjuncts comparing one attribute with strings as one
``is_in`` pass): the feed picks each event's shards with it
(:mod:`cesar.server.feed.rows`), the front its global lanes
(:meth:`cesar.server.front.registry.Registry.interest_masks`).  :func:`key_shards` is the
hash of a whole column, which the front also uses for the key lanes of a routed piece
(:mod:`cesar.server.front.pieces`).  Python touches one value per distinct
key, never one per row.

>>> import pyarrow as pa
>>> table = pb.RoutingTable(shards=2, streams=[pb.StreamRoute(stream="S", key_attributes=["k"])])
>>> routes = ArrowRoutes.of(table)
>>> events = pa.table({"S/k": ["IBM", "AAPL"]})
>>> [m.to_pylist() for m in routes.shard_masks(events, "S")]
[[False, True], [True, False]]
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cesar.server.wire.arrowevents import column
from cesar.server.wire.routing import key_bytes
from cesar.v1 import cesar_pb2 as pb

Mask = Callable[[pa.Table], pa.Array]
"""A vectorized filter: one boolean per row of a table."""


def compile_predicate(pred: pb.Predicate, stream: str, positive: bool = True) -> Mask:
    """A vectorized filter for a static predicate over ``stream``'s attribute columns.

    Parts Arrow does not evaluate here (functions, ``/ % ^``) are taken as
    true where the predicate is positive and false under a negation, so the
    filter admits at least every event the predicate admits: a global shard
    may receive an event it does not need, never miss one it does.
    """
    kind = pred.WhichOneof("kind")
    if kind == "truth":
        return _constant(pred.truth)
    if kind == "negate":
        inner = compile_predicate(pred.negate, stream, not positive)
        return lambda table: pc.invert(inner(table))
    if kind in ("all", "any"):
        parts = list(getattr(pred, kind).items)
        items: list[Mask] = []
        if kind == "any" and positive:
            items, parts = _equalities(parts, stream)
        items += [compile_predicate(p, stream, positive) for p in parts]
        return _fold(items, pc.and_kleene if kind == "all" else pc.or_kleene)
    compare = pred.compare
    left = _compile_term(compare.left, stream)
    right = _compile_term(compare.right, stream)
    if left is None or right is None:
        return _constant(positive)
    operator = {
        "=": pc.equal,
        "!=": pc.not_equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }[compare.op]

    def compared(table: pa.Table) -> pa.Array:
        result = pc.fill_null(operator(left(table), right(table)), not positive)
        if isinstance(result, pa.Scalar):  # constants on both sides
            return pa.repeat(result, table.num_rows)
        return result

    return compared


def compile_interest(
    conjuncts: Sequence[pb.Predicate], stream: str, limit: int | None = None
) -> Mask | None:
    """A vectorized filter admitting at least what any of ``conjuncts`` admits (a global
    shard's static interest); None when, their equalities of an attribute with a string
    taken together, more than ``limit`` Arrow filters would remain (each costs a pass over
    the rows: then probing row by row is cheaper).

    >>> k = pb.Term(attribute=pb.AttributeRef(scope=pb.SCOPE_EVENT, name="k"))
    >>> equal = lambda v: pb.Predicate(compare=pb.Comparison(
    ...     op="=", left=k, right=pb.Term(constant=pb.Value(string_value=v))))
    >>> mask = compile_interest([equal(v) for v in ("IBM", "HP")], "S", limit=0)
    >>> mask(pa.table({"S/k": ["IBM", "AAPL", None, "HP"]})).to_pylist()
    [True, False, False, True]
    """
    masks, others = _equalities(list(conjuncts), stream)
    if limit is not None and len(others) > limit:
        return None
    return _fold(masks + [compile_predicate(item, stream) for item in others], pc.or_kleene)


def _fold(masks: list[Mask], join: Callable[[pa.Array, pa.Array], pa.Array]) -> Mask:
    """``masks`` joined with ``join`` (``and_kleene`` or ``or_kleene``); none: the join's
    identity (true for AND, false for OR)."""
    if not masks:
        return _constant(join is pc.and_kleene)

    def combined(table: pa.Table) -> pa.Array:
        result = masks[0](table)
        for mask in masks[1:]:
            result = join(result, mask(table))
        return result

    return combined


def _equalities(items: list[pb.Predicate], stream: str) -> tuple[list[Mask], list[pb.Predicate]]:
    """Of the items of a positive disjunction, those comparing an attribute of the event
    for equality with a string, as one ``is_in`` filter per attribute; and the others."""
    values: dict[str, list[str]] = {}
    grouped: dict[str, list[pb.Predicate]] = {}
    others: list[pb.Predicate] = []
    for item in items:
        found = _string_equality(item)
        if found is None:
            others.append(item)
        else:
            values.setdefault(found[0], []).append(found[1])
            grouped.setdefault(found[0], []).append(item)
    masks: list[Mask] = []
    for name, strings in values.items():
        if len(strings) == 1:
            others.extend(grouped[name])
            continue
        each = _fold([compile_predicate(item, stream) for item in grouped[name]], pc.or_kleene)
        masks.append(_one_of(column(stream, name), strings, each))
    return masks, others


def _string_equality(pred: pb.Predicate) -> tuple[str, str] | None:
    """(attribute, string) of ``attribute = 'string'`` (either way round), else None."""
    if pred.WhichOneof("kind") != "compare" or pred.compare.op != "=":
        return None
    sides = (pred.compare.left, pred.compare.right)
    for attribute, constant in (sides, sides[::-1]):
        if (
            attribute.WhichOneof("kind") == "attribute"
            and attribute.attribute.scope in (pb.SCOPE_EVENT, pb.SCOPE_RIGHT)
            and constant.WhichOneof("kind") == "constant"
            and constant.constant.WhichOneof("kind") == "string_value"
        ):
            return attribute.attribute.name, constant.constant.string_value
    return None


def _one_of(name: str, strings: list[str], each: Mask) -> Mask:
    """Whether the column ``name`` holds one of ``strings``: one ``is_in`` pass over a string
    column (a null is in none), or the equalities one by one (``each``) on another type."""

    def mask(table: pa.Table) -> pa.Array:
        values = table.column(name)
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            return pc.is_in(values, value_set=pa.array(strings, values.type))
        return each(table)

    return mask


def _constant(value: bool) -> Mask:
    return lambda table: pa.repeat(pa.scalar(value), table.num_rows)


Term = Callable[[pa.Table], pa.Array | pa.Scalar]


def _compile_term(term: pb.Term, stream: str) -> Term | None:
    kind = term.WhichOneof("kind")
    if kind == "constant":
        value = getattr(term.constant, term.constant.WhichOneof("kind") or "string_value")
        return lambda table: pa.scalar(value)
    if kind == "attribute" and term.attribute.scope in (pb.SCOPE_EVENT, pb.SCOPE_RIGHT):
        name = column(stream, term.attribute.name)
        return lambda table: table.column(name)
    if kind == "event_dur":
        return lambda table: pc.subtract(table.column("t1"), table.column("t0"))
    if kind == "negate":
        inner = _compile_term(term.negate, stream)
        return None if inner is None else lambda table: pc.negate(inner(table))
    if kind == "arithmetic" and term.arithmetic.op in ("+", "-", "*"):
        left = _compile_term(term.arithmetic.left, stream)
        right = _compile_term(term.arithmetic.right, stream)
        if left is None or right is None:
            return None
        function = {"+": pc.add, "-": pc.subtract, "*": pc.multiply}[term.arithmetic.op]
        return lambda table: function(left(table), right(table))
    return None


def key_shards(values: pa.Array | pa.ChunkedArray, shards: int) -> pa.Array:
    """``crc32(key_bytes(v)) mod shards`` for each value; Python runs once per distinct value
    (a string's bytes are its UTF-8), not at all with one shard; a null's shard is null.

    >>> key_shards(pa.array(["IBM", "IBM", "AAPL"]), 2).to_pylist()
    [1, 1, 0]
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if shards == 1 and not values.null_count:
        return pa.array(np.zeros(len(values), np.int32))
    encoded = pc.dictionary_encode(values)
    distinct = encoded.dictionary.to_pylist()
    if pa.types.is_string(values.type):
        table = [zlib.crc32(v.encode()) % shards for v in distinct]
    else:
        table = [zlib.crc32(key_bytes(v)) % shards for v in distinct]
    return pc.take(pa.array(table, pa.int32()), encoded.indices)


@dataclass
class ArrowRoutes:
    """A routing table compiled for Arrow: per stream, key attributes and per-shard filters."""

    shards: int
    keys: dict[str, tuple[str, ...]]
    interest: dict[str, dict[int, Mask]]

    @staticmethod
    def of(table: pb.RoutingTable) -> ArrowRoutes:
        """Compile every global interest of ``table``."""
        interest: dict[str, dict[int, Mask]] = {}
        for route in table.streams:
            for entry in route.global_interest:
                mask = compile_interest(entry.conjuncts, route.stream)
                assert mask is not None  # no limit
                interest.setdefault(route.stream, {})[entry.shard] = mask
        keys = {route.stream: tuple(route.key_attributes) for route in table.streams}
        return ArrowRoutes(table.shards, keys, interest)

    def shard_masks(self, table: pa.Table, stream: str) -> list[pa.Array]:
        """For one stream's valid events: a boolean mask per shard (the shards each goes to)."""
        masks = [pa.repeat(pa.scalar(False), table.num_rows) for _ in range(self.shards)]
        for key in self.keys.get(stream, ()):
            owners = key_shards(table.column(column(stream, key)), self.shards)
            for shard in range(self.shards):
                masks[shard] = pc.or_(masks[shard], pc.equal(owners, shard))
        for shard, mask in self.interest.get(stream, {}).items():
            masks[shard] = pc.or_(masks[shard], mask(table))
        return masks
