"""Event automata as data (Sections 3.2–3.4): nodes and FORWARD / REBIND / FILTER edges.

An :class:`Automaton` is compiled structure only; the instances that run on it
live in :mod:`cesar.automata.runtime`.  Node 0 is the start node, implicitly always
active with the empty instance ε; ``final`` is the node whose instances are the
automaton's output events.

Every edge reads one stream and is labelled with

* its predicate, canonical, and the same predicate in disjunctive normal form
  with each conjunct split into its *static* part θ1 (``attribute relop
  constant`` on the incoming event) and its *dynamic* part θ2 (everything else);
* ``guards``: terms that must evaluate without an arithmetic fault for the
  event to count at all (an α of the right operand that faults drops the event
  from the operand, Section 2.1);
* for FORWARD and REBIND (∃-type) edges, the attribute map that computes the
  target's binding: Theorem 3's π ∘ α ∘ ρ ∘ σ collapsed into one assignment
  per kept attribute.

Inside edge labels ``$1.x`` reads the instance's binding, a bare name reads the
incoming event, ``DUR`` is the duration of instance and event together and
``DUR($2)`` the incoming event's own.  A FILTER (∀-type) edge's predicate says
which events *affect* the instance: the instance survives an epoch only if no
event of the epoch that starts after it satisfies the predicate — unless the
node has a STAY edge (∀, the pattern language's "ignore"; CEL never makes one)
and every affecting event satisfies it too.  The engine looks only at affected
instances, so an automaton's ∃-edges fire on affected events only: every ∃-edge
predicate implies its node's FILTER predicate.  A STAY edge lets an instance
both fire and stay, as skip-till-any-match needs.  A TIMEOUT edge publishes an
instance that has waited out its deadline (a pattern's match whose trailing
negation did not happen within the window).

A node whose FILTER edge ``joins`` (a pattern's AND) sees events by arrival
instead: its instances are affected by every event processed after they were
made, later events of their own epoch included (in the epoch's order), whatever
the events' intervals; an instance spans the smallest ``t0`` and the largest
``t1`` of its events, and so does ``DUR`` on the node's edges.  Each event
joins an instance once, so every assignment of distinct events is made once,
whatever order the epoch comes in.

An UNLESS edge (∄, a pattern's negation that must look back) guards the
∃-edges with its source and target: one fires only if no *remembered* event
— an event of the UNLESS edge's stream from an earlier epoch — satisfies the
UNLESS predicate.  There ``$1.x`` reads the instance's binding, ``$1.@e.x``
the firing event's ``x`` and ``$1.@end`` the firing event's end relative to
the instance's start (``t1 - t0 + 1``); a bare name reads the remembered
event, ``DUR`` is its end relative to the instance's start and ``DUR($2)``
its own duration.  The remembered events are kept while ``DUR($2) <= c`` of
the predicate can hold for them: ``c - 1`` ticks back from the clock
(:func:`own_bound`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from cesar.automata.algebra import Assign, Columns
from cesar.automata.derived import Derived
from cesar.automata.normal import Conjunct
from cesar.automata.schema import StreamSchema, Value
from cesar.automata.skipping import Skip
from cesar.automata.terms import Const, Dur, EventDur, Param, Pred, Term, to_cel


class EdgeKind(enum.Enum):
    """FORWARD moves to a new node, REBIND loops and updates, FILTER loops and keeps (∀).

    STAY loops too: an instance the FILTER edge affects stays if STAY holds for
    each event that affects it (∀).  TIMEOUT fires with no event: when the
    clock passes the instance's deadline (its start plus the edge's DUR bound,
    less one), its attribute map, over the binding alone, makes the output.
    UNLESS (∄) guards the ∃-edges with its ends: they fire only if no event
    of its stream seen in an earlier epoch satisfies it (module docstring).
    """

    FORWARD = "forward"
    REBIND = "rebind"
    FILTER = "filter"
    STAY = "stay"
    TIMEOUT = "timeout"
    UNLESS = "unless"

    __hash__ = object.__hash__  # members are singletons; Enum's hash runs Python per call


LOOPS = frozenset({EdgeKind.FILTER, EdgeKind.STAY})
"""The ∀ kinds: they keep or let go of an instance, never make one."""


@dataclass(frozen=True, slots=True, weakref_slot=True)
class SplitConjunct:
    """One DNF conjunct of an edge predicate: its static part θ1 and dynamic part θ2."""

    static: Conjunct
    dynamic: Conjunct


@dataclass(frozen=True, slots=True)
class Edge:
    """An edge of an event automaton; see the module docstring for the labels.

    ``keeps_end``: a REBIND that records something in the binding without taking the
    event into the match — the instance keeps its end (``t1``), so events that
    start before the recorded one ends are still after it; it fires once per
    instance and epoch however many events satisfy it, and its map reads no event.
    ``unless_taken``: such a REBIND does not fire for an instance that takes an event (another
    REBIND) in the same epoch: a run that may not skip what it can take (skip till next
    match, contiguity) has no copy that did not take it.
    ``joins``: a FILTER edge whose node sees events by arrival (module docstring).
    """

    kind: EdgeKind
    source: int
    target: int
    stream: str
    pred: Pred
    conjuncts: tuple[SplitConjunct, ...]
    guards: tuple[Term, ...]
    map: tuple[Assign, ...]
    keeps_end: bool = False
    joins: bool = False
    unless_taken: bool = False


@dataclass(frozen=True, slots=True)
class Node:
    """A state: its id and the attributes every instance at it binds."""

    id: int
    attributes: Columns


@dataclass(frozen=True)
class Automaton:
    """A compiled event automaton publishing ``output``; ``internal`` if only others read it.

    Invariant: node ids are ``0 .. len(nodes) - 1`` in order, 0 is the start,
    and every edge's ends are nodes of this automaton.
    """

    output: StreamSchema
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    final: int
    internal: bool = False
    shared: bool = False
    """Internal and named by its content (:func:`~cesar.automata.pattern.construct.union_name`):
    the automata of any subscriptions with this name are equal, and an engine that merges
    keeps one for all of them."""
    skip: Skip | None = None
    """The after-match policy of the pattern it runs: its final node then holds the hidden
    attributes of :mod:`cesar.automata.skipping` too, which a Skipper strips."""
    windows: tuple[tuple[str, Derived], ...] = ()
    """The time-window aggregates and time functions its subscription reads, per input stream:
    every event of the stream carries each as an attribute before any automaton sees it."""

    @property
    def name(self) -> str:
        """The stream this automaton publishes."""
        return self.output.name

    @cached_property
    def reads(self) -> frozenset[str]:
        """The streams the edges read."""
        return frozenset(edge.stream for edge in self.edges)

    @cached_property
    def outgoing(self) -> Mapping[int, tuple[Edge, ...]]:
        """Each node's outgoing edges, FILTER edges first."""
        table: dict[int, list[Edge]] = {node.id: [] for node in self.nodes}
        for edge in self.edges:
            table[edge.source].append(edge)
        return {
            node: tuple(sorted(edges, key=lambda e: e.kind is not EdgeKind.FILTER))
            for node, edges in table.items()
        }

    @cached_property
    def unless(self) -> Mapping[tuple[int, int], tuple[Edge, ...]]:
        """The UNLESS edges guarding the ∃-edges of each (source, target)."""
        table: dict[tuple[int, int], list[Edge]] = {}
        for edge in self.edges:
            if edge.kind is EdgeKind.UNLESS:
                table.setdefault((edge.source, edge.target), []).append(edge)
        return {ends: tuple(edges) for ends, edges in table.items()}

    @cached_property
    def joining(self) -> frozenset[int]:
        """The nodes that see events by arrival: their FILTER edge ``joins``."""
        return frozenset(e.source for e in self.edges if e.kind is EdgeKind.FILTER and e.joins)


