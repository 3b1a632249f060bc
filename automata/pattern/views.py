"""Views: what each reference of a pattern reads on an edge, as a term (SASE+ §3's bindings).

A run's binding holds, per reference key, the term its instance keeps (``$1.a.x``,
``$1.a[a.LEN].x``, ``$1.sum(a[].x)``); on an edge the event being matched stands for
its own variable's references.  A :class:`Views` works out once per pattern, per
event variable and per ``a[i]`` role, which binding key (or the event) each
reference reads, so each edge's view is a few dictionary look-ups.

>>> from cesar.automata.schema import AttrType
>>> price = Ref("a", Index.ONLY, "Price")
>>> views = Views({price.key: price})
>>> views.of({}, "a")
{'a.Price': Attr(scope=<Scope.EVENT: ''>, name='Price')}
>>> views.of({"a.Price": (Attr(Scope.LEFT, "a.Price"), AttrType.FLOAT)})
{'a.Price': Attr(scope=<Scope.LEFT: '$1'>, name='a.Price')}
"""

from __future__ import annotations

from collections.abc import Mapping

from cesar.automata.pattern.ast import Index, Ref, ref_key
from cesar.automata.pattern.drafts import Binding
from cesar.automata.terms import Arith, Attr, Scope, Term

View = dict[str, Term]
"""What each reference key reads on an edge: a term over the binding ($1) and the event."""

DIVISOR = "DIVISOR"
"""A closure's count of events having an attribute, at least 1: what avg divides by."""

_EVENT, _GET, _SUM, _AVG = range(4)

Reading = tuple[int, Term | str | None, str | None, str | None]
"""How one reference reads: the event's attribute (``_EVENT``, the term), a binding key with
a fallback key (``_GET``), a sum (``_SUM``: its key and the length's) or an average (``_AVG``:
the sum's, the divisor's and the length's keys)."""


def counted(var: str, attr: str) -> Ref:
    """The binding reference counting ``var``'s events that have ``attr`` (``count(a[].x)``)."""
    return Ref(var, Index.ALL, attr, "COUNT")


def divisor(var: str, attr: str) -> Ref:
    """The binding reference holding :func:`counted`'s count, at least 1."""
    return Ref(var, Index.ALL, attr, DIVISOR)


def reading(ref: Ref, event_var: str | None, taking: bool) -> Reading | None:
    """How ``ref`` reads on an edge taking ``event_var``'s event (its ``a[i]`` when
    ``taking``); None where it reads nothing (``a[i]`` of another variable)."""
    attr, index, var = ref.attr, ref.index, ref.var
    if var == event_var and (
        index in (Index.ONLY, Index.CURRENT) or (index is Index.FIRST and not taking)
    ):
        assert attr is not None
        return (_EVENT, Attr(Scope.EVENT, attr), None, None)
    if ref.aggregate == "COUNT":
        assert attr is not None
        return (_GET, counted(var, attr).key, ref_key(var, Index.LEN, None), None)
    if index is Index.LEN:
        return (_GET, ref_key(var, Index.LEN, None), None, None)
    if index in (Index.ONLY, Index.FIRST):
        return (_GET, ref_key(var, index, attr), None, None)
    if index in (Index.LAST, Index.PREVIOUS):
        return (_GET, ref_key(var, Index.LAST, attr), None, None)
    if ref.aggregate in ("MIN", "MAX"):
        return (_GET, ref_key(var, Index.ALL, attr, ref.aggregate), None, None)
    if index is Index.CURRENT:
        return None
    total, length = ref_key(var, Index.ALL, attr, "SUM"), ref_key(var, Index.LEN, None)
    if ref.aggregate == "SUM":
        return (_SUM, total, length, None)
    assert attr is not None
    return (_AVG, total, divisor(var, attr).key, length)


def read(how: Reading, state: Mapping[str, Term]) -> Term | None:
    """The term ``how`` reads from a binding's ``state`` (key → term), or None."""
    kind, first, second, third = how
    if kind == _EVENT:
        assert not isinstance(first, str)
        return first
    assert isinstance(first, str)
    if kind == _GET:
        fallback = None if second is None else state.get(second)
        return state.get(first, fallback)
    total = state.get(first)
    if kind == _SUM:
        assert second is not None
        return total if total is not None and second in state else None
    assert second is not None and third is not None
    length = state.get(third)
    if total is None or length is None:
        return None
    return Arith("/", total, state.get(second, length))


class Views:
    """The views of one pattern's references (``refs``: key → reference)."""

    def __init__(self, refs: Mapping[str, Ref]) -> None:
        self.refs = refs
        self._readings: dict[tuple[str | None, bool], list[tuple[str, Reading]]] = {}

    def readings(self, event_var: str | None, taking: bool) -> list[tuple[str, Reading]]:
        """Each reference key with how it reads taking ``event_var``'s event; worked out once.

        O(references) the first time, O(1) after.
        """
        known = self._readings.get((event_var, taking))
        if known is None:
            known = self._readings[(event_var, taking)] = [
                (key, how)
                for key, ref in self.refs.items()
                if (how := reading(ref, event_var, taking)) is not None
            ]
        return known

    def of(self, binding: Binding, event_var: str | None = None, taking: bool = False) -> View:
        """Every reference key as a term over an instance holding ``binding`` and the event.

        The event is ``event_var``'s: its ``a[i]`` when ``taking`` (then
        ``a[i-1]`` and ``a[..i-1]`` read the binding), else the one that begins it.
        What the binding holds beyond the references (streams, counts) is in the view too.
        """
        state = {key: term for key, (term, _) in binding.items()}
        out: View = {}
        for key, how in self.readings(event_var, taking):
            term = read(how, state)
            if term is not None:
                out[key] = term
        for key, term in state.items():
            out.setdefault(key, term)
        return out
