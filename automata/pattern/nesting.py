"""OR and nested groups → alternatives: flat patterns the resolver, the engine and the oracle read.

A pattern's structure may nest ``SEQ``, ``AND`` and ``OR`` (OpenCEP's
composition; docs/patterns.md, "OR and nesting").  Its meaning is a bag union:
every match of every *alternative*, where the alternatives are what the
structure distributes into.  ``OR`` lists its parts' alternatives; ``SEQ`` and
``AND`` take one alternative of each part, in every combination, and a group
of the same operator inside them is spliced in (``SEQ(a, SEQ(b, c))`` is
``SEQ(a, b, c)``: a sequence's parts follow each other, so a nested sequence's
events all follow the events before it).

>>> from cesar.automata.pattern.parser import parse_pattern
>>> p = parse_pattern("PATTERN SEQ(A a, OR(SEQ(B b, C c), D d), E e) PUBLISH P")
>>> [show(alt.group) for alt in alternatives(p)]
['SEQ(a, b, c, e)', 'SEQ(a, d, e)']

Each alternative is resolved as a flat pattern over its own components (in
the order of the text): it keeps the WHERE conjuncts whose variables it binds,
and all equivalence tests and the window.  What the pattern says is checked
here, for every evaluator alike:

* a variable names the same component in every alternative it appears in;
* each condition is bound together by some alternative, and RETURN reads only
  variables every alternative binds (the default output: their attributes);
* a negation stands in a SEQ with a component beside it, or in an AND (between
  the match's first and last events), not as an alternative of its own, and a SEQ
  inside an AND does not start or end with one (it would have no neighbour to be
  between);
* a Kleene closure is not a part of an AND; the strategy is skip_till_any_match
  (SASE+'s strategies are defined on one sequence); the plan is eager (a lazy plan
  orders the components of one sequence); an after-match policy needs every
  alternative to be a sequence, and judges the matches of all of them together (the
  subscription's stream);
* at most :data:`MAX_ALTERNATIVES` alternatives.

An alternative is *flat* when it is one component, or a SEQ or an AND of
components: it compiles as a flat pattern.  One holding a SEQ and an AND one
inside the other compiles as a join ordered by its structure
(:mod:`cesar.automata.pattern.poset`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cesar.automata.derived import Derived, extended, read_by
from cesar.automata.errors import CelSemanticError
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.pattern.ast import Component, Group, Pattern, Ref, ReturnItem, Strategy
from cesar.automata.pattern.placing import keys_of
from cesar.automata.pattern.resolve import Resolved, numbering, resolve
from cesar.automata.schema import AttrType, StreamSchema
from cesar.automata.terms import ZERO, Leaf, Term, conjoin, conjuncts_of, map_pred, map_term
from cesar.automata.timeparts import TICKS_PARTS
from cesar.automata.translate import common_zone

MAX_ALTERNATIVES = 32
"""Alternatives one pattern distributes into (max_pattern_alternatives): each is an automaton
of its own, and ``SEQ(OR(a, b), OR(c, d), …)`` doubles them per OR."""

Part = Component | Group


@dataclass(frozen=True)
class Alternative:
    """One alternative: its structure (no OR; a component or a SEQ/AND tree), the flat
    pattern the resolver reads, and whether it is one component or a SEQ or an AND of
    components (``flat``)."""

    group: Part
    pattern: Pattern
    flat: bool
    missing: tuple[int, ...] = ()
    """The RETURN items (by position) reading a variable this alternative does not bind: its
    matches give them the zero of their type (:func:`resolve_nested`)."""


@dataclass(frozen=True)
class Nested:
    """A nested pattern resolved: its alternatives, each with its resolved flat form.

    ``output`` is what the pattern publishes (every alternative's output has its
    attributes); ``reads`` and ``windows`` cover every alternative.
    """

    pattern: Pattern
    alternatives: tuple[Alternative, ...]
    resolved: tuple[Resolved, ...]
    output: StreamSchema
    reads: frozenset[str]
    window: int | None
    windows: tuple[tuple[str, Derived], ...]

    @property
    def single(self) -> Resolved | None:
        """The resolved pattern when there is one alternative and the engine runs it."""
        if len(self.alternatives) == 1 and self.alternatives[0].flat:
            return self.resolved[0]
        return None


def resolve_nested(
    pattern: Pattern,
    schemas: Mapping[str, StreamSchema],
    default_name: str | None = None,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
) -> Nested:
    """Check the nested ``pattern`` and resolve each of its alternatives against ``schemas``."""
    name = pattern.publish or default_name
    alts = list(alternatives(pattern, name))
    resolved = [resolve(alt.pattern, schemas, default_name, functions) for alt in alts]
    if any(alt.missing for alt in alts):  # their zero: the values have no null
        columns = _returned(alts, resolved)
        for n, alt in enumerate(alts):
            if alt.missing:
                assert alt.pattern.returns is not None and pattern.returns is not None
                mine = iter(alt.pattern.returns)
                items = tuple(
                    ReturnItem(ZERO[columns[i][1]], columns[i][0], item.pos)
                    if i in alt.missing
                    else next(mine)
                    for i, item in enumerate(pattern.returns)
                )
                again = replace(alt.pattern, returns=items)
                alts[n] = replace(alt, pattern=again)
                resolved[n] = resolve(again, schemas, default_name, functions)
    resolved = [_ordered(r, schemas, alt.flat) for r, alt in zip(resolved, alts, strict=True)]
    first = resolved[0]
    if pattern.skip is not None and len({(r.keyed, r.partition) for r in resolved}) > 1:
        raise CelSemanticError(
            f"{pattern.skip} takes matches per partition, but the equivalence tests partition "
            "some alternatives and not others (an alternative reading a stream without the "
            "attribute is not partitioned)",
            pattern.skip.pos,
        )
    reads = frozenset().union(*(r.reads for r in resolved))
    windows: dict[tuple[str, Derived], None] = {}
    for r in resolved:
        windows.update(dict.fromkeys(r.windows))
    assert name is not None, "resolve asks for PUBLISH"
    output = StreamSchema(
        name, first.output.attributes, first.output.unit, common_zone(schemas[t] for t in reads)
    )
    return Nested(
        pattern, tuple(alts), tuple(resolved), output, reads, first.window, tuple(windows)
    )


def _returned(
    alts: Sequence[Alternative], resolved: Sequence[Resolved]
) -> list[tuple[str, AttrType]]:
    """Each RETURN item's name and type, from an alternative that binds what it reads."""
    found: dict[int, tuple[str, AttrType]] = {}
    for alt, r in zip(alts, resolved, strict=True):
        kept = [
            i for i in range(len(r.output.attributes) + len(alt.missing)) if i not in alt.missing
        ]
        for i, column in zip(kept, r.output.attributes, strict=True):
            found.setdefault(i, column)
    return [found[i] for i in range(len(found))]