def distinct(automata: Iterable[Automaton]) -> list[Automaton]:
    """``automata`` in order, each ``shared`` one only the first time its name comes (the
    others are equal to it: its name is its content's).  O(automata)."""
    seen: set[str] = set()
    out = []
    for automaton in automata:
        if automaton.shared:
            if automaton.name in seen:
                continue
            seen.add(automaton.name)
        out.append(automaton)
    return out


def dur_bound(edge: Edge) -> float:
    """The largest composite DUR (an integer) with which ``edge`` can still fire (inf: none)."""
    return _bound(edge, Dur)


def reads_dur_only(edge: Edge) -> bool:
    """True if ``edge`` reads of the instance only its DUR, bounded from above (``DUR <= c``,
    ``DUR < c``), and has no guard: whether it holds for a live instance is a question about
    the event alone."""
    return not edge.guards and all(
        isinstance(atom.left, Dur)
        and atom.op in ("<=", "<")
        and isinstance(atom.right, (Const, Param))
        for conjunct in edge.conjuncts
        for atom in conjunct.dynamic.atoms
    )


def own_bound(edge: Edge) -> float:
    """The largest own duration (``DUR($2)``) with which ``edge`` can still hold (inf: none)."""
    return _bound(edge, EventDur)


def _bound(edge: Edge, kind: type[Dur] | type[EventDur]) -> float:
    """The largest integer a ``kind`` leaf may take in some conjunct of ``edge`` (inf: none)."""
    best = -math.inf
    for conjunct in edge.conjuncts:
        bound = math.inf
        for atom in conjunct.dynamic.atoms:
            if isinstance(atom.left, kind) and isinstance(atom.right, Const):
                bound = min(bound, max_dur(atom.op, atom.right.value))
        best = max(best, bound)
    return best


