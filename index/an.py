"""The Active Node (AN) index (Section 4.3): static parts of active nodes' filters → nodes.

Only *active* nodes — nodes with at least one live instance — are in the
index.  For each, the static part of every conjunct of its FILTER edge's
predicate is registered; probing with an event returns the active nodes
whose instances the event may affect (and through which conjuncts).  Every
other active node's instances all stay put, unvisited.  The start node is not
in the index: it is always active and handled by the engine.
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.automaton import Edge, EdgeKind
from cesar.automata.schema import Value
from cesar.index.static import ConjunctRegistry


class ActiveNodeIndex:
    """Active node id → its filter conjuncts' static parts, per stream; add / remove / probe."""

    def __init__(self) -> None:
        self._registry = ConjunctRegistry()

    def __len__(self) -> int:
        """The number of active nodes indexed."""
        return len(self._registry)

    def __contains__(self, node: int) -> bool:
        return node in self._registry

    def add(self, node: int, filter_edge: Edge) -> None:
        """A node became active: index its filter edge."""
        assert filter_edge.kind is EdgeKind.FILTER
        self._registry.add(node, filter_edge.stream, tuple(c.static for c in filter_edge.conjuncts))

    def remove(self, node: int) -> None:
        """A node became inactive."""
        self._registry.remove(node)

    def probe(self, stream: str, attrs: Mapping[str, Value]) -> dict[int, list[int]]:
        """Active node → positions of its filter conjuncts whose static part the event satisfies."""
        return self._registry.probe(stream, attrs)  # type: ignore[return-value]

    def check_valid(self) -> None:
        """Assert the index's invariants."""
        self._registry.check_valid()
