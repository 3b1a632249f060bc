"""A pattern's output: RETURN's items, or by default every attribute of its positive
components, each named and checked (SASE+ §3.2, the RETURN clause).

Without RETURN a singleton ``a`` gives ``a_price`` and the like, and a Kleene
variable ``a`` gives ``a_len``, ``a_first_price`` and ``a_last_price``: the attributes
every stream of the component has, in the first stream's order. A RETURN item
reads only the match (no negated component, no event a closure is still
taking), and each name is a valid attribute name, given once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from cesar.automata.errors import CelSemanticError
from cesar.automata.functions import FunctionRegistry
from cesar.automata.pattern.ast import Component, Index, Pattern, Ref
from cesar.automata.pattern.placing import STAGE, TAKE, keys_of, variable
from cesar.automata.schema import AttrType, StreamSchema, check_name
from cesar.automata.terms import Attr, Pos, Term
from cesar.automata.typecheck import infer_type


class Reading(Protocol):
    """What a resolver knows that the output needs: the pattern and its references, typed."""

    @property
    def pattern(self) -> Pattern: ...
    @property
    def schemas(self) -> Mapping[str, StreamSchema]: ...
    @property
    def base(self) -> Mapping[str, StreamSchema]: ...
    @property
    def functions(self) -> FunctionRegistry: ...
    @property
    def refs(self) -> Mapping[str, Ref]: ...
    @property
    def components(self) -> Mapping[str, Component]: ...

    def leaf(self, ref: Ref, pos: Pos) -> Attr:
        """The leaf reading ``ref``, registering it."""

    def ref_type(self, attr: Attr) -> AttrType:
        """The type of the reference ``attr`` stands for."""


def returns(reading: Reading, positive: Sequence[Component]) -> tuple[tuple[str, Term], ...]:
    """The output's attributes in order, each with the term that computes it."""
    pattern = reading.pattern
    out: list[tuple[str, Term, Pos]] = []
    if pattern.returns is None:
        for component in positive:
            var = variable(component)
            if pattern.returned is not None and var not in pattern.returned:
                continue
            names = common_attributes(component, reading.base)
            if component.kleene:
                out.append((f"{var}_len", reading.leaf(Ref(var, Index.LEN, None), None), None))
                for attr in names:
                    first = Ref(var, Index.FIRST, attr)
                    last = Ref(var, Index.LAST, attr)
                    out.append((f"{var}_first_{attr}", reading.leaf(first, None), None))
                    out.append((f"{var}_last_{attr}", reading.leaf(last, None), None))
            else:
                for attr in names:
                    leaf = reading.leaf(Ref(var, Index.ONLY, attr), None)
                    out.append((f"{var}_{attr}", leaf, None))
    else:
        for item in pattern.returns:
            term = item.term
            infer_type(term, reading.ref_type, reading.functions)
            for key in keys_of(term):
                ref = reading.refs[key]
                component = reading.components[ref.var]
                if component.negated or STAGE[ref.index] == TAKE:
                    raise CelSemanticError(
                        f"RETURN reads the match: {ref.key} is not part of it", item.pos
                    )
                lacking = [
                    t
                    for t in component.types
                    if ref.attr and reading.schemas[t].type_of(ref.attr) is None
                ]
                if lacking:
                    raise CelSemanticError(
                        f"RETURN {ref.key}: {', '.join(lacking)} has no {ref.attr}, so a "
                        "match may have no value for it",
                        item.pos,
                    )
            name = item.alias or default_name(term, reading.refs)
            if name is None:
                raise CelSemanticError("this RETURN item needs a name: add AS name", item.pos)
            out.append((name, term, item.pos))
    seen: set[str] = set()
    for name, _, pos in out:
        try:
            check_name(name, "attribute")
        except ValueError as exc:
            raise CelSemanticError(str(exc), pos or pattern.pos) from None
        if name in seen:
            raise CelSemanticError(
                f"two output attributes are named {name}; name them in RETURN … AS",
                pos or pattern.pos,
            )
        seen.add(name)
    return tuple((name, term) for name, term, _ in out)


def common_attributes(component: Component, schemas: Mapping[str, StreamSchema]) -> list[str]:
    """The attributes every stream of ``component`` has, in the first stream's order."""
    first = schemas[component.types[0]]
    return [
        name
        for name in first.names
        if all(name in schemas[other].names for other in component.types[1:])
    ]


def default_name(term: Term, refs: Mapping[str, Ref]) -> str | None:
    """The name a RETURN item gets without AS: ``a_price``, ``a_len``, ``sum_a_price``…;
    None for a term that is not one reference."""
    if not isinstance(term, Attr):
        return None
    ref = refs[term.name]
    if ref.index is Index.LEN:
        return f"{ref.var}_len"
    prefix = {Index.ONLY: "", Index.FIRST: "first_", Index.LAST: "last_"}.get(ref.index)
    if ref.aggregate is not None:
        return f"{ref.aggregate.lower()}_{ref.var}_{ref.attr}"
    return None if prefix is None else f"{ref.var}_{prefix}{ref.attr}"
