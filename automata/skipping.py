"""After-match skip policies: which matches a pattern publishes when matches overlap.

Flink's ``AFTER MATCH SKIP`` (and MATCH_RECOGNIZE's) decides whether an event may
take part in more than one match.  A pattern that says nothing publishes every
match (SASE's default).  Under a policy, matches are taken **in order of their
start** — the arrival (``t1``) of their first event — per partition (the values
of the pattern's ``[attr]`` tests), and a match is published only if it starts
after the *bound* the last published match of its partition set:

=========================  ===============================================
policy                     the next published match starts
=========================  ===============================================
``SKIP PAST LAST ROW``     after this match's last event arrives
``SKIP TO NEXT ROW``       after this match's first event (one per start)
``SKIP TO FIRST v``        no earlier than ``v``'s first event
``SKIP TO LAST v``         no earlier than ``v``'s last event
=========================  ===============================================

Taking matches in order of their start is Flink's: it holds a complete match
back while a partial match that started earlier may still complete.  A match
is therefore published once no run that started before it can complete — when
its stream's clock has reached its start plus the window — which is why a
policy needs ``WITHIN``.  Ties are broken by the match's end, start and values,
so the published matches are one set, whatever the order of evaluation.

The compiled automaton publishes, beside the pattern's attributes, the hidden
ones :data:`START` and :data:`BOUND` (relative to the match's ``t0``) and one
:data:`KEY` attribute per partition attribute; a :class:`Skipper` keeps the
matches held and each partition's bound, and strips the hidden attributes.

>>> skipper = Skipper(Skip(SkipKind.PAST_LAST, window=10))
>>> def match(t0, t1):
...     return Event.of("M", t0, t1, {"@start": 0, "@bound": t1 - t0, "x": t0})
>>> for m in (match(1, 3), match(2, 4), match(4, 6)):
...     skipper.add(m)
>>> [(e.t0, e.t1, e.attrs()) for e in skipper.release(13)]
[(1, 3, {'x': 1})]
>>> [(e.t0, e.t1) for e in skipper.release(14)]
[(4, 6)]
"""

from __future__ import annotations

import enum
import heapq
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import Event, Value
from cesar.automata.terms import Pos

START: Final = "@start"
"""The hidden attribute holding a match's first event's arrival, relative to its ``t0``."""
BOUND: Final = "@bound"
"""The hidden attribute holding the bound the next match must start after, relative to ``t0``."""
KEY: Final = "@key."
"""The prefix of the hidden attributes holding a match's partition (``@key.Name``)."""


class SkipKind(enum.Enum):
    """Flink's four skip strategies (no policy: every match is published)."""

    PAST_LAST = "PAST LAST ROW"
    TO_NEXT = "TO NEXT ROW"
    TO_FIRST = "TO FIRST"
    TO_LAST = "TO LAST"

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class Skip:
    """``AFTER MATCH SKIP …``: the kind, the variable of ``TO FIRST`` and ``TO LAST``, and the
    pattern's window in ticks (set when the pattern is resolved).

    >>> str(Skip(SkipKind.TO_LAST, "b")), str(Skip(SkipKind.PAST_LAST))
    ('AFTER MATCH SKIP TO LAST b', 'AFTER MATCH SKIP PAST LAST ROW')
    """

    kind: SkipKind
    var: str | None = None
    window: int = 0
    pos: Pos = field(default=None, compare=False, hash=False, repr=False)  # inline for mypyc

    def __reduce__(self) -> tuple[type[Skip], tuple[object, ...]]:
        """Pickled as its constructor's call (a compiled frozen class refuses field writes)."""
        return Skip, (self.kind, self.var, self.window, self.pos)

    def __str__(self) -> str:
        tail = f" {self.var}" if self.var is not None else ""
        return f"AFTER MATCH SKIP {self.kind.value}{tail}"


