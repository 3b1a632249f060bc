"""Each subscription's constants beside a shared template edge, and the slot masks they give.

An edge of the merged DAG is a template (:mod:`cesar.automata.template`):
every subscription using it — a *slot*, one per automaton — keeps its own
constants for the template's parameters.  An instance stands for a set of
slots (a bitmask), and an edge *partitions* that set: for an event, the slots
whose constants make the edge's predicate hold move on, the others stay.
:class:`EdgeParams` decides that set through indices over the constants,
never slot by slot.  Each atom of a template conjunct is one of

* *fixed*: no parameter — generated code, evaluated once per instance;
* *key*: ``attribute = ?i`` on the incoming event — the slots are grouped by
  these constants (a :class:`Group` per distinct tuple), and the engine's
  static index finds the group whose values equal the event's, as Section
  4.3's FR and AN indices find static conjuncts;
* *ordered*: ``term op ?i`` with a parameter-free term (a static range, ``DUR
  <= ?i``, ``$1.x < ?i``) — the term is evaluated once and a
  :class:`~cesar.index.masks.ValueMasks` per group gives the slots it holds for
  (a group of a few slots compares their constants directly: most groups of
  a varied workload hold one or two, and value masks would cost far more
  memory than they save time);
* *general*: a parameter inside arithmetic (``After < ?0 * Before``) — the
  group's slots are kept by their tuple of such constants, and each distinct
  tuple is evaluated once.

A conjunct's slots are the group's, narrowed by each ordered and general atom;
an edge holds for the union over its conjuncts.  Cost of :meth:`EdgeParams.holds`
per conjunct: one fixed test, then per ordered atom one term evaluation and one
:meth:`~cesar.index.masks.ValueMasks.satisfying`, per general atom the distinct
constant tuples of the group still in the set.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from sortedcontainers import SortedList

from cesar.automata.arithmetic import ArithmeticFault
from cesar.automata.automaton import Edge
from cesar.automata.evaluate import Faults
from cesar.automata.schema import Value
from cesar.automata.template import Constants
from cesar.automata.terms import Attr, Call, Cmp, Const, Param, Scope, Term, subterms
from cesar.index.masks import ValueMasks, compact, expand, slots_of, without
from cesar.index.ranges import FLIPPED, RANGE_OPS, compare, is_nan
from cesar.index.static import Atoms
from cesar.server.engine.codegen import (
    Binding,
    Codegen,
    GeneralTest,
    Test,
    ThresholdOf,
    ValueOf,
)


def has_param(term: Term) -> bool:
    """True if a parameter occurs in ``term``."""
    return isinstance(term, Param) or any(has_param(part) for part in subterms(term))


SMALL: Final = 8
"""By default, a group of at most this many slots compares their constants one by one."""


@dataclass(slots=True)
class Tuple:
    """The slots of a group sharing one tuple of general-atom constants, and one's constants."""

    constants: Constants
    entry: int = 0
    """Its slots as a :func:`~cesar.index.masks.compact` entry; :attr:`mask` expands them."""

    @property
    def mask(self) -> int:
        """Its slots."""
        return expand(self.entry)


@dataclass(eq=False, slots=True)
class Group:
    """The slots of one conjunct of one edge whose key constants are ``key``.

    ``mask`` holds its slots (their constants are the edge's).  ``ordered`` holds one
    :class:`ValueMasks` per ordered atom of the conjunct once the group has
    more than its edge's ``small`` slots (None before: most groups of a varied
    workload hold one or two slots, and comparing those directly costs less
    time and far less memory).  ``general`` (None for a conjunct without
    general atoms) maps the tuple of a slot's constants in general atoms to
    the slots with that tuple and a representative's full constants.
    Identity is the group's: the engine's static index keys on it.
    """

    @property
    def edge(self) -> int:
        """The id of the group's edge."""
        return self.params.edge_id

    params: EdgeParams
    conjunct: int
    key: tuple[Value, ...]
    matchable: bool
    """False if a key constant is NaN: no event equals it (a dict finds an identical NaN)."""
    ordered: tuple[ValueMasks, ...] | None = None
    entry: int = 0
    """Its slots as a :func:`~cesar.index.masks.compact` entry (a group of one slot keeps
    the slot's number: a mask is as wide as its highest slot); :attr:`mask` expands them."""
    general: dict[Constants, Tuple] | None = None

    @property
    def mask(self) -> int:
        """Its slots.  O(width of the mask)."""
        return expand(self.entry)


