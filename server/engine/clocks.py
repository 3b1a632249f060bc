"""Clock groups: streams read together share event time, independent streams do not (Section 3.1).

The algebra orders *all* events by their end time ``t1``, and an evaluator
needs them in that order only where one query can compare them: among the
streams a subscription reads (and publishes).  A :class:`StreamGroups` joins
the streams of each subscription into one *clock group* — a union-find over
stream names — so that a server can keep event time per group: a mistaken
timestamp in one stream makes later events of its own group late, never those
of a stream no subscription reads with it.

Groups only merge: once streams were read together they keep one clock, so
that the groups at any point of a server's life depend only on what was
subscribed before it (a restart that replays the log rebuilds the same groups).

>>> groups = StreamGroups()
>>> groups.join(["A", "B"])
True
>>> groups.join(["C"])
False
>>> sorted(groups.members("A")), sorted(groups.members("C"))
(['A', 'B'], ['C'])
>>> groups.same("B", "A"), groups.same("A", "C")
(True, False)
"""

from __future__ import annotations

from collections.abc import Iterable


class StreamGroups:
    """Streams partitioned into clock groups that only merge; see the module docstring.

    Methods: :meth:`join`, :meth:`find`, :meth:`members`, :meth:`same`,
    :meth:`check_valid`.  A stream never joined is a group of its own.  Cost:
    :meth:`find` near O(1) (path halving, union by size); :meth:`join` O(size
    of the smaller groups) for the member sets.
    """

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}
        self._members: dict[str, frozenset[str]] = {}

    def find(self, stream: str) -> str:
        """The representative of ``stream``'s group (``stream`` itself when alone)."""
        parent = self._parent
        while (up := parent.get(stream, stream)) != stream:
            parent[stream] = grand = parent.get(up, up)
            stream = grand
        return stream

    def members(self, stream: str) -> frozenset[str]:
        """Every stream of ``stream``'s group, itself included.  O(1) after :meth:`find`."""
        root = self.find(stream)
        return self._members.get(root, frozenset((root,)))

    def same(self, a: str, b: str) -> bool:
        """Whether ``a`` and ``b`` share a clock."""
        return self.find(a) == self.find(b)

    def join(self, streams: Iterable[str]) -> bool:
        """Put ``streams`` into one group; True if two groups became one."""
        roots = sorted({self.find(s) for s in streams}, key=lambda r: (-len(self.members(r)), r))
        if len(roots) < 2:
            return False
        root = roots[0]
        merged = set(self.members(root))
        for other in roots[1:]:
            merged |= self.members(other)
            self._parent[other] = root
            self._members.pop(other, None)
        self._members[root] = frozenset(merged)
        return True

    def check_valid(self) -> None:
        """Assert: member sets partition the joined streams and agree with :meth:`find`."""
        seen: set[str] = set()
        for root, members in self._members.items():
            assert self.find(root) == root, f"{root} holds members but is not a root"
            assert root in members and len(members) > 1
            assert not seen & members, "groups overlap"
            seen |= members
            for stream in members:
                assert self.find(stream) == root
        assert set(self._parent) <= seen
