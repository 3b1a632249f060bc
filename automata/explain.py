"""The debug dump of a compiled query: output, algebra, automata and placement.

``cesar explain`` prints :func:`explain` and the server's Explain RPC returns
it, so both show the same text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cesar.automata.algebra import format_algebra
from cesar.automata.automaton import Automaton, format_automaton
from cesar.automata.compiler import CompiledQuery
from cesar.automata.normal import const_of
from cesar.automata.partition import partition_keys, pinned_key
from cesar.automata.pattern.nesting import show
from cesar.automata.pattern.plans import plan_line
from cesar.automata.pattern.resolve import format_resolved
from cesar.automata.schema import StreamSchema, Value
from cesar.automata.terms import to_cel


def placement_line(keys: frozenset[str], pins: Mapping[str, Value] | None = None) -> str:
    """How the query is placed: key-partitioned on which attributes, or global; ``pins``: the
    key value it is pinned to, per key.

    >>> placement_line(frozenset({"Name"}), {"Name": "IBM"})
    "key-partitioned on Name, pinned to Name = 'IBM' (runs on the shard owning 'IBM' alone)"
    """
    if not keys:
        return "global (runs on one shard, which sees the events its edges' static parts admit)"
    pins = pins or {}
    options = []
    for key in sorted(keys):
        if key in pins:
            value = to_cel(const_of(pins[key]))
            options.append(
                f"{key}, pinned to {key} = {value} (runs on the shard owning {value} alone)"
            )
        else:
            options.append(f"{key} (runs on every shard)")
    return "key-partitioned on " + " or ".join(options)


def explain(compiled: CompiledQuery, streams: Mapping[str, StreamSchema]) -> str:
    """The text of ``cesar explain`` for ``compiled`` over ``streams``."""
    keys, pins = _placement(compiled, streams)
    lines = [
        f"publishes: {compiled.output.spec()}",
        f"placement: {placement_line(keys, pins)}",
        *([f"plan: {_plan(compiled)}"] if compiled.algebra is None else []),
        *(["windows (shared with every subscription reading them):"] if compiled.windows else []),
        *(f"  {window.name} of {stream}" for stream, window in compiled.windows),
        *_source(compiled, 1),
        "automata ($1.x: the instance's binding; a bare name: the incoming event; "
        "DUR: instance and event together; DUR($2): the event alone):",
    ]
    lines.extend(format_automaton(automaton) for automaton in compiled.automata)
    return "\n".join(lines)


def _source(compiled: CompiledQuery, indent: int) -> list[str]:
    """The algebra of a CEL query, or the steps of a pattern, under a heading."""
    if compiled.algebra is not None:
        return ["algebra:", format_algebra(compiled.algebra, indent)]
    pad = "  " * indent
    return ["pattern:", *(pad + line for line in _pattern_text(compiled).splitlines())]


def _pattern_text(compiled: CompiledQuery) -> str:
    """The steps of a pattern; of each alternative for one with OR or nested groups."""
    nested = compiled.nested
    if nested is None or len(nested.alternatives) == 1:
        resolved = compiled.pattern or (nested.resolved[0] if nested is not None else None)
        assert resolved is not None, "a query without algebra is a pattern"
        return format_resolved(resolved)
    name = nested.output.name
    lines = [
        f"OR of {len(nested.alternatives)} alternatives, each an automaton publishing {name} "
        "(ALTERNATIVE() is its number):"
    ]
    for number, (alternative, resolved) in enumerate(
        zip(nested.alternatives, nested.resolved, strict=True), 1
    ):
        lines.append(f"alternative {number}: {show(alternative.group)}")
        lines.extend("  " + line for line in format_resolved(resolved).splitlines())
    return "\n".join(lines)


def _plan(compiled: CompiledQuery) -> str:
    if compiled.pattern is not None:
        return plan_line(compiled.pattern)
    return "eager (an OR of several alternatives, or a SEQ and an AND nested, has no other plan)"


def _placement(
    compiled: CompiledQuery, streams: Mapping[str, StreamSchema]
) -> tuple[frozenset[str], dict[str, Value]]:
    keys = partition_keys(compiled.automata, streams)
    return keys, {k: v for k in keys if (v := pinned_key(compiled.automata, k)) is not None}


def explain_data(compiled: CompiledQuery, streams: Mapping[str, StreamSchema]) -> dict[str, Any]:
    """What :func:`explain` shows, as JSON data (``cesar explain --json``).

    Predicates are CEL text; the static part θ1 and the dynamic part θ2 of each
    conjunct of an edge's DNF are apart.
    """
    keys, pins = _placement(compiled, streams)
    return {
        "publishes": compiled.output.spec(),
        "reads": sorted(compiled.reads),
        "windows": [{"stream": s, "window": w.name} for s, w in compiled.windows],
        "placement": {
            "key_attributes": sorted(keys),
            "pinned": pins,
            "text": placement_line(keys, pins),
        },
        **(
            {"algebra": format_algebra(compiled.algebra, 0)}
            if compiled.algebra is not None
            else {
                "pattern": _pattern_text(compiled),
                "plan": _plan(compiled),
            }
        ),
        "automata": [_automaton_data(automaton) for automaton in compiled.automata],
    }


def _automaton_data(automaton: Automaton) -> dict[str, Any]:
    return {
        "name": automaton.name,
        "internal": automaton.internal,
        "output": automaton.output.spec(),
        "final": automaton.final,
        "nodes": [
            {"id": node.id, "binds": {name: typ.value for name, typ in node.attributes}}
            for node in automaton.nodes
        ],
        "edges": [
            {
                "source": edge.source,
                "target": edge.target,
                "kind": edge.kind.value,
                "stream": edge.stream,
                "conjuncts": [
                    {"static": to_cel(part.static.pred()), "dynamic": to_cel(part.dynamic.pred())}
                    for part in edge.conjuncts
                ],
                "guards": [to_cel(guard) for guard in edge.guards],
                "map": [str(assign) for assign in edge.map],
            }
            for edge in automaton.edges
        ],
    }
