"""The planner's own-condition index: which planned subscriptions an event may start or extend.

A lazy plan's buffers keep the events that pass a component's *own* conditions (those
naming no other component, :class:`~cesar.automata.pattern.judging.Fits`), and a watched
subscription counts them for its rates.  Tested one subscription at a time, every event
costs every subscription reading its stream a predicate test per component.  Here the own
conditions of every such subscription are one predicate index, as the DAG's FR index holds
its edges' (Cayuga §4.3, Fabret et al.'s clustering, :class:`~cesar.index.static.ConjunctIndex`):
each (subscription, component, stream) registers the DNF of its own condition, each
conjunct by its static atoms ``attribute op constant``.  One probe per event gives the
components it may be; only a conjunct with more than static atoms is judged in full
(:meth:`Fits.fits`).  So an event reaches the subscriptions whose components it may be,
whatever the number reading its stream.  A component that takes every event of its
stream (its own condition is TRUE) is kept in a list per stream beside the index.

>>> from cesar.automata.evaluate import Faults
>>> from cesar.automata.functions import DEFAULT_FUNCTIONS
>>> from cesar.automata.pattern.parser import parse_pattern
>>> from cesar.automata.pattern.reference import Judge
>>> from cesar.automata.pattern.resolve import resolve
>>> from cesar.automata.schema import Event, parse_stream_spec
>>> schemas = {"S": parse_stream_spec("S(Name:string,Price:float)")}
>>> text = "PATTERN SEQ(S a, S b) WHERE a.Name = 'IBM' AND b.Price > a.Price WITHIN 9 PUBLISH P"
>>> pattern = resolve(parse_pattern(text), schemas)
>>> index = FitIndex()
>>> index.add("q", Fits(pattern, Judge(pattern, Faults(), DEFAULT_FUNCTIONS)))
>>> index.probe(Event.of("S", 1, 1, {"Name": "IBM", "Price": 2.0}))
{'q': [0, 1]}
>>> index.probe(Event.of("S", 2, 2, {"Name": "HP", "Price": 2.0}))
{'q': [1]}
"""

from __future__ import annotations

from cesar.automata.normal import DnfLimitError, dnf
from cesar.automata.pattern.ast import Index
from cesar.automata.pattern.judging import Fits
from cesar.automata.schema import Event
from cesar.automata.terms import Attr, Cmp, Const, Or, Pred
from cesar.index.ranges import Atom
from cesar.index.static import Atoms, ConjunctIndex

Key = tuple[str, int, str]
"""A registered component: (subscription, component, the stream of it registered)."""

_READ = (Index.ONLY, Index.FIRST, Index.CURRENT)
"""The indices of the references an own condition reads: the event itself."""


def own_conjuncts(fits: Fits, n: int, stream: str) -> tuple[tuple[Atoms, ...], tuple[bool, ...]]:
    """Component ``n``'s own condition on events of ``stream`` as index conjuncts: each DNF
    conjunct's static atoms, and whether they are the whole conjunct (a hit is a fit).

    A component of several streams (ANY) may read an attribute its event lacks, which
    holds there (SASE): it registers TRUE and is judged in full.
    """
    pattern = fits.pattern
    step = pattern.steps[n]
    pred: Pred = fits.own[n]
    if step.kleene:
        pred = Or((pred, fits.take_own[n]))
    if len(step.types) > 1:
        return ((),), (False,)
    try:
        form = dnf(pred)
    except DnfLimitError:
        return ((),), (False,)
    conjuncts, whole = [], []
    for conjunct in form:
        atoms = []
        for atom in conjunct.atoms:
            static = _static(fits, atom)
            if static is not None:
                atoms.append(static)
        conjuncts.append(tuple(atoms))
        whole.append(len(atoms) == len(conjunct.atoms))
    return tuple(conjuncts), tuple(whole)


