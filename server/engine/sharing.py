"""The sharing report: which subscriptions share each template edge, and what it indexes.

``cesar explain --queries Q`` subscribes a set of queries to an engine and
prints :func:`sharing_report`: per edge of the merged DAG (Section 4.2, with
templates, :mod:`cesar.server.engine.params`) its template, how many
subscriptions use it and which, how their constants are grouped (by the key
constants the static index hashes on) and how many distinct constants each
parameter holds, by the way it is decided (key, ordered, general).

>>> from cesar.automata.compiler import compile_query
>>> from cesar.automata.schema import parse_stream_spec
>>> from cesar.server.engine.engine import Engine
>>> S = {"S": parse_stream_spec("S(Name:string,Price:float)")}
>>> engine = Engine()
>>> for n, (name, c) in enumerate([("A", 1.0), ("A", 2.0), ("B", 2.0)]):
...     q = compile_query(f"FILTER{{Name = '{name}' AND Price > {c}}} S", S, f"q{n}")
...     engine.subscribe(q.name, q.automata)
>>> print(sharing_report(engine))
1 template edges for 3 subscriptions (3 automata); 2 DAG nodes
edge 0: start → n1  FORWARD on S  Name = ?0 AND Price > ?1
  3 subscriptions: q0, q1, q2
  2 groups; ?0 key: 2 distinct; ?1 ordered: 2 distinct
"""

from __future__ import annotations

from cesar.automata.terms import to_cel
from cesar.server.engine.dag import ROOT
from cesar.server.engine.engine import Engine

_SHOWN = 8
"""Subscriptions named per edge; the rest are counted."""


def sharing_report(engine: Engine) -> str:
    """The text of ``cesar explain --queries``; see the module docstring."""
    program = engine.program
    owners = program.owners()
    order = {subscription: n for n, subscription in enumerate(program.subscriptions)}
    shared = len(engine.commons.readers)
    also = f" and {shared} shared internal streams" if shared else ""
    lines = [
        f"{len(program.edges)} template edges for {len(engine.subscriptions)} subscriptions"
        f"{also} ({len(owners)} automata); {len(program.dag.nodes)} DAG nodes"
    ]
    for edge_id in sorted(program.edges):
        compiled = program.edges[edge_id]
        params = compiled.params
        source = "start" if compiled.source == ROOT else f"n{compiled.source}"
        lines.append(
            f"edge {edge_id}: {source} → n{compiled.target}  {compiled.edge.kind.name} "
            f"on {compiled.edge.stream}  {to_cel(compiled.edge.pred)}"
        )
        space = program.dag.nodes[compiled.target].space
        users = sorted({owners[space, slot] for slot in params.slots}, key=order.__getitem__)
        named = ", ".join(users[:_SHOWN])
        if len(users) > _SHOWN:
            named += f", … ({len(users) - _SHOWN} more)"
        lines.append(f"  {len(users)} subscriptions: {named}")
        kinds: dict[int, str] = {}
        for plan in params.plans:
            kinds.update({p: "key" for _, p in plan.keys})
            kinds.update({p: "ordered" for _, _, p in plan.ordered})
            kinds.update({p: "general" for p in plan.general_params})
        described = [f"{sum(len(g) for g in params.groups)} groups"]
        for index in sorted(kinds):
            distinct = {constants[index] for constants in params.slots.values()}
            described.append(f"?{index} {kinds[index]}: {len(distinct)} distinct")
        lines.append("  " + "; ".join(described))
    return "\n".join(lines)


def placed(engine: Engine, subscription: str) -> list[tuple[int, int, int, str, str, str, int]]:
    """The template edges ``subscription``'s automata use: ``(edge, source node, target
    node, kind, stream, template, sharers)``, by edge id; sharers counts the subscriptions
    using the edge, this one included.  O(edges + slots).

    >>> from cesar.automata.compiler import compile_query
    >>> from cesar.automata.schema import parse_stream_spec
    >>> S = {"S": parse_stream_spec("S(Price:float)")}
    >>> engine = Engine()
    >>> for n, c in enumerate([1.0, 2.0]):
    ...     q = compile_query(f"FILTER{{Price > {c}}} S", S, f"q{n}")
    ...     engine.subscribe(q.name, q.automata)
    >>> placed(engine, "q1")
    [(0, 0, 1, 'FORWARD', 'S', 'Price > ?0', 2)]
    """
    program = engine.program
    owners = program.owners()
    out = []
    for edge_id in sorted(program.edges):
        compiled = program.edges[edge_id]
        space = program.dag.nodes[compiled.target].space
        users = {owners[space, slot] for slot in compiled.params.slots}
        if subscription in users:
            edge = compiled.edge
            out.append(
                (
                    edge_id,
                    compiled.source,
                    compiled.target,
                    edge.kind.name,
                    edge.stream or "",
                    to_cel(edge.pred),
                    len(users),
                )
            )
    return out
