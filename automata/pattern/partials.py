"""The data of a lazy run (lazy chain automata §3–4): its partial matches, the conditions
between its components, and its work counters (:mod:`cesar.automata.pattern.lazy`)."""

from __future__ import annotations

from dataclasses import dataclass

from cesar.automata.pattern.buffers import Key
from cesar.automata.pattern.judging import Test
from cesar.automata.schema import Event
from cesar.automata.terms import Pred


@dataclass
class LazyCounters:
    """Deterministic work counters of a lazy run."""

    partials: int = 0
    """Partial matches made (CHAIN and TREE), each once."""
    searched: int = 0
    """Buffered or waiting candidates looked at."""
    triggers: int = 0
    """Events that triggered a recomputation (RECOMPUTE)."""
    abandoned: int = 0
    """Recomputations stopped at the search budget (RECOMPUTE)."""
    matches: int = 0
    """Matches emitted."""


@dataclass(frozen=True, slots=True)
class Between:
    """A condition naming several components: their names, the predicate, what it reads
    (reference key, component, attribute) and its generated code if it may run as is."""

    names: frozenset[str]
    pred: Pred
    reads: list[tuple[str, int, str]]
    test: Test | None
    judged: list[int]
    """How many assignments it judged, and how many it let through: its selectivity."""


@dataclass(slots=True)
class Partial:
    """A partial match of a lazy plan: its event per component (None: unbound)."""

    bound: tuple[Event | None, ...]
    t0: int
    t1: int
    root: int
    key: Key
    waits: int = -1