def checked(
    skip: Skip, operator: str, window: int | None, steps: Sequence[tuple[str, bool]], where: Pos
) -> Skip:
    """``skip`` with the pattern's ``window`` set, checked against its ``operator`` and its
    positive ``steps`` as (variable, is a Kleene closure): a SEQ with WITHIN, and a variable
    that is a component other than the first event of every match.  Raises
    :class:`CelSemanticError` at the clause (or ``where``)."""
    pos = skip.pos or where
    if operator == "AND":
        raise CelSemanticError(
            f"{skip} applies to SEQ: an AND's components have no order to skip by", pos
        )
    if window is None:
        raise CelSemanticError(
            f"{skip} needs WITHIN: a match is published once no run that started before it "
            "can still complete, which without a window is never",
            pos,
        )
    if skip.var is not None:
        order = [var for var, _ in steps]
        if skip.var not in order:
            raise CelSemanticError(
                f"{skip}: {skip.var} is not a component that events match "
                f"(the components are {', '.join(order)})",
                pos,
            )
        if skip.var == order[0] and (skip.kind is SkipKind.TO_FIRST or not steps[0][1]):
            raise CelSemanticError(
                f"{skip} would skip to the first event of the match itself, so it would skip "
                "nothing (Flink raises an error there); write AFTER MATCH SKIP TO NEXT ROW",
                pos,
            )
    return replace(skip, window=window)


Key = tuple[Value, ...]
"""A partition: the values of the pattern's ``[attr]`` attributes (empty if it has none)."""


def bound_of(skip: Skip, start: int, end: int, events_of: Callable[[str], Sequence[Event]]) -> int:
    """The bound a published match sets (the next published one starts after it), given its
    first event's arrival ``start``, its last event's ``end`` and ``events_of(v)``, the events
    of its variable ``v``: the oracles' rule (the compiled automaton carries it as
    :data:`BOUND`)."""
    if skip.kind is SkipKind.PAST_LAST:
        return end
    if skip.kind is SkipKind.TO_NEXT:
        return start
    assert skip.var is not None
    chosen = events_of(skip.var)
    return (chosen[0] if skip.kind is SkipKind.TO_FIRST else chosen[-1]).t1 - 1


def select(matches: Sequence[tuple[int, int, tuple[Value | None, ...], Event]]) -> list[Event]:
    """The matches a policy publishes from a whole input, literally: each (start, bound,
    partition, event) taken in order of (start, end, ``t0``, values, bound) per partition,
    and kept if it starts after the bound the last kept one set.  The oracles' rule; a
    :class:`Skipper` applies it as the clock lets it.  O(matches × log matches).

    >>> def m(start, end, bound):
    ...     return start, bound, (), Event.of("M", start, end, {})
    >>> [(e.t0, e.t1) for e in select([m(2, 4, 4), m(1, 3, 3), m(4, 6, 6)])]
    [(1, 3), (4, 6)]
    """
    taken = sorted(
        (((start, e.t1, e.t0, repr(e.values), bound), key, e) for start, bound, key, e in matches),
        key=lambda item: item[0],
    )
    bounds: dict[tuple[Value | None, ...], int] = {}
    out = []
    for (start, *_, bound), key, event in taken:
        if key not in bounds or start > bounds[key]:
            bounds[key] = bound
            out.append(event)
    return out


Held = tuple[int, int, int, int, int, Key, str, tuple[tuple[str, Value], ...]]
"""A held match: (start, t1, t0, arrival, bound, key, stream, its values without the hidden
ones); they are taken in the order of the first four (the arrival is unique), the rest of the
order matches are taken in — their values and bound, then key, spelled — is settled among
equal (start, t1, t0) alone, when they are released (:meth:`Skipper.release`).  A match becomes an
:class:`Event` only if it is published (most held matches are not, under a policy)."""


def _spelled(item: Held) -> tuple[str, int, str, int]:
    """The order among held matches of equal (start, t1, t0): values, bound, key, arrival."""
    return repr(item[7]), item[4], repr(item[5]), item[3]