def _ordered(resolved: Resolved, schemas: Mapping[str, StreamSchema], flat: bool) -> Resolved:
    """``resolved``, reading each event's time in ticks if its alternative is not flat (the
    engine orders its components by them: :mod:`cesar.automata.pattern.poset`)."""
    if flat:
        return resolved
    wider = extended(schemas, TICKS_PARTS)
    more = read_by(wider, sorted(resolved.reads), TICKS_PARTS)
    return replace(resolved, windows=tuple(dict.fromkeys((*resolved.windows, *more))))


def show(part: Part) -> str:
    """The structure with each component as its variable (``!n`` for a negation).

    >>> show(Group("AND", (Component(("A",), "a"), Component(("B",), "b", negated=True))))
    'AND(a, !b)'
    """
    if isinstance(part, Component):
        return f"!{part.var}" if part.negated else f"{part.var}" + ("[]" if part.kleene else "")
    return f"{part.operator}({', '.join(show(p) for p in part.parts)})"


def alternatives(pattern: Pattern, name: str | None = None) -> tuple[Alternative, ...]:
    """The alternatives of ``pattern``, each a flat pattern publishing ``name`` (one
    alternative) or ``name#k`` (several); raises :class:`CelSemanticError` for what no
    evaluator runs (module docstring).  O(alternatives × conjuncts)."""
    root = pattern.nested
    assert root is not None, "a flat pattern is its own alternative"
    _check_variables(root)
    _check_groups(root)
    count = distributed(root)
    if count > MAX_ALTERNATIVES:
        raise CelSemanticError(
            f"the pattern distributes into {count} alternatives, more than "
            f"{MAX_ALTERNATIVES} (max_pattern_alternatives: each runs as an automaton of its own)",
            pattern.pos,
        )
    _check_nested(pattern)
    groups = [_normal(g) for g in _distribute(root)]
    for group in groups:
        _check_negations(group)
        if pattern.skip is not None and not _is_sequence(group):
            raise CelSemanticError(
                f"{pattern.skip} orders matches by their first event, so every alternative must "
                f"be a sequence of components; {show(group)} is not (an AND has no order)",
                pattern.skip.pos,
            )
    several = len(groups) > 1
    common = frozenset.intersection(*(_positive_vars(g) for g in groups))
    refs = dict(pattern.refs)
    where = conjuncts_of(pattern.where) if pattern.where is not None else []
    used = [False] * len(where)
    out = []
    items = pattern.returns or ()
    _check_returns(items, [_positive_vars(g) for g in groups], refs)
    for number, group in enumerate(groups, 1):
        names = {c.var for c in _components(group)}
        kept = []
        for n, conjunct in enumerate(where):
            if {refs[key].var for key in keys_of(conjunct)} <= names:
                kept.append(map_pred(conjunct, _same, numbering(number)))
                used[n] = True
        reads = [{refs[key].var for key in keys_of(item.term)} for item in items]
        missing = tuple(n for n, read in enumerate(reads) if not read <= names)
        returns = tuple(
            replace(item, term=map_term(item.term, _same, numbering(number)))
            for n, item in enumerate(items)
            if n not in missing
        )
        flat = _is_flat(group)
        operator = "AND" if isinstance(group, Group) and group.operator == "AND" and flat else "SEQ"
        alternative = replace(
            pattern,
            operator=operator,
            components=_components(group),
            where=conjoin(*kept) if kept else None,
            refs=tuple((key, ref) for key, ref in pattern.refs if ref.var in names),
            publish=f"{name}#{number}" if several and name is not None else name,
            nested=None,
            returned=common,
            returns=returns if pattern.returns is not None else None,
        )
        out.append(Alternative(group, alternative, flat, missing))
    for n, conjunct in enumerate(where):
        if not used[n]:
            named = sorted({refs[key].var for key in keys_of(conjunct)})
            raise CelSemanticError(
                f"this condition names {', '.join(named)}, which no alternative binds together",
                getattr(conjunct, "pos", None) or pattern.pos,
            )
    return tuple(out)