@dataclass(frozen=True)
class ConjunctPlan:
    """How one template conjunct is decided: its atoms by kind, as code."""

    keys: tuple[tuple[str, int], ...]
    """``(attribute, parameter)`` of each key atom, in order."""
    fixed: Test | None
    ordered: tuple[tuple[ValueOf, str, int], ...]
    """``(term, op, parameter)`` of each ordered atom: ``term op constant``."""
    general: GeneralTest | None
    general_params: tuple[int, ...]
    ranges: tuple[tuple[str, str, int], ...]
    """``(attribute, op, k)`` of each ordered atom ``attribute op ?`` on the incoming event."""
    threshold: tuple[str, str, ThresholdOf] | None = None
    """``(attribute, op, side)`` of a general atom ``attribute op side`` on the incoming event
    whose ``side`` reads only the instance's binding and the constants (``Price > ?0 *
    $1.Price``): for a live instance and one tuple of constants, a fixed threshold."""

    def key_of(self, constants: Constants) -> tuple[Value, ...]:
        """A slot's key constants (those of the key atoms, in order): its group's key."""
        return tuple(constants[p] for _, p in self.keys)

    def general_key_of(self, constants: Constants) -> Constants:
        """A slot's constants in general atoms: the key of its :class:`Tuple` in its group."""
        return tuple(constants[p] for p in self.general_params)


def plan_conjunct(
    static: tuple[Cmp, ...], dynamic: tuple[Cmp, ...], codegen: Codegen
) -> ConjunctPlan:
    """Sort a template conjunct's atoms into key, fixed, ordered and general ones."""
    keys: list[tuple[str, int]] = []
    fixed: list[Cmp] = []
    ordered: list[tuple[ValueOf, str, int]] = []
    ranges: list[tuple[str, str, int]] = []
    general: list[Cmp] = []
    for atom in static + dynamic:
        left, right = atom.left, atom.right
        if not has_param(left) and not has_param(right):
            fixed.append(atom)
        elif isinstance(right, Param) and not has_param(left):
            if atom.op == "=" and isinstance(left, Attr) and left.scope is Scope.EVENT:
                keys.append((left.name, right.index))
            else:
                if isinstance(left, Attr) and left.scope is Scope.EVENT and atom.op != "!=":
                    ranges.append((left.name, atom.op, len(ordered)))
                ordered.append((codegen.value(left), atom.op, right.index))
        else:
            general.append(atom)
    found = _threshold_atom(general, codegen)
    if found is None:
        # A parameter-free ordering of an event attribute against the binding
        # (``$2.Price > $1.Price``) is general too: its instances can wait by threshold.
        found = _threshold_atom(fixed, codegen, binding_only=True)
        if found is not None:
            fixed.remove(found[1])
            general.append(found[1])
    params = sorted({p for atom in general for p in _params(atom.left) + _params(atom.right)})
    return ConjunctPlan(
        tuple(keys),
        codegen.conjunct(tuple(fixed)) if fixed else None,
        tuple(ordered),
        codegen.general(tuple(general)) if general else None,
        tuple(params),
        tuple(ranges),
        None if found is None else found[0],
    )


def _threshold_atom(
    atoms: list[Cmp], codegen: Codegen, binding_only: bool = False
) -> tuple[tuple[str, str, ThresholdOf], Cmp] | None:
    """The first atom ``attribute op side`` whose side reads no event and no DUR (and, if
    ``binding_only``, reads the binding), as ``(attribute, op, side)``, and the atom."""
    for atom in atoms:
        if atom.op not in RANGE_OPS:
            continue
        for event, side, op in ((atom.left, atom.right, atom.op), (atom.right, atom.left, None)):
            if (
                isinstance(event, Attr)
                and event.scope is Scope.EVENT
                and _bound_only(side)
                and (not binding_only or _reads_binding(side))
            ):
                return (event.name, op or FLIPPED[atom.op], codegen.threshold(side)), atom
    return None


def _reads_binding(term: Term) -> bool:
    """True if ``term`` reads an attribute of the instance's binding."""
    return any(_bound_attr(leaf) for leaf in _leaves(term))


def _bound_only(term: Term) -> bool:
    """True if ``term`` reads only the instance's binding, constants and parameters."""
    return all(_bound_attr(leaf) or isinstance(leaf, (Param, Const)) for leaf in _leaves(term))


def _bound_attr(leaf: Term) -> bool:
    return isinstance(leaf, Attr) and leaf.scope is not Scope.EVENT