@dataclass
class Skipper:
    """One subscription's held matches and each partition's bound.

    Held matches are kept by start, one list per start (many matches share one: the
    partitions of a stream share its clock), and the starts in a heap.  :meth:`add` is O(1),
    O(log starts) for a new start; :meth:`release` sorts each start's list once.
    """

    skip: Skip
    held: dict[int, list[Held]] = field(default_factory=dict)
    """Per start, the matches held, in the order they came."""
    starts: list[int] = field(default_factory=list)
    """The keys of :attr:`held`, a heap."""
    arrivals: int = 0
    """How many matches were held, to order equal ones."""
    bounds: OrderedDict[Key, int] = field(default_factory=OrderedDict)
    """Per partition, the bound the next published match must start after, the oldest set
    first (a moot one lingers behind a later bound set earlier, at most about a window)."""

    def add(self, event: Event) -> None:
        """Hold ``event``, a match carrying the hidden attributes, until it may be judged."""
        self.add_values(event.stream, event.t0, event.t1, event.values)

    def add_values(
        self, stream: str, t0: int, t1: int, event_values: tuple[tuple[str, Value], ...]
    ) -> None:
        """:meth:`add` of the match of ``stream`` these fields make, without making it."""
        start = bound = 0
        key: list[Value] = []
        values = []
        for name, value in event_values:
            if name[0] != "@":
                values.append((name, value))
            elif name == START:
                assert isinstance(value, int)
                start = t0 + value
            elif name == BOUND:
                assert isinstance(value, int)
                bound = t0 + value
            else:
                assert name.startswith(KEY)
                key.append(value)
        self._hold(start, bound, tuple(key), stream, t0, t1, tuple(values))

    def _hold(
        self,
        start: int,
        bound: int,
        key: Key,
        stream: str,
        t0: int,
        t1: int,
        values: tuple[tuple[str, Value], ...],
    ) -> None:
        self.arrivals += 1
        held = (start, t1, t0, self.arrivals, bound, key, stream, values)
        bucket = self.held.get(start)
        if bucket is None:
            self.held[start] = [held]
            heapq.heappush(self.starts, start)
        else:
            bucket.append(held)

    def release(self, clock: float) -> list[Event]:
        """The held matches no earlier-starting match can now precede (their start plus the
        window reached by ``clock``, the last epoch processed; ``math.inf`` at the end of
        the input: no run can complete any more), those the policy keeps, in order; the
        partitions' bounds that can no longer matter are forgotten."""
        out: list[Event] = []
        held, starts, bounds = self.held, self.starts, self.bounds
        horizon = clock - self.skip.window
        due: list[Held] = []
        while starts and starts[0] <= horizon:
            bucket = held.pop(heapq.heappop(starts))
            bucket.sort()  # by (t1, t0, arrival): the arrival is unique
            due.extend(bucket)
        # Runs of matches equal in (start, t1, t0) (most of them, where many partitions share a
        # clock) are ordered by their spelling; a lone match is spelled not at all.
        ties = 0
        for n in range(1, len(due) + 1):
            if n < len(due) and due[n][:3] == due[ties][:3]:
                continue
            if n - ties > 1:
                due[ties:n] = sorted(due[ties:n], key=_spelled)
            ties = n
        for start, t1, t0, _, bound, key, stream, values in due:
            last = bounds.get(key)
            if last is None or start > last:
                bounds[key] = bound
                bounds.move_to_end(key)
                out.append(Event(stream, t0, t1, values))
        # A match yet to be judged starts after the horizon, so a bound at or below it is moot;
        # the oldest set go first (amortized O(1)).
        while bounds and next(iter(bounds.values())) <= horizon:
            bounds.popitem(last=False)
        return out

    def to_data(self) -> dict[str, Any]:
        """Plain data for a snapshot (:meth:`restore` reads it back)."""
        return {
            "held": [
                (h[0], h[4], h[5], (h[2], h[1], h[7]))
                for h in sorted(h for bucket in self.held.values() for h in bucket)
            ],
            "bounds": list(self.bounds.items()),
        }

    def restore(self, data: dict[str, Any], stream: str) -> None:
        """Take back what :meth:`to_data` saved, the matches of ``stream``."""
        self.held, self.starts, self.arrivals = {}, [], 0
        for start, bound, key, (t0, t1, values) in data["held"]:
            self._hold(start, bound, tuple(key), stream, t0, t1, tuple(map(tuple, values)))
        self.bounds = OrderedDict((tuple(key), bound) for key, bound in data["bounds"])

    def check_valid(self) -> None:
        """Assert the invariants: the starts are a heap of the held lists' keys, each list
        holds matches of its start in the order they came; no hidden value is kept."""
        starts = self.starts
        for n in range(1, len(starts)):
            assert starts[(n - 1) // 2] <= starts[n]
        assert sorted(starts) == sorted(self.held)
        for start, bucket in self.held.items():
            assert bucket and all(h[0] == start for h in bucket)
            assert [h[3] for h in bucket] == sorted(h[3] for h in bucket)
            assert all(not name.startswith("@") for h in bucket for name, _ in h[7])