def _check_nested(pattern: Pattern) -> None:
    what = "an OR or a nested group"
    if pattern.strategy is not Strategy.ANY:
        raise CelSemanticError(
            f"{what} matches under skip_till_any_match only; SASE+'s strategies are defined on "
            "one sequence",
            pattern.pos,
        )
    plan = None if pattern.plan is None else pattern.plan.strip().lower()
    if plan not in (None, "auto", "eager"):
        raise CelSemanticError(
            f"PLAN {pattern.plan}: a lazy plan orders the components of one sequence, and "
            f"{what} runs each alternative on the shared DAG (PLAN eager, or auto, which is "
            "eager here)",
            pattern.pos,
        )


def _check_variables(root: Part) -> None:
    """A variable names the same component wherever it appears."""
    seen: dict[str, Component] = {}
    for component in _components(root):
        if component.var is None:
            continue
        first = seen.setdefault(component.var, component)
        if (first.types, first.kleene, first.negated) != (
            component.types,
            component.kleene,
            component.negated,
        ):
            raise CelSemanticError(
                f"variable {component.var} names two different components; a variable may "
                "stand in several alternatives of an OR only for the same component",
                component.pos,
            )


def _check_groups(part: Part) -> None:
    """Every group holds a part that is not a negation."""
    if isinstance(part, Component):
        return
    if all(isinstance(p, Component) and p.negated for p in part.parts):
        raise CelSemanticError("a group needs a component that is not negated", part.pos)
    for p in part.parts:
        _check_groups(p)


