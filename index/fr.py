"""The Forward/Rebind (FR) index (Section 4.3): static parts of ∃-edge conjuncts → edges.

For every FORWARD and REBIND edge of the query DAG and every conjunct of its
predicate's DNF, the conjunct's static part is registered under the edge id.
Probing with an event returns the edges (and which of their conjuncts) whose
static part the event satisfies; only those edges' dynamic parts are ever
verified.  Equality and range atoms are both indexed (:mod:`index.static`).
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.automaton import Edge, EdgeKind
from cesar.automata.schema import Value
from cesar.index.static import ConjunctRegistry


class ForwardRebindIndex:
    """Edge id → its ∃-edge conjuncts' static parts, per stream; add / remove / probe."""

    def __init__(self) -> None:
        self._registry = ConjunctRegistry()

    def __len__(self) -> int:
        return len(self._registry)

    def add(self, edge_id: int, edge: Edge) -> None:
        """Index a FORWARD or REBIND edge."""
        assert edge.kind is not EdgeKind.FILTER, "FR indexes ∃-edges only"
        self._registry.add(edge_id, edge.stream, tuple(c.static for c in edge.conjuncts))

    def remove(self, edge_id: int) -> None:
        """Forget an edge."""
        self._registry.remove(edge_id)

    def probe(self, stream: str, attrs: Mapping[str, Value]) -> dict[int, list[int]]:
        """Edge id → positions of its conjuncts whose static part the event satisfies."""
        return self._registry.probe(stream, attrs)  # type: ignore[return-value]

    def check_valid(self) -> None:
        """Assert the index's invariants."""
        self._registry.check_valid()
