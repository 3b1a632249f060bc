"""Shared μ steps: the runs of a FOLD node stepped once per group (Section 4.3's μ, kept lazily).

A FOLD's node holds one instance per run; each step event REBINDs it: the right operand's
attributes take the event's values and the rest is carried (Section 2.3).  Where the step
compares the event only with constants and bounds DUR, every run of one filter group takes the
same step events while it lives, and after a step its right-hand attributes are the event's
whatever came before.  So the engine records a group's step once (:class:`GroupSteps`) and
leaves its runs as they are; a run takes the group's last step (it is *settled*) only when
something reads it: an event that moves it on (a FORWARD fires, two steps in one epoch, an
event with a duration), a snapshot, or a change to its node.  The cost of a step no longer
follows the runs alive, as Table 2's NonDeterministic queries made it do.

A node *steps* (:meth:`Steppers.rebind_of`) if its FILTER and its only REBIND have one
template predicate of one conjunct whose dynamic atoms are only ``DUR <= c`` / ``DUR < c``,
the REBIND's map copies event attributes, constants, and its own binding's attributes under
their names, and the node has no STAY, TIMEOUT, join or UNLESS of its own.  An instance steps
lazily (:meth:`Steppers.lazy`) if its slots are all in one filter group and every slot of the
REBIND bounds DUR alike, by the node's bound: a live instance then meets every step of its
group within its DUR, all its slots move, and none stays behind.  Only an event of an input
stream is recorded as a step (its root is its epoch, so the last step's root stands for all).
Every other instance is filed and moved eagerly as before; eager is always correct, lazy is the
shortcut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cesar.automata.automaton import EdgeKind
from cesar.automata.schema import Event, Value
from cesar.automata.terms import Attr, Const, Scope
from cesar.server.engine.params import Group
from cesar.server.engine.program import CompiledEdge, QueryProgram

if TYPE_CHECKING:
    from cesar.server.engine.state import EngineInstance


@dataclass(frozen=True, slots=True)
class Step:
    """One step event of a group, as its runs will take it."""

    event: Event
    attrs: Mapping[str, Value]
    root: float


@dataclass(slots=True)
class GroupSteps:
    """A filter group's lazily stepped instances, the edge they step by and the steps they
    have yet to take.

    ``last`` is the group's latest step recorded without moving its instances; ``before``
    the latest of an earlier epoch than ``last``'s (an instance's state before ``last``'s
    epoch, when another event of that epoch moves it).  ``eager`` is the last epoch in which
    the group's instances moved eagerly (its later events that epoch move them eagerly too).
    """

    rebind: CompiledEdge
    """The node's REBIND edge, by which its instances take their steps."""
    files: dict[int, EngineInstance] = field(default_factory=dict)
    last: Step | None = None
    before: Step | None = None
    eager: float = -1.0

    def pending(self, instance: EngineInstance, t1: float) -> Step | None:
        """The step ``instance`` owes before epoch ``t1``: the latest recorded step of an
        earlier epoch, if it started after the instance ended (an instance takes only the
        latest: its map keeps nothing of the earlier ones)."""
        step = self.last
        if step is not None and step.event.t1 >= t1:
            step = self.before
        if step is None or step.event.t0 <= instance.t1:
            return None
        return step


class Steppers:
    """Which nodes step and which instances may step lazily, for one program.  O(1) per
    question after the first."""

    def __init__(self, program: QueryProgram, enabled: bool = True) -> None:
        self.program = program
        self.enabled = enabled
        self._rebinds: dict[int, CompiledEdge | None] = {}

    def forget(self, nodes: Iterable[int]) -> None:
        """Forget what was worked out about deleted nodes.

        A node's own loops are part of its signature, so what decides whether a live node
        steps does not change while it lives."""
        for node in nodes:
            self._rebinds.pop(node, None)

    def rebind_of(self, node: int) -> CompiledEdge | None:
        """The REBIND edge of ``node`` if the node steps (see the module docstring), else None."""
        if not self.enabled:
            return None
        if node in self._rebinds:
            return self._rebinds[node]
        found = self._rebinds[node] = self._find(node)
        return found

    def _find(self, node: int) -> CompiledEdge | None:
        program = self.program
        dag_node = program.dag.nodes[node]
        if (
            dag_node.filter is None
            or dag_node.stay is not None
            or dag_node.timeout is not None
            or node in program.dag.joining
            or (node, node) in program.dag.guarded
        ):
            return None
        rebinds = [
            program.edges[e]
            for e in dag_node.leaving
            if program.edges[e].edge.kind is EdgeKind.REBIND
        ]
        if len(rebinds) != 1:
            return None
        (rebind,) = rebinds
        compiled = program.filter_of(node)
        edge, filtering = rebind.edge, compiled.edge
        if (
            edge.pred != filtering.pred
            or edge.stream != filtering.stream
            or edge.keeps_end
            or edge.unless_taken
            or edge.joins
            or edge.guards
            or not rebind.dur_only
            or len(edge.conjuncts) != 1
            or len(filtering.conjuncts) != 1
            or compiled.accesses != (None,)
            or compiled.wait_keys != (None,)
            or compiled.params.plans[0].threshold is not None
        ):
            return None
        for assign in edge.map:
            term = assign.term
            if isinstance(term, Attr):
                if term.scope is not Scope.EVENT and (
                    term.scope is not Scope.LEFT or term.name != assign.name
                ):
                    return None
            elif not isinstance(term, Const):
                return None
        return rebind

    def lazy(self, node: int, members: int, homes: list[Group]) -> CompiledEdge | None:
        """The REBIND by which an instance of ``node`` with ``members``, filed under ``homes``,
        may step lazily, else None: one home holds all its slots, and every slot of the
        REBIND bounds DUR alike, by the node's bound (so do the instance's slots, whatever
        slots come later).  O(1)."""
        rebind = self.rebind_of(node)
        if rebind is None or len(homes) != 1 or members & ~homes[0].mask:
            return None
        params = rebind.params
        if not params.alike() or params.dur_bound() != self.program.bound.get(node):
            return None
        return rebind


def settle(instance: EngineInstance, step: Step, rebind: CompiledEdge) -> Mapping[str, Value]:
    """The binding ``instance`` has after taking ``step`` through ``rebind``; sets its end and
    root (the caller re-files the binding in its node's index).  O(map)."""
    event = step.event
    assert rebind.build is not None
    dur, own = event.t1 - instance.t0 + 1, event.t1 - event.t0 + 1
    binding = rebind.build(instance.binding, step.attrs, dur, own)
    instance.t1 = event.t1
    instance.root = min(instance.root, step.root)
    return binding