def _leaves(term: Term) -> Iterator[Term]:
    """The leaves of ``term``: through arithmetic, negation and function arguments."""
    if isinstance(term, Call) or subterms(term):
        for part in subterms(term):
            yield from _leaves(part)
    else:
        yield term


def _params(term: Term) -> tuple[int, ...]:
    return tuple(leaf.index for leaf in _leaves(term) if isinstance(leaf, Param))


class EdgeParams:
    """The slots of one template edge, their constants and groups; see the module docstring.

    Methods: :meth:`add` and :meth:`remove` a slot (each says which group
    appeared or went, for the static index), :meth:`holds` (the slots an event
    satisfies the edge for), :meth:`dur_bound`, :meth:`check_valid`.
    """

    def __init__(
        self, edge_id: int, edge: Edge, codegen: Codegen, faults: Faults, small: int = SMALL
    ) -> None:
        self.edge_id = edge_id
        self.small = small
        self.plans = tuple(
            plan_conjunct(c.static.atoms, c.dynamic.atoms, codegen) for c in edge.conjuncts
        )
        self.guards = codegen.guards(edge.guards) if edge.guards else None
        """Whether the edge's guard terms evaluate without a fault (None: it has none)."""
        self.faults = faults
        self.slots: dict[int, Constants] = {}
        self.all = 0
        self.groups: list[dict[tuple[Value, ...], Group]] = [{} for _ in self.plans]
        self._bounds: SortedList = SortedList()
        self._bound_of: dict[int, float] = {}
        self._lowest = self._highest = -math.inf
        """The least and the largest of ``_bounds`` (-inf: no slot), read per instance filed."""

    def add(self, slot: int, constants: Constants, dur_bound: float) -> list[Group]:
        """Give ``slot`` its constants; returns its groups (one per conjunct).  O(atoms × log n)."""
        assert slot not in self.slots, f"slot {slot} added twice"
        self.slots[slot] = constants
        bit = 1 << slot
        self.all |= bit
        self._bounds.add(dur_bound)
        self._bound_of[slot] = dur_bound
        self._extremes()
        mine = []
        for position, plan in enumerate(self.plans):
            key = plan.key_of(constants)
            group = self.groups[position].get(key)
            if group is None:
                group = Group(self, position, key, all(value == value for value in key))
                self.groups[position][key] = group
            mine.append(group)
            group.entry = compact(group.mask | bit)
            if group.ordered is not None:
                for masks, (_, _, param) in zip(group.ordered, plan.ordered, strict=True):
                    masks.add(slot, constants[param])
            elif plan.ordered and group.mask.bit_count() > self.small:
                group.ordered = tuple(ValueMasks() for _ in plan.ordered)
                for member in slots_of(group.mask):
                    known = self.slots[member]
                    for masks, (_, _, param) in zip(group.ordered, plan.ordered, strict=True):
                        masks.add(member, known[param])
            if plan.general is not None:
                general_key = plan.general_key_of(constants)
                if group.general is None:
                    group.general = {}
                entry = group.general.setdefault(general_key, Tuple(constants))
                entry.entry = compact(entry.mask | bit)
        return mine

    def remove(self, slot: int) -> list[Group]:
        """Forget ``slot``; returns its groups (an empty one, mask 0, is gone from the edge)."""
        constants = self.slots.pop(slot)
        bit = 1 << slot
        self.all = without(self.all, bit)
        self._bounds.remove(self._bound_of.pop(slot))
        self._extremes()
        mine = []
        for position, plan in enumerate(self.plans):
            key = plan.key_of(constants)
            group = self.groups[position][key]
            mine.append(group)
            group.entry = compact(without(group.mask, bit))
            for masks in group.ordered or ():
                masks.remove(slot)
            if plan.general is not None:
                general_key = plan.general_key_of(constants)
                assert group.general is not None
                entry = group.general[general_key]
                entry.entry = compact(without(entry.mask, bit))
                if not entry.entry:
                    del group.general[general_key]
            if not group.entry:
                del self.groups[position][key]
        return mine

    def statics(self, group: Group) -> Atoms:
        """What the static index keys ``group`` on: its key atoms and its loosest ranges.

        An event that fails one of these atoms fails the conjunct for every
        slot of the group; one that passes them may hold for some.  A range
        whose constants are all NaN holds for no slot (NaN atoms never hold).
        """
        plan = self.plans[group.conjunct]
        atoms = [(name, "=", value) for (name, _), value in zip(plan.keys, group.key, strict=True)]
        for name, op, k in plan.ranges:
            if group.ordered is not None:
                bound = group.ordered[k].loosest(op)
            else:
                param = plan.ordered[k][2]
                values = (self.slots[s][param] for s in slots_of(group.mask))
                ordered = [value for value in values if not is_nan(value)]
                pick = min if op in (">", ">=") else max
                bound = pick(ordered) if ordered else None
            atoms.append((name, op, math.nan if bound is None else bound))
        return tuple(atoms)

    def _extremes(self) -> None:
        bounds = self._bounds
        self._lowest, self._highest = (bounds[0], bounds[-1]) if bounds else (-math.inf, -math.inf)

    def dur_bound(self) -> float:
        """The largest DUR any slot's edge can still fire with (inf: unbounded; -inf: no
        slot).  O(1)."""
        return self._highest

    def alike(self) -> bool:
        """True if every slot's edge fires up to one DUR (and there is a slot).  O(1)."""
        return self._lowest == self._highest != -math.inf

    def all_groups(self) -> Iterable[Group]:
        """Every group of every conjunct."""
        for groups in self.groups:
            yield from groups.values()

    def groups_meeting(self, members: int, conjunct: int) -> list[Group]:
        """The groups of ``conjunct`` holding some slot of ``members``.

        O(min(slots of ``members``, groups of the conjunct)): by each slot's
        key constants, or by testing each group's mask.
        """
        plan, groups = self.plans[conjunct], self.groups[conjunct]
        if members.bit_count() >= len(groups):
            return [group for group in groups.values() if group.mask & members]
        found: dict[int, Group] = {}
        for slot in slots_of(members):
            group = groups[plan.key_of(self.slots[slot])]
            found[id(group)] = group
        return list(found.values())

    def holds(
        self,
        groups: Iterable[Group],
        members: int,
        binding: Binding,
        attrs: Binding,
        dur: int,
        own: int,
    ) -> int:
        """The slots of ``members`` for which the edge holds, given the groups the event hit.

        ``groups`` are those whose key constants equal the event's (at most one
        per conjunct).  The guards are checked once if any slot holds.
        """
        union = 0
        for group in groups:
            union |= self._conjunct(group, without(members, union), binding, attrs, dur, own)
        return self._guarded(union, binding, attrs, dur, own)

    def holds_one(
        self,
        group: Group,
        members: int,
        binding: Binding,
        attrs: Binding,
        dur: int,
        own: int,
    ) -> int:
        """:meth:`holds` for one group (what an AI probe verifies, once per candidate)."""
        slots = self._conjunct(group, members, binding, attrs, dur, own)
        return self._guarded(slots, binding, attrs, dur, own)

    def _guarded(self, slots: int, binding: Binding, attrs: Binding, dur: int, own: int) -> int:
        """``slots``, or 0 if some are given and a guard term faults."""
        guards = self.guards
        if slots and guards is not None and not guards(binding, attrs, dur, own):
            return 0
        return slots

    def _conjunct(
        self,
        group: Group,
        members: int,
        binding: Binding,
        attrs: Binding,
        dur: int,
        own: int,
    ) -> int:
        """The slots of ``members`` in ``group`` whose conjunct holds, the guards aside."""
        own_slots = group.entry  # expanded here: this is the engine's hottest loop
        slots = members & (own_slots if own_slots >= 0 else 1 << ~own_slots)
        if not slots:
            return 0
        plan = self.plans[group.conjunct]
        if plan.fixed is not None and not plan.fixed(binding, attrs, dur, own):
            return 0
        if plan.ordered:
            slots = self._ordered(group, plan, slots, binding, attrs, dur, own)
        if slots and plan.general is not None:
            kept = 0
            assert group.general is not None
            for entry in group.general.values():
                if entry.mask & slots and plan.general(binding, attrs, dur, own, entry.constants):
                    kept |= entry.mask
            slots &= kept
        return slots

    def holds_tuple(
        self,
        group: Group,
        entry: Tuple,
        members: int,
        binding: Binding,
        attrs: Binding,
        dur: int,
        own: int,
    ) -> int:
        """As :meth:`holds` for one group, of the slots of ``members`` sharing one tuple ``entry``.

        What an AI probe by threshold verifies: the tuple's general atoms are
        evaluated once, not those of every tuple of the group.
        """
        plan = self.plans[group.conjunct]
        slots = members & entry.mask
        if not slots or (plan.fixed is not None and not plan.fixed(binding, attrs, dur, own)):
            return 0
        if plan.ordered:
            slots = self._ordered(group, plan, slots, binding, attrs, dur, own)
        assert plan.general is not None
        if not slots or not plan.general(binding, attrs, dur, own, entry.constants):
            return 0
        return self._guarded(slots, binding, attrs, dur, own)

    def thresholds(
        self, group: Group, members: int, binding: Binding
    ) -> list[tuple[Tuple, Value | None]]:
        """Each tuple of ``group`` holding some slot of ``members``, with its threshold.

        The threshold is the side of the conjunct's threshold atom for
        ``binding`` and the tuple's constants (None if its arithmetic faults).
        O(min(tuples of the group, slots of ``members``)) evaluations.
        """
        plan = self.plans[group.conjunct]
        assert plan.threshold is not None and group.general is not None
        side = plan.threshold[2]
        entries: Iterable[Tuple]
        members &= group.mask
        if members.bit_count() >= len(group.general):
            entries = [entry for entry in group.general.values() if entry.mask & members]
        else:
            found: dict[int, Tuple] = {}
            for slot in slots_of(members):
                entry = group.general[plan.general_key_of(self.slots[slot])]
                found[id(entry)] = entry
            entries = found.values()
        out: list[tuple[Tuple, Value | None]] = []
        for entry in entries:
            try:
                out.append((entry, side(binding, entry.constants)))
            except ArithmeticFault:
                out.append((entry, None))
        return out

    def _ordered(
        self,
        group: Group,
        plan: ConjunctPlan,
        slots: int,
        binding: Binding,
        attrs: Binding,
        dur: int,
        own: int,
    ) -> int:
        """The slots of ``slots`` for which the conjunct's ordered atoms hold."""
        if group.ordered is None:
            return self._compare(group, plan, slots, binding, attrs, dur, own)
        masks = group.ordered
        for n, (value_of, op, _) in enumerate(plan.ordered):  # zip(strict=True) is not compiled
            try:
                value = value_of(binding, attrs, dur, own)
            except ArithmeticFault:
                self.faults.arithmetic += 1
                return 0
            slots &= masks[n].satisfying(op, value)
            if not slots:
                break
        return slots

    def _compare(
        self,
        group: Group,
        plan: ConjunctPlan,
        slots: int,
        binding: Binding,
        attrs: Binding,
        dur: int,
        own: int,
    ) -> int:
        """The ordered atoms of a small group, its slots' constants compared one by one."""
        ops, values, params = [], [], []
        for value_of, op, param in plan.ordered:
            try:
                values.append(value_of(binding, attrs, dur, own))
            except ArithmeticFault:
                self.faults.arithmetic += 1
                return 0
            ops.append(op)
            params.append(param)
        count, kept = len(ops), 0
        for slot in slots_of(slots):
            constants = self.slots[slot]
            n = 0  # a loop, not all() over a generator: one object fewer per slot, compiled
            while n < count and compare(ops[n], values[n], constants[params[n]]):
                n += 1
            if n == count:
                kept |= 1 << slot
        return kept

    def matching_groups(self, attrs: Binding) -> list[Group]:
        """The groups whose key constants equal the event's (what the static index finds)."""
        found = []
        every = self.groups
        for n, plan in enumerate(self.plans):  # zip(strict=True) is not compiled
            groups = every[n]
            key = tuple(attrs[name] for name, _ in plan.keys)
            group = groups.get(key)
            if group is not None and group.matchable:
                found.append(group)
        return found

    def check_valid(self) -> None:
        """Assert that the groups partition the slots by key and their value masks agree."""
        for position, (plan, groups) in enumerate(zip(self.plans, self.groups, strict=True)):
            union = 0
            for key, group in groups.items():
                assert group.conjunct == position and group.key == key and group.mask
                assert group.matchable == all(value == value for value in key)
                assert group.entry == compact(group.mask)
                assert not group.mask & union
                union |= group.mask
                assert all(key == plan.key_of(self.slots[s]) for s in slots_of(group.mask))
                small = group.mask.bit_count() <= self.small or not plan.ordered
                assert group.ordered is not None or small
                for masks in group.ordered or ():
                    masks.check_valid()
                    assert len(masks) == group.mask.bit_count()
                if plan.general is not None:
                    tuples = 0
                    assert group.general is not None
                    for entry in group.general.values():
                        assert entry.mask and not entry.mask & tuples
                        assert entry.entry == compact(entry.mask)
                        tuples |= entry.mask
                    assert tuples == group.mask
            assert union == self.all
        assert self.all.bit_count() == len(self.slots) == len(self._bounds)
        expected = (self._bounds[0], self._bounds[-1]) if self._bounds else (-math.inf, -math.inf)
        assert (self._lowest, self._highest) == expected
