"""Shared μ steps: the runs of a FOLD node stepped once per group (Section 4.3's μ, kept lazily).

A FOLD's node holds one instance per run; each step event REBINDs it: the right operand's
attributes take the event's values and the rest is carried (Section 2.3).  Where the step
compares the event only with constants and bounds DUR, every run of one filter group takes the
same step events while it lives, and after a step its right-hand attributes are the event's
whatever came before.  So the engine records a group's step once (:class:`GroupSteps`) and
leaves its runs as they are; a run takes the steps it owes (it is *settled*) only when
something reads it: an event that moves it on (a FORWARD fires, two steps in one epoch, an
event with a duration), a snapshot, or a change to its node.  The cost of a step no longer
follows the runs alive, as Table 2's NonDeterministic queries made it do.

A node *steps* (:meth:`Steppers.rebind_of`) if its FILTER and its only REBIND have one
template predicate of one conjunct whose dynamic atoms are only ``DUR <= c`` / ``DUR < c``,
the REBIND's map reads only the run's and the event's attributes and constants (not DUR), and
the node has no STAY, TIMEOUT, join or UNLESS of its own.  Where the map only copies, a run
takes the group's latest step alone; where it aggregates (NonDeterministicAgg's running sum),
it replays the group's steps it owes, in order (:class:`GroupSteps`).  An instance steps
lazily (:meth:`Steppers.lazy`) if its slots are all in one filter group and every slot of the
REBIND bounds DUR alike, by the node's bound: a live instance then meets every step of its
group within its DUR, all its slots move, and none stays behind.  Only an event of an input
stream is recorded as a step (its root is its epoch, so the last step's root stands for all).
Every other instance is filed and moved eagerly as before; eager is always correct, lazy is the
shortcut.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cesar.automata.algebra import Assign
from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.automaton import EdgeKind
from cesar.automata.schema import Event, Value
from cesar.automata.terms import Attr, Const, Param, Scope, Term, subterms
from cesar.index.masks import without
from cesar.server.engine.edges import CompiledEdge
from cesar.server.engine.params import Group
from cesar.server.engine.program import QueryProgram

if TYPE_CHECKING:
    from cesar.index.ai import InstanceIndex
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

    ``history`` holds the group's steps recorded without moving its instances, oldest
    first, one an epoch, as far back as a live instance may owe one (the REBIND's DUR
    bound).  An instance owes those that started after it ended: the latest alone where
    the map keeps nothing of earlier steps, all of them in order where it *replays*
    (an aggregate such as ``$1.sum + $2.Price`` reads the run).  ``eager`` is the last
    epoch in which the group's instances moved eagerly (its later events that epoch move
    them eagerly too).
    """

    rebind: CompiledEdge
    """The node's REBIND edge, by which its instances take their steps."""
    files: dict[EngineInstance, None] = field(default_factory=dict)
    history: deque[Step] = field(default_factory=deque)
    eager: float = -1.0
    replays: bool = field(init=False)

    def __post_init__(self) -> None:
        self.replays = any(_aggregates(a) for a in self.rebind.edge.map)

    def record(self, step: Step) -> None:
        """Add the group's step of a new epoch; forget those no live instance can owe.
        O(1) amortized."""
        history, t1 = self.history, step.event.t1
        bound = self.rebind.params.dur_bound()
        while history and history[0].event.t1 <= t1 - bound:
            history.popleft()
        history.append(step)

    def owed(self, instance: EngineInstance, t1: float) -> list[Step]:
        """The steps ``instance`` owes before epoch ``t1``, oldest first: those of earlier
        epochs that started after it ended (only the latest unless the group replays).
        O(steps owed)."""
        owed: list[Step] = []
        for step in reversed(self.history):  # point events, one an epoch: latest first
            if step.event.t1 >= t1:
                continue
            if step.event.t0 <= instance.t1:
                break
            owed.append(step)
            if not self.replays:
                break
        owed.reverse()
        return owed

    def this_epoch(self, t1: float) -> Step | None:
        """The step recorded in epoch ``t1``, if any."""
        return self.history[-1] if self.history and self.history[-1].event.t1 >= t1 else None

    def settle(
        self, instance: EngineInstance, t1: float, index: InstanceIndex[EngineInstance]
    ) -> bool | None:
        """Give ``instance`` (live in ``index``) the steps it owes before epoch ``t1``: True if
        it took some, None if one faulted (the run ended there, as an eager one would have;
        the caller removes it).  O(steps × map)."""
        owed = self.owed(instance, t1)
        if not owed:
            return False
        build = self.rebind.build
        assert build is not None
        binding = instance.binding
        for step in owed:
            event = step.event
            try:
                binding = build(binding, step.attrs, event.t1 - instance.t0 + 1, 1)
            except ArithmeticFault:
                self.rebind.params.faults.arithmetic += 1
                return None
            instance.t1 = event.t1
            instance.root = min(instance.root, step.root)
        index.rebind(instance, binding)
        return True

    def settle_all(
        self, t1: float, index: InstanceIndex[EngineInstance]
    ) -> tuple[int, list[EngineInstance]]:
        """:meth:`settle` every instance of the group before epoch ``t1``: how many took
        steps, and those whose step faulted (the caller removes them).  O(instances × steps)."""
        took, ended = 0, []
        for instance in self.files:
            settled = self.settle(instance, t1, index)
            if settled is None:
                ended.append(instance)
            else:
                took += settled
        return took, ended


def _aggregates(assign: Assign) -> bool:
    """True if ``assign`` reads the run other than by keeping one attribute under its name."""
    term = assign.term
    return not isinstance(term, Attr) or (term.scope is Scope.LEFT and term.name != assign.name)


def _reads_values(term: Term) -> bool:
    """True if ``term`` reads only attributes of the run and the event, and constants."""
    parts = subterms(term)
    if parts:
        return all(_reads_values(part) for part in parts)
    if isinstance(term, Attr):
        return term.scope in (Scope.LEFT, Scope.EVENT)
    return isinstance(term, (Const, Param))


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
        if not all(_reads_values(assign.term) for assign in edge.map):
            return None
        return rebind

    def lazy(self, node: int, members: int, homes: list[Group]) -> CompiledEdge | None:
        """The REBIND by which an instance of ``node`` with ``members``, filed under ``homes``,
        may step lazily, else None: one home holds all its slots, and every slot of the
        REBIND bounds DUR alike, by the node's bound (so do the instance's slots, whatever
        slots come later).  O(1)."""
        rebind = self.rebind_of(node)
        if rebind is None or len(homes) != 1 or without(members, homes[0].mask):
            return None
        params = rebind.params
        if not params.alike() or params.dur_bound() != self.program.bound.get(node):
            return None
        return rebind