def _static(fits: Fits, atom: Cmp) -> Atom | None:
    """``atom`` as the index's ``(attribute, op, constant)`` if it tests the event's own
    attribute against a constant; else None."""
    if not isinstance(atom.left, Attr) or not isinstance(atom.right, Const):
        return None
    ref = fits.pattern.refs.get(atom.left.name)
    if ref is None or ref.attr is None or ref.aggregate is not None or ref.index not in _READ:
        return None
    return (ref.attr, atom.op, atom.right.value)


class FitIndex:
    """Own conditions of many planned subscriptions; a probe gives each the components an
    event may be.  Methods: :meth:`add`, :meth:`remove`, :meth:`probe`,
    :meth:`check_valid`; a probe costs :class:`ConjunctIndex`'s, plus a full judgement
    per hit whose conjunct is not all static."""

    def __init__(self) -> None:
        self.index: ConjunctIndex[Key] = ConjunctIndex()
        self.whole: dict[Key, tuple[bool, ...]] = {}
        """Per key in the index, per conjunct: its static atoms are all of it."""
        self.free: dict[str, dict[tuple[str, int], None]] = {}
        """Per stream, the (subscription, component) taking every event of it."""
        self.fits: dict[str, Fits] = {}

    def __contains__(self, subscription: str) -> bool:
        return subscription in self.fits

    def __len__(self) -> int:
        """The number of subscriptions registered."""
        return len(self.fits)

    def add(self, subscription: str, fits: Fits) -> None:
        """Register ``subscription``'s components by their own conditions (``fits``).
        O(components × conjuncts × log n)."""
        assert subscription not in self.fits, f"{subscription} registered twice"
        self.fits[subscription] = fits
        for n, step in enumerate(fits.pattern.steps):
            for stream in step.types:
                key = (subscription, n, stream)
                conjuncts, whole = own_conjuncts(fits, n, stream)
                if conjuncts == ((),) and whole == (True,):
                    self.free.setdefault(stream, {})[(subscription, n)] = None
                    continue
                self.index.add(key, stream, conjuncts)
                self.whole[key] = whole

    def remove(self, subscription: str) -> None:
        """Unregister ``subscription``; KeyError if it is not registered."""
        fits = self.fits.pop(subscription)
        for n, step in enumerate(fits.pattern.steps):
            for stream in step.types:
                key = (subscription, n, stream)
                if key in self.whole:
                    self.index.remove(key)
                    del self.whole[key]
                    continue
                free = self.free[stream]
                del free[(subscription, n)]
                if not free:
                    del self.free[stream]

    def reads(self, stream: str) -> bool:
        """True if some registered component takes events of ``stream``."""
        return stream in self.free or self.index.reads(stream)

    def probe(self, event: Event) -> dict[str, list[int]]:
        """Per subscription, the components ``event`` may be (in pattern order); a
        subscription it may be none of is left out."""
        out: dict[str, list[int]] = {}
        for subscription, n in self.free.get(event.stream, ()):
            out.setdefault(subscription, []).append(n)
        for key, positions in self.index.probe(event.stream, event.attrs()).items():
            subscription, n, _ = key
            whole = self.whole[key]
            if any(whole[p] for p in positions) or self.fits[subscription].fits(n, event):
                out.setdefault(subscription, []).append(n)
        for places in out.values():
            if len(places) > 1:
                places.sort()
        return out

    def check_valid(self) -> None:
        """Assert that every registered subscription's components are indexed as their own
        conditions say, and nothing else is."""
        self.index.check_valid()
        expected = {
            (name, n, stream)
            for name, fits in self.fits.items()
            for n, step in enumerate(fits.pattern.steps)
            for stream in step.types
        }
        free = {(name, n, stream) for stream, keys in self.free.items() for name, n in keys}
        assert set(self.whole) | free == expected and not set(self.whole) & free
        assert all(self.free.values())
        for key in expected:
            name, n, stream = key
            conjuncts, whole = own_conjuncts(self.fits[name], n, stream)
            assert (key in free) == (conjuncts == ((),) and whole == (True,)), key
            assert key in free or (key in self.index and whole == self.whole[key]), key
