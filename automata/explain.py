"""The debug dump of a compiled query: output, algebra, automata and placement.

``cesar explain`` prints :func:`explain` and the server's Explain RPC returns
it, so both show the same text.
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.algebra import format_algebra
from cesar.automata.automaton import format_automaton
from cesar.automata.compiler import CompiledQuery
from cesar.automata.normal import const_of
from cesar.automata.partition import partition_keys, pinned_key
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
    keys = partition_keys(compiled.automata, streams)
    pins = {k: v for k in keys if (v := pinned_key(compiled.automata, k)) is not None}
    lines = [
        f"publishes: {compiled.output.spec()}",
        f"placement: {placement_line(keys, pins)}",
        "algebra:",
        format_algebra(compiled.algebra, 1),
        "automata ($1.x: the instance's binding; a bare name: the incoming event; "
        "DUR: instance and event together; DUR($2): the event alone):",
    ]
    lines.extend(format_automaton(automaton) for automaton in compiled.automata)
    return "\n".join(lines)
