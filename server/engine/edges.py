"""A template edge as the engine runs it: its constants, its code, its AI accesses (Section 4).

:class:`~cesar.server.engine.program.QueryProgram` compiles each edge of the
merged DAG into a :class:`CompiledEdge` once, when a subscription first needs
it: the slots' constants grouped and indexed
(:class:`~cesar.server.engine.params.EdgeParams`), the attribute map as
generated code, and per FILTER conjunct the instance attribute the AI index
files its instances by (:func:`access_atom`).
"""

from __future__ import annotations

from dataclasses import dataclass

from cesar.automata.automaton import Edge
from cesar.automata.normal import Conjunct
from cesar.automata.terms import FLIPPED, Attr, Scope
from cesar.index.ai import InstanceAccess
from cesar.server.engine.codegen import Build, Values
from cesar.server.engine.dag import DagNode
from cesar.server.engine.params import EdgeParams


@dataclass
class CompiledEdge:
    """A template edge as code: its slots' constants and groups, its map, its AI accesses."""

    edge: Edge
    source: int
    target: int
    params: EdgeParams
    target_node: DagNode
    """The DAG's node ``target`` (it lives as long as the edge): read where the edge fires,
    without a look-up."""
    build: Build | None = None
    values: Values | None = None
    """``build``'s items made without the dict, for a match at a node no instance stays at;
    generated the first time it fires so (:meth:`QueryProgram.values_of`)."""
    accesses: tuple[InstanceAccess | None, ...] = ()
    recall: InstanceAccess | None = None
    """An UNLESS edge's :func:`recall_key`, found once when it is compiled."""
    dur_only: bool = False
    """:func:`~cesar.automata.automaton.reads_dur_only`: of an instance it reads only DUR."""
    keeps_end: bool = False
    """The edge's ``keeps_end``, and below whether it is a REBIND, read where it fires: an
    attribute of ``Edge`` (the automata side, not compiled) is a generic look-up in compiled
    code, 1.4 % of the heterogeneous workload's instructions."""
    rebinds: bool = False
    wait_keys: tuple[InstanceAccess | None, ...] = ()
    """Per conjunct of a FILTER edge, the equality under which its instances wait by threshold
    (its AI access is then None: they are filed by group, then wait per key value)."""


def access_atom(dynamic: Conjunct) -> InstanceAccess | None:
    """The conjunct's best atom comparing an instance attribute with an event attribute.

    An equality if there is one, else an ordering (``!=`` selects too little to help).
    """
    found = []
    for atom in dynamic.atoms:
        left, right = atom.left, atom.right
        if not (isinstance(left, Attr) and isinstance(right, Attr)) or atom.op == "!=":
            continue
        if left.scope is Scope.LEFT and right.scope is Scope.EVENT:
            found.append(InstanceAccess(atom.op, left.name, right.name))
        elif left.scope is Scope.EVENT and right.scope is Scope.LEFT:
            found.append(InstanceAccess(FLIPPED[atom.op], right.name, left.name))
    equal = [a for a in found if a.op == "="]
    best = equal or found
    return best[0] if best else None


def recall_key(edge: Edge) -> InstanceAccess | None:
    """The equality of a binding attribute and an event attribute every conjunct of an
    UNLESS edge holds, if there is one: the remembered events to try are those with the
    binding's value."""
    accesses = {access_atom(c.dynamic) for c in edge.conjuncts}
    if len(accesses) != 1:
        return None
    (access,) = accesses
    return access if access is not None and access.op == "=" else None