def distributed(part: Part) -> int:
    """How many alternatives ``part`` distributes into (a negation: one, as a component)."""
    if isinstance(part, Component):
        return 1
    counts = [distributed(p) for p in part.parts]
    return sum(counts) if part.operator == "OR" else math.prod(counts)


def _distribute(part: Part) -> list[Part]:
    """The OR-free structures ``part`` stands for, in the order of the text."""
    if isinstance(part, Component):
        return [part]
    if part.operator == "OR":
        return [alt for p in part.parts for alt in _distribute(p)]
    combos: list[tuple[Part, ...]] = [()]
    for p in part.parts:
        combos = [(*combo, alt) for combo in combos for alt in _distribute(p)]
    return [Group(part.operator, combo, part.pos) for combo in combos]


def _normal(part: Part) -> Part:
    """``part`` with same-operator groups spliced into their parent and groups of one part
    replaced by it."""
    if isinstance(part, Component):
        return part
    parts: list[Part] = []
    for p in part.parts:
        p = _normal(p)
        if isinstance(p, Group) and p.operator == part.operator:
            parts.extend(p.parts)
        else:
            parts.append(p)
    if len(parts) == 1:
        return parts[0]
    return Group(part.operator, tuple(parts), part.pos)


def _check_negations(part: Part) -> None:
    """Negations stand in a SEQ or an AND beside a component; no closure in an AND (module
    docstring)."""
    if isinstance(part, Component):
        if part.negated:
            raise CelSemanticError(
                "a negation stands in a SEQ or an AND beside a component; alone it matches nothing",
                part.pos,
            )
        return
    if part.operator == "AND":
        for p in part.parts:
            if isinstance(p, Component) and p.kleene:
                raise CelSemanticError("AND takes components without +", p.pos)
            if isinstance(p, Group) and any(
                isinstance(end, Component) and end.negated for end in (p.parts[0], p.parts[-1])
            ):
                raise CelSemanticError(
                    "a SEQ inside an AND cannot start or end with a negation: it has no "
                    "neighbour there to be between",
                    p.pos,
                )
            if isinstance(p, Group):
                _check_negations(p)
        return
    for p in part.parts:
        if isinstance(p, Group):
            _check_negations(p)


def _components(part: Part) -> tuple[Component, ...]:
    return part.components() if isinstance(part, Group) else (part,)


def _positive_vars(part: Part) -> frozenset[str]:
    return frozenset(c.var for c in _components(part) if not c.negated and c.var is not None)


def _is_sequence(part: Part) -> bool:
    """One component, or a SEQ of components."""
    return isinstance(part, Component) or (part.operator == "SEQ" and _is_flat(part))


def _is_flat(part: Part) -> bool:
    return isinstance(part, Component) or all(isinstance(p, Component) for p in part.parts)


def _check_returns(
    items: Sequence[ReturnItem], bound: Sequence[frozenset[str]], refs: Mapping[str, Ref]
) -> None:
    """Each RETURN item reads variables some alternative binds together."""
    for item in items:
        read = {refs[key].var for key in keys_of(item.term)}
        if not any(read <= names for names in bound):
            raise CelSemanticError(
                f"RETURN reads {', '.join(sorted(read))}, which no alternative binds together",
                item.pos,
            )


def _same(leaf: Leaf) -> Term:
    return leaf
