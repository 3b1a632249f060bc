"""The debug dump of a compiled query: output, algebra, automata and placement.

``cesar explain`` prints :func:`explain` and the server's Explain RPC returns
it, so both show the same text.
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.algebra import format_algebra
from cesar.automata.automaton import format_automaton
from cesar.automata.compiler import CompiledQuery
from cesar.automata.partition import partition_keys
from cesar.automata.schema import StreamSchema


def placement_line(keys: frozenset[str]) -> str:
    """How the query is placed: key-partitioned on which attributes, or global."""
    if not keys:
        return "global (runs on one shard, which sees the events its edges' static parts admit)"
    return "key-partitioned on " + " or ".join(sorted(keys)) + " (runs on every shard)"


def explain(compiled: CompiledQuery, streams: Mapping[str, StreamSchema]) -> str:
    """The text of ``cesar explain`` for ``compiled`` over ``streams``."""
    lines = [
        f"publishes: {compiled.output.spec()}",
        f"placement: {placement_line(partition_keys(compiled.automata, streams))}",
        "algebra:",
        format_algebra(compiled.algebra, 1),
        "automata ($1.x: the instance's binding; a bare name: the incoming event; "
        "DUR: instance and event together; DUR($2): the event alone):",
    ]
    lines.extend(format_automaton(automaton) for automaton in compiled.automata)
    return "\n".join(lines)
