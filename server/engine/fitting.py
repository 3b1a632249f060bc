"""The planner's own-condition index: which planned subscriptions an event may start or extend.

A lazy plan's buffers keep the events that pass a component's *own* conditions (those
naming no other component, :class:`~cesar.automata.pattern.judging.Fits`), and a watched
subscription counts them for its rates.  Tested one subscription at a time, every event
costs every subscription reading its stream a predicate test per component.  Here the own
conditions of every such subscription are one predicate index, as the DAG's FR index holds
its edges' (Cayuga §4.3, Fabret et al.'s clustering, :class:`~cesar.index.static.ConjunctIndex`):
each (signature, stream) registers the DNF of its components' own condition, each
conjunct by its static atoms ``attribute op constant``.  Components that take the same
events (equal :meth:`Fits.signature`, whatever their pattern) are one entry: a probe per
event gives the signatures it fits, each once; only a conjunct with more than static atoms
is judged in full (:meth:`Fits.fits`, by one reader).  A signature that takes every event
of its stream (its own condition is TRUE) is kept in a list per stream beside the index.

A signature lists its readers, and apart those that need *every* event it fits (``always``:
a subscription whose rates are measured, a lazy run's first component).  The others are
reached only through what waits for the event (the lazy runs' partial matches, by the
buffer pool), so an event costs the readers it concerns, not all of them.

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
>>> fits = Fits(pattern, Judge(pattern, Faults(), DEFAULT_FUNCTIONS))
>>> index.add("q", fits, always={0})
>>> hits = index.probe(Event.of("S", 1, 1, {"Name": "IBM", "Price": 2.0}))
>>> [fits.signature(n) in hits for n in (0, 1)]
[True, True]
>>> [list(index.always[fits.signature(n)]) for n in (0, 1)]
[[('q', 0)], []]
>>> index.probe(Event.of("S", 2, 2, {"Name": "HP", "Price": 2.0})) == [fits.signature(1)]
True
"""

from __future__ import annotations

from collections.abc import Collection, Hashable

from cesar.automata.normal import DnfLimitError, dnf
from cesar.automata.pattern.ast import Index
from cesar.automata.pattern.judging import Fits
from cesar.automata.schema import Event
from cesar.automata.terms import Attr, Cmp, Const, Or, Pred
from cesar.index.ranges import Atom
from cesar.index.static import Atoms, ConjunctIndex

Key = tuple[Hashable, str]
"""A registered signature: (component signature, the stream of it registered)."""