def max_dur(op: str, value: Value) -> float:
    """The largest integer DUR satisfying ``DUR op value`` (inf if unbounded, -inf if none)."""
    if op not in ("<", "<=", "=") or isinstance(value, (str, bool)):
        return math.inf
    if math.isnan(value):
        return -math.inf
    if math.isinf(value):
        return value
    if op == "<":
        return float(math.ceil(value) - 1)
    if op == "<=" or value == math.floor(value):
        return float(math.floor(value))
    return -math.inf


def node_label(automaton: Automaton, node: int) -> str:
    """``q0`` and so on, with ``start`` and ``final`` marked."""
    marks = ["start"] if node == 0 else []
    if node == automaton.final:
        marks.append("final")
    return f"q{node}" + (f" ({', '.join(marks)})" if marks else "")


def _conjunct_lines(edge: Edge) -> list[str]:
    if not edge.conjuncts:
        return ["never (FALSE)"]
    lines = []
    for index, part in enumerate(edge.conjuncts):
        prefix = "or " if index else ""
        lines.append(
            f"{prefix}θ1: {to_cel(part.static.pred())}   θ2: {to_cel(part.dynamic.pred())}"
        )
    return lines


def format_automaton(automaton: Automaton) -> str:
    """A readable listing of nodes and edges (used by ``cesar explain``)."""
    role = "internal stream" if automaton.internal else "publishes"
    lines = [f"automaton {automaton.name} ({role} {automaton.output.spec()})", "  nodes:"]
    for node in automaton.nodes:
        attrs = ", ".join(f"{name}:{typ.value}" for name, typ in node.attributes)
        lines.append(f"    {node_label(automaton, node.id)}  binds ({attrs})")
    lines.append("  edges:")
    for edge in automaton.edges:
        kind = f"∀ {edge.kind.name}" if edge.kind in LOOPS else f"∃ {edge.kind.name}"
        if edge.kind is EdgeKind.TIMEOUT:
            kind = "TIMEOUT (when the clock passes the DUR bound)"
        if edge.kind is EdgeKind.UNLESS:
            kind = "∄ UNLESS (no earlier event satisfies it, else its ∃-edges do not fire)"
        if edge.keeps_end:
            kind += " (keeps its end)"
        if edge.unless_taken:
            kind += " (not when the instance takes an event)"
        if edge.joins:
            kind += " (joins: sees events by arrival)"
        lines.append(f"    q{edge.source} → q{edge.target}  {kind}  on {edge.stream}")
        lines.extend(f"      {line}" for line in _conjunct_lines(edge))
        if edge.guards:
            lines.append(f"      guards: {', '.join(to_cel(g) for g in edge.guards)}")
        if edge.map:
            lines.append(f"      map: {', '.join(str(a) for a in edge.map)}")
    return "\n".join(lines)


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def format_dot(automata: tuple[Automaton, ...]) -> str:
    """Graphviz source for one or more automata (one cluster each).

    >>> print(format_dot(()))
    digraph cesar {
      rankdir=LR;
      node [shape=circle, fontname="Helvetica"];
      edge [fontname="Helvetica", fontsize=10];
    }
    """
    lines = [
        "digraph cesar {",
        "  rankdir=LR;",
        '  node [shape=circle, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    for index, automaton in enumerate(automata):
        lines.append(f"  subgraph cluster_{index} {{")
        lines.append(f'    label="{_dot_text(automaton.name)}";')
        for node in automaton.nodes:
            shape = "doublecircle" if node.id == automaton.final else "circle"
            lines.append(f'    a{index}q{node.id} [label="q{node.id}", shape={shape}];')
        for edge in automaton.edges:
            label = [f"{edge.kind.name} on {edge.stream}"]
            label.extend(_conjunct_lines(edge))
            if edge.map:
                label.append("map: " + ", ".join(str(a) for a in edge.map))
            # As in the paper: filter loops on top of a node, rebind loops below it.
            port = {EdgeKind.FILTER: ":n", EdgeKind.STAY: ":n", EdgeKind.REBIND: ":s"}.get(
                edge.kind, ""
            )
            style = ", style=dashed" if edge.kind in LOOPS else ""
            text = _dot_text("\n".join(label)).replace("\n", "\\l") + "\\l"
            lines.append(
                f"    a{index}q{edge.source}{port} -> a{index}q{edge.target}{port} "
                f'[label="{text}"{style}];'
            )
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)