Reader = tuple[str, int]
"""A component of a registered subscription: (subscription, component)."""

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
    """Own conditions of many planned subscriptions by signature; a probe gives the
    signatures an event fits.  Methods: :meth:`add`, :meth:`remove`, :meth:`probe`,
    :meth:`check_valid`; a probe costs :class:`ConjunctIndex`'s, plus a full judgement
    per hit whose conjunct is not all static: the number of subscriptions sharing a
    signature does not count."""

    def __init__(self) -> None:
        self.index: ConjunctIndex[Key] = ConjunctIndex()
        self.whole: dict[Key, tuple[bool, ...]] = {}
        """Per key in the index, per conjunct: its static atoms are all of it."""
        self.free: dict[str, dict[Hashable, None]] = {}
        """Per stream, the signatures taking every event of it."""
        self.readers: dict[Hashable, dict[Reader, None]] = {}
        """Per signature, the components registered with it."""
        self.always: dict[Hashable, dict[Reader, None]] = {}
        """Per signature, the readers that need every event it fits."""
        self.fits: dict[str, Fits] = {}
        self.needs: dict[str, frozenset[int]] = {}
        """Per subscription, its components that need every event they fit."""

    def __contains__(self, subscription: str) -> bool:
        return subscription in self.fits

    def __len__(self) -> int:
        """The number of subscriptions registered."""
        return len(self.fits)

    def add(self, subscription: str, fits: Fits, always: Collection[int] = ()) -> None:
        """Register ``subscription``'s components by their own conditions (``fits``); those in
        ``always`` need every event they fit.  O(components × conjuncts × log n) for a new
        signature, O(components) for one registered already."""
        assert subscription not in self.fits, f"{subscription} registered twice"
        self.fits[subscription] = fits
        self.needs[subscription] = frozenset(always)
        for n, step in enumerate(fits.pattern.steps):
            signature = fits.signature(n)
            readers = self.readers.get(signature)
            if readers is None:
                readers = self.readers[signature] = {}
                self.always[signature] = {}
                for stream in step.types:
                    self._index(signature, stream, fits, n)
            readers[(subscription, n)] = None
            if n in always:
                self.always[signature][(subscription, n)] = None

    def _index(self, signature: Hashable, stream: str, fits: Fits, n: int) -> None:
        conjuncts, whole = own_conjuncts(fits, n, stream)
        if conjuncts == ((),) and whole == (True,):
            self.free.setdefault(stream, {})[signature] = None
            return
        self.index.add((signature, stream), stream, conjuncts)
        self.whole[(signature, stream)] = whole

    def remove(self, subscription: str) -> None:
        """Unregister ``subscription``; KeyError if it is not registered."""
        fits = self.fits.pop(subscription)
        del self.needs[subscription]
        for n, step in enumerate(fits.pattern.steps):
            signature = fits.signature(n)
            readers = self.readers[signature]
            del readers[(subscription, n)]
            self.always[signature].pop((subscription, n), None)
            if readers:
                continue
            del self.readers[signature], self.always[signature]
            for stream in step.types:
                key = (signature, stream)
                if key in self.whole:
                    self.index.remove(key)
                    del self.whole[key]
                    continue
                free = self.free[stream]
                del free[signature]
                if not free:
                    del self.free[stream]

    def reads(self, stream: str) -> bool:
        """True if some registered component takes events of ``stream``."""
        return stream in self.free or self.index.reads(stream)

    def probe(self, event: Event) -> list[Hashable]:
        """The signatures ``event`` fits, each once."""
        out = list(self.free.get(event.stream, ()))
        for key, positions in self.index.probe(event.stream, event.attrs()).items():
            signature = key[0]
            if any(self.whole[key][p] for p in positions) or self._judged(signature, event):
                out.append(signature)
        return out

    def _judged(self, signature: Hashable, event: Event) -> bool:
        """Whether ``event`` fits ``signature``, judged in full by one of its readers."""
        name, n = next(iter(self.readers[signature]))
        return self.fits[name].fits(n, event)

    def check_valid(self) -> None:
        """Assert that every registered subscription's components are indexed by signature as
        their own conditions say, and nothing else is."""
        self.index.check_valid()
        readers: dict[Hashable, dict[Reader, None]] = {}
        keys: set[Key] = set()
        for name, fits in self.fits.items():
            for n, step in enumerate(fits.pattern.steps):
                readers.setdefault(fits.signature(n), {})[(name, n)] = None
                keys.update((fits.signature(n), stream) for stream in step.types)
        assert {s: set(r) for s, r in readers.items()} == {
            s: set(r) for s, r in self.readers.items()
        }
        always = {
            signature: {(name, n) for name, n in mine if n in self.needs[name]}
            for signature, mine in readers.items()
        }
        assert always == {s: set(r) for s, r in self.always.items()}
        free = {(s, stream) for stream, signatures in self.free.items() for s in signatures}
        assert set(self.whole) | free == keys and not set(self.whole) & free
        assert all(self.free.values())
        for key in keys:
            signature, stream = key
            name, n = next(iter(self.readers[signature]))
            conjuncts, whole = own_conjuncts(self.fits[name], n, stream)
            assert (key in free) == (conjuncts == ((),) and whole == (True,)), key
            assert key in free or (key in self.index and whole == self.whole[key]), key
