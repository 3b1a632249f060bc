"""A parsed pattern against the stream schemas: types, predicate placement and output (SASE+ §3.2).

:func:`resolve` checks every name and type and turns a :class:`Pattern` into
the :class:`Resolved` form both the literal evaluator and the compiler read:

* the positive components become :class:`Step` s; each WHERE conjunct (after
  the equivalence tests ``[attr]`` are written out as equalities with the
  first component) is placed by its *last identifier*, as SASE+'s Step 2 does:
  on a singleton's or a Kleene closure's first event (``begin``), on a Kleene
  closure's later events (``take``: ``a[i]``, ``a[i-1]``, ``agg(a[..i-1].x)``),
  or on the closed closure (``close``: ``a[a.LEN]``, ``a.LEN``, ``agg(a[].x)``),
  checked when the run proceeds past it;
* each negated component becomes a :class:`Negation` with the conjuncts that
  name it (SASE's P-), between the positive steps around it;
* the window is compiled into ticks; the output schema comes from RETURN, or
  by default every attribute of every positive variable (``a_price``; a
  Kleene variable gives ``a_len``, ``a_first_x`` and ``a_last_x``).

Errors are :class:`~cesar.automata.errors.CelSemanticError` at the offending
name or term.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from cesar.automata.derived import DERIVING, Derived, derived_call, extended, read_by
from cesar.automata.errors import CelSemanticError
from cesar.automata.functions import DEFAULT_FUNCTIONS, FunctionRegistry
from cesar.automata.pattern.ast import Component, Index, Pattern, Ref, Strategy
from cesar.automata.schema import AttrType, StreamSchema, TimeUnit, check_name
from cesar.automata.skipping import Skip, checked
from cesar.automata.terms import (
    TRUE,
    Attr,
    Call,
    Cmp,
    Const,
    DurLit,
    Leaf,
    Pos,
    Pred,
    Scope,
    Term,
    Truth,
    conjoin,
    conjuncts_of,
    map_leaves,
    map_pred,
    map_term,
    to_cel,
)
from cesar.automata.timeparts import TICKS_PARTS
from cesar.automata.translate import _some, common_zone, duration_ticks
from cesar.automata.typecheck import check_pred, infer_type

BEGIN, TAKE, CLOSE = 0, 1, 2
"""Stages of a positive step, in the order a run reaches them."""
_WHOLE = (Index.LEN, Index.ALL, Index.UPTO_PREVIOUS)
"""Indices that read no single event, so no window of one."""

_STAGE = {
    Index.ONLY: BEGIN,
    Index.FIRST: BEGIN,
    Index.CURRENT: TAKE,
    Index.PREVIOUS: TAKE,
    Index.UPTO_PREVIOUS: TAKE,
    Index.LAST: CLOSE,
    Index.ALL: CLOSE,
    Index.LEN: CLOSE,
}


@dataclass(frozen=True)
class Step:
    """A positive component: its variable, streams, and the predicates placed on it."""

    var: str
    types: tuple[str, ...]
    kleene: bool
    begin: Pred
    take: Pred
    close: Pred


BETWEEN_ENDS = -2
"""A negation's ``after`` in an AND: between the match's first and last events."""


@dataclass(frozen=True)
class Negation:
    """A negated component between positive steps ``after`` and ``after + 1``.

    ``after`` is -1 for a negation before the first step, ``len(steps) - 1``
    for one after the last, and :data:`BETWEEN_ENDS` in an AND (between the match's first
    and last events, by arrival); ``pred`` is every conjunct that names ``var``.
    """

    var: str
    types: tuple[str, ...]
    after: int
    pred: Pred


ALTERNATIVE = "ALTERNATIVE"
"""The call reading which alternative of an OR a match is of (docs/patterns.md)."""


def numbering(number: int) -> Callable[[Call], Term | None]:
    """A ``calls`` replacer (:func:`~cesar.automata.terms.map_leaves`) making ``ALTERNATIVE()``
    ``number``, the 1-based place of the alternative in those the pattern distributes into.

    >>> from cesar.automata.terms import to_cel
    >>> to_cel(map_term(Call("ALTERNATIVE", ()), lambda leaf: leaf, numbering(2)))
    '2'
    """

    def calls(call: Call) -> Term | None:
        if call.name != ALTERNATIVE:
            return None
        if call.args:
            raise CelSemanticError("ALTERNATIVE() takes no argument", call.pos)
        return Const(number, AttrType.INT, call.pos)

    return calls


@dataclass(frozen=True)
class Resolved:
    """A pattern ready to evaluate or compile.

    ``types`` gives each reference key's type; ``output`` is the published
    schema and ``returns`` the term computing each of its attributes;
    ``partition`` the attributes of the equivalence tests; ``window`` in ticks.
    ``conjuncts`` (AND patterns) is the whole WHERE, judged on a full match.
    ``keyed``: every stream of every positive component has the ``partition``
    attributes, so matches never mix partitions (the lazy plans' buffers key on them).
    ``skip``: the after-match policy, its window set (:mod:`cesar.automata.skipping`);
    ``windows``: the time-window aggregates to compute, per stream
    (:mod:`cesar.automata.derived`), which the streams' schemas gain as attributes.
    """

    pattern: Pattern
    operator: str
    steps: tuple[Step, ...]
    negations: tuple[Negation, ...]
    strategy: Strategy
    partition: tuple[str, ...]
    window: int | None
    refs: Mapping[str, Ref]
    types: Mapping[str, AttrType]
    output: StreamSchema
    returns: tuple[tuple[str, Term], ...]
    reads: frozenset[str]
    conjuncts: Pred
    keyed: bool = False
    skip: Skip | None = None
    windows: tuple[tuple[str, Derived], ...] = ()


def resolve(
    pattern: Pattern,
    schemas: Mapping[str, StreamSchema],
    default_name: str | None = None,
    functions: FunctionRegistry = DEFAULT_FUNCTIONS,
) -> Resolved:
    """Check ``pattern`` against ``schemas`` and place its predicates; see the module docstring."""
    return _Resolver(pattern, schemas, functions).resolve(default_name)


class _Resolver:
    def __init__(
        self,
        pattern: Pattern,
        schemas: Mapping[str, StreamSchema],
        functions: FunctionRegistry,
    ) -> None:
        self.pattern = pattern
        self.schemas = schemas
        self.base = schemas
        """The streams as declared: the default output has their attributes, not windows'."""
        self.functions = functions
        self.components: dict[str, Component] = {}
        self.order: dict[str, int] = {}
        self.refs: dict[str, Ref] = dict(pattern.refs)
        self.types: dict[str, AttrType] = {}
        self.named = tuple(
            c if c.var is not None or not c.negated else replace(c, var=f"!{i}")
            for i, c in enumerate(pattern.components)
        )
        """The components, an unnamed negation called ``!k`` (k its place; no name has ``!``)."""

    def resolve(self, default_name: str | None) -> Resolved:
        unit = self._components()
        windows = self._windows(unit)
        pattern = self.pattern
        positive = [c for c in self.named if not c.negated]
        if pattern.operator == "AND":
            self._check_conjunction()
        if not positive:
            raise CelSemanticError("a pattern needs a component that is not negated", pattern.pos)
        where = conjoin(*self._equalities(positive), pattern.where or TRUE)
        self._type(where)
        window = self._window(unit)
        steps, negations = self._place(where, positive)
        if negations and window is None and any(n.after in (-1, len(steps) - 1) for n in negations):
            raise CelSemanticError(
                "a negation before the first or after the last component needs WITHIN: "
                "without a window it never ends",
                pattern.pos,
            )
        skip = None
        if pattern.skip is not None:
            steps_seen = [(step.var, step.kleene) for step in steps]
            skip = checked(pattern.skip, pattern.operator, window, steps_seen, pattern.pos)
        name = pattern.publish or default_name
        if name is None:
            raise CelSemanticError("the pattern needs PUBLISH name", pattern.pos)
        returns = self._returns(positive)
        output = StreamSchema(
            name,
            tuple((n, infer_type(t, self.ref_type, self.functions)) for n, t in returns),
            unit,
            common_zone(self.base[t] for c in self.named for t in c.types),
        )
        return Resolved(
            pattern,
            pattern.operator,
            steps,
            negations,
            pattern.strategy,
            tuple(e.attr for e in pattern.equivalences),
            window,
            self.refs,
            self.types,
            output,
            returns,
            frozenset(t for c in self.named for t in c.types),
            self._positive(where) if pattern.operator == "AND" else TRUE,
            bool(pattern.equivalences)
            and all(
                self.schemas[name].type_of(test.attr) is not None
                for component in positive
                for name in component.types
                for test in pattern.equivalences
            ),
            skip,
            read_by(self.schemas, sorted({t for c in self.named for t in c.types}), windows),
        )

    def _positive(self, where: Pred) -> Pred:
        """The conjuncts of ``where`` that name no negated component."""
        return conjoin(
            *(
                c
                for c in conjuncts_of(where)
                if not any(self.components[self.refs[k].var].negated for k in keys_of(c))
            )
        )

    def _windows(self, unit: TimeUnit) -> list[Derived]:
        """Rewrite each window call (``AVG_OVER(b.Price, 30 MIN, b.Name)``) and time function
        (``HOUR(b.t1)``) in WHERE and RETURN to the attribute of its event it becomes, and give
        the streams those attributes (:mod:`cesar.automata.derived`); a duration elsewhere
        becomes ticks, as in CEL."""
        found: list[Derived] = []

        def attr_of(term: Term) -> tuple[tuple[str, Index], str] | None:
            if not isinstance(term, Attr) or term.name not in self.refs:
                return None
            ref = self.refs[term.name]
            if ref.attr is None or ref.aggregate is not None or ref.index in _WHOLE:
                return None
            return (ref.var, ref.index), ref.attr

        first = numbering(1)  # a flat pattern is its only alternative

        def calls(call: Call) -> Term | None:
            if call.name == ALTERNATIVE:
                return first(call)
            if call.name not in DERIVING:
                return None
            window, (var, index) = derived_call(call, unit, attr_of)
            found.append(window)
            return self._leaf(Ref(var, index, window.name), call.pos)

        def ticks(leaf: Leaf) -> Term:
            return duration_ticks(leaf, unit) if isinstance(leaf, DurLit) else leaf

        pattern = self.pattern
        if pattern.operator == "AND" and any(c.negated for c in pattern.components):
            found.extend(TICKS_PARTS)  # the engine's join reads them
        where = None if pattern.where is None else map_pred(pattern.where, ticks, calls)
        returns = None
        if pattern.returns is not None:
            returns = tuple(
                replace(item, term=map_term(item.term, ticks, calls)) for item in pattern.returns
            )
        self.pattern = replace(pattern, where=where, returns=returns)
        self.schemas = extended(self.schemas, found)
        for key in [k for k, ref in self.refs.items() if ref.attr in ("t0", "t1")]:
            del self.refs[key]  # read only through a time function, now an attribute
        return found

    # ------------------------------------------------------------ components

    def _components(self) -> TimeUnit:
        unit: TimeUnit | None = None
        first: str | None = None
        for number, component in enumerate(self.named):
            for name in component.types:
                schema = self.schemas.get(name)
                if schema is None:
                    raise CelSemanticError(
                        f"unknown stream {name} (known streams: {_some(self.schemas)})",
                        component.pos,
                    )
                if unit is None:
                    unit, first = schema.unit, name
                elif schema.unit is not unit:
                    raise CelSemanticError(
                        f"stream {name} counts time in {schema.unit.name.lower()} but {first} in "
                        f"{unit.name.lower()}; a pattern's streams must share a unit",
                        component.pos,
                    )
            if component.var is None:
                raise CelSemanticError("this component needs a variable", component.pos)
            if component.var in self.components:
                raise CelSemanticError(f"variable {component.var} is declared twice", component.pos)
            self.components[component.var] = component
            self.order[component.var] = number
        assert unit is not None
        return unit

    def _check_conjunction(self) -> None:
        for component in self.named:
            if component.kleene:
                raise CelSemanticError("AND takes components without +", component.pos)
        negated = [c for c in self.named if c.negated]
        if negated and len(self.named) - len(negated) < 2:
            raise CelSemanticError(
                "a negation in an AND lies between the match's first and last events: it "
                "needs two components that are not negated",
                negated[0].pos,
            )
        if self.pattern.strategy is not Strategy.ANY:
            raise CelSemanticError(
                "AND matches its components in any order: only skip_till_any_match applies",
                self.pattern.pos,
            )

    def _attr_type(self, component: Component, attr: str, pos: Pos) -> AttrType:
        found = {
            typ for name in component.types if (typ := self.schemas[name].type_of(attr)) is not None
        }
        if not found:
            known = sorted({a for n in component.types for a in self.schemas[n].names})
            raise CelSemanticError(
                f"{'/'.join(component.types)} has no attribute {attr} (it has {', '.join(known)})",
                pos,
            )
        if len(found) > 1:
            if found == {AttrType.INT, AttrType.FLOAT}:
                return AttrType.FLOAT
            raise CelSemanticError(
                f"attribute {attr} has different types in {', '.join(component.types)}", pos
            )
        return found.pop()

    def _equalities(self, positive: list[Component]) -> list[Pred]:
        """The equivalence tests written out: each component's ``attr`` equals the first's.

        A Kleene closure's every event is tested (``b[1]`` when it begins,
        ``b[i]`` when it grows); a value (``[attr = v]``) fixes the first's.
        """
        out: list[Pred] = []
        anchor = positive[0]
        for test in self.pattern.equivalences:
            pos = test.pos
            first = self._leaf(
                Ref(_var(anchor), Index.FIRST if anchor.kleene else Index.ONLY, test.attr), pos
            )
            self.ref_type(first)  # a match's partition reads it, even with no other component
            if test.value is not None:
                out.append(Cmp("=", first, test.value, pos))
            for component in self.named:
                indices = [Index.FIRST, Index.CURRENT] if component.kleene else [Index.ONLY]
                if component is anchor:
                    indices = indices[1:]
                for index in indices:
                    ref = self._leaf(Ref(_var(component), index, test.attr), pos)
                    out.append(Cmp("=", ref, first, pos))
        return out

    def _leaf(self, ref: Ref, pos: Pos) -> Attr:
        self.refs.setdefault(ref.key, ref)
        return Attr(Scope.EVENT, ref.key, pos)

    # ---------------------------------------------------------------- typing

    def _type(self, pred: Pred) -> None:
        check_pred(pred, self.ref_type, self.functions)

    def ref_type(self, attr: Attr) -> AttrType:
        """The type of the reference ``attr`` stands for, checked against its variable."""
        if attr.name in self.types:
            return self.types[attr.name]
        ref = self.refs.get(attr.name)
        assert ref is not None, f"unregistered reference {attr.name}"
        component = self.components.get(ref.var)
        if component is None:
            raise CelSemanticError(f"unknown variable {ref.var}", attr.pos)
        if component.kleene and ref.index is Index.ONLY:
            raise CelSemanticError(
                f"{ref.var} is a Kleene variable: write {ref.var}[1].{ref.attr}, "
                f"{ref.var}[i].{ref.attr} or {ref.var}[{ref.var}.LEN].{ref.attr}",
                attr.pos,
            )
        if not component.kleene and ref.index is not Index.ONLY:
            raise CelSemanticError(
                f"{ref.var} is one event, not a Kleene closure: write {ref.var}.{ref.attr}",
                attr.pos,
            )
        if ref.index is Index.LEN:
            typ = AttrType.INT
        else:
            assert ref.attr is not None
            typ = self._attr_type(component, ref.attr, attr.pos)
            if ref.aggregate == "COUNT":
                typ = AttrType.INT
            elif ref.aggregate is not None:
                if not typ.numeric and not (
                    typ is AttrType.STRING and ref.aggregate in ("MIN", "MAX")
                ):
                    raise CelSemanticError(
                        f"{ref.aggregate.lower()} needs numbers, not {typ.value} {ref.attr}",
                        attr.pos,
                    )
                if ref.aggregate in ("AVG", "SUM"):
                    typ = AttrType.FLOAT
        self.types[attr.name] = typ
        return typ

    def _window(self, unit: TimeUnit) -> int | None:
        window = self.pattern.window
        if window is None:
            return None
        if isinstance(window, DurLit):
            window = duration_ticks(window, unit)
        assert isinstance(window, Const)
        if not isinstance(window.value, int):
            raise CelSemanticError(
                f"the window is {window.value} ticks; give a whole number of the streams' unit",
                self.pattern.window.pos if self.pattern.window is not None else None,
            )
        return window.value

    # ------------------------------------------------------------- placement

    def _stage(self, ref: Ref) -> tuple[int, int]:
        return self.order[ref.var], _STAGE[ref.index]

    def _place(
        self, where: Pred, positive: list[Component]
    ) -> tuple[tuple[Step, ...], tuple[Negation, ...]]:
        begin: dict[str, list[Pred]] = {_var(c): [] for c in positive}
        take: dict[str, list[Pred]] = {_var(c): [] for c in positive}
        close: dict[str, list[Pred]] = {_var(c): [] for c in positive}
        negated: dict[str, list[Pred]] = {}
        conjuncts = conjuncts_of(where)
        first = positive[0].var or ""
        for conjunct in conjuncts:
            if isinstance(conjunct, Truth) and conjunct.value:
                continue
            refs = [self.refs[key] for key in keys_of(conjunct)]
            negs = {r.var for r in refs if self.components[r.var].negated}
            if len(negs) > 1:
                raise CelSemanticError(
                    f"a condition names two negated components ({', '.join(sorted(negs))}); "
                    "split it",
                    _pos(conjunct),
                )
            if negs:
                var = negs.pop()
                for ref in refs:
                    if _STAGE[ref.index] == TAKE:
                        raise CelSemanticError(
                            f"{ref.key} changes as {ref.var} grows; a negation can read "
                            f"{ref.var}[1], {ref.var}[{ref.var}.LEN] or aggregates of {ref.var}[]",
                            _pos(conjunct),
                        )
                negated.setdefault(var, []).append(conjunct)
                continue
            if not refs:
                begin[first].append(conjunct)
                continue
            last = max(refs, key=self._stage)
            stage = self._stage(last)
            for ref in refs:
                if _STAGE[ref.index] == TAKE and self._stage(ref) != stage:
                    later = next(r for r in refs if self._stage(r) == stage)
                    raise CelSemanticError(
                        f"{ref.key} is the event {ref.var} is taking, and {later.key} is not "
                        f"known then; compare {ref.var}[i] with {ref.var}[i-1], {ref.var}[1], "
                        "aggregates of the events before it and earlier components",
                        _pos(conjunct),
                    )
            {BEGIN: begin, TAKE: take, CLOSE: close}[stage[1]][last.var].append(conjunct)
        steps = tuple(
            Step(
                _var(c),
                c.types,
                c.kleene,
                conjoin(*begin[_var(c)]),
                conjoin(*take[_var(c)]),
                conjoin(*close[_var(c)]),
            )
            for c in positive
        )
        negations = []
        seen = -1
        for component in self.named:
            if not component.negated:
                seen += 1
                continue
            pred = conjoin(*negated.get(_var(component), []))
            after = BETWEEN_ENDS if self.pattern.operator == "AND" else seen
            negations.append(Negation(_var(component), component.types, after, pred))
        return steps, tuple(negations)

    # ---------------------------------------------------------------- output

    def _returns(self, positive: list[Component]) -> tuple[tuple[str, Term], ...]:
        items = self.pattern.returns
        out: list[tuple[str, Term, Pos]] = []
        if items is None:
            returned = self.pattern.returned
            for component in positive:
                var = _var(component)
                if returned is not None and var not in returned:
                    continue
                names = _common_attributes(component, self.base)
                if component.kleene:
                    out.append((f"{var}_len", self._leaf(Ref(var, Index.LEN, None), None), None))
                    for attr in names:
                        first = Ref(var, Index.FIRST, attr)
                        last = Ref(var, Index.LAST, attr)
                        out.append((f"{var}_first_{attr}", self._leaf(first, None), None))
                        out.append((f"{var}_last_{attr}", self._leaf(last, None), None))
                else:
                    for attr in names:
                        out.append(
                            (f"{var}_{attr}", self._leaf(Ref(var, Index.ONLY, attr), None), None)
                        )
        else:
            for item in items:
                term = item.term
                infer_type(term, self.ref_type, self.functions)
                for key in keys_of(term):
                    ref = self.refs[key]
                    component = self.components[ref.var]
                    if component.negated or _STAGE[ref.index] == TAKE:
                        raise CelSemanticError(
                            f"RETURN reads the match: {ref.key} is not part of it", item.pos
                        )
                    lacking = [
                        t
                        for t in component.types
                        if ref.attr and self.schemas[t].type_of(ref.attr) is None
                    ]
                    if lacking:
                        raise CelSemanticError(
                            f"RETURN {ref.key}: {', '.join(lacking)} has no {ref.attr}, so a "
                            "match may have no value for it",
                            item.pos,
                        )
                name = item.alias or _default_name(term, self.refs)
                if name is None:
                    raise CelSemanticError("this RETURN item needs a name: add AS name", item.pos)
                out.append((name, term, item.pos))
        seen: set[str] = set()
        for name, _, pos in out:
            try:
                check_name(name, "attribute")
            except ValueError as exc:
                raise CelSemanticError(str(exc), pos or self.pattern.pos) from None
            if name in seen:
                raise CelSemanticError(
                    f"two output attributes are named {name}; name them in RETURN … AS",
                    pos or self.pattern.pos,
                )
            seen.add(name)
        return tuple((name, term) for name, term, _ in out)


def keys_of(node: Term | Pred) -> list[str]:
    """The reference keys a term or predicate reads, in order, once each."""
    found: dict[str, None] = {}

    def visit(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr):
            found[leaf.name] = None
        return leaf

    map_leaves(node, visit)
    return list(found)


def _var(component: Component) -> str:
    """A named component's variable."""
    assert component.var is not None
    return component.var


def _pos(pred: Pred) -> Pos:
    if isinstance(pred, Cmp):
        return pred.pos or pred.left.pos
    return pred.pos


def _common_attributes(component: Component, schemas: Mapping[str, StreamSchema]) -> list[str]:
    """The attributes every stream of ``component`` has, in the first stream's order."""
    first = schemas[component.types[0]]
    return [
        name
        for name in first.names
        if all(name in schemas[other].names for other in component.types[1:])
    ]


def _default_name(term: Term, refs: Mapping[str, Ref]) -> str | None:
    if not isinstance(term, Attr):
        return None
    ref = refs[term.name]
    if ref.index is Index.LEN:
        return f"{ref.var}_len"
    prefix = {Index.ONLY: "", Index.FIRST: "first_", Index.LAST: "last_"}.get(ref.index)
    if ref.aggregate is not None:
        return f"{ref.aggregate.lower()}_{ref.var}_{ref.attr}"
    return None if prefix is None else f"{ref.var}_{prefix}{ref.attr}"


def rewrite(pred: Pred, values: Mapping[str, Term]) -> Pred:
    """``pred`` with each reference leaf replaced by ``values[key]`` (others kept)."""
    return map_pred(pred, _swapper(values))


def rewrite_term(term: Term, values: Mapping[str, Term]) -> Term:
    """``term`` with each reference leaf replaced by ``values[key]`` (others kept)."""
    return map_term(term, _swapper(values))


def _swapper(values: Mapping[str, Term]) -> Callable[[Leaf], Term]:
    def swap(leaf: Leaf) -> Term:
        if isinstance(leaf, Attr) and leaf.scope is Scope.EVENT and leaf.name in values:
            return values[leaf.name]
        return leaf

    return swap


def format_resolved(pattern: Resolved) -> str:
    """A readable rendering of a resolved pattern: its steps and what each judges.

    >>> from cesar.automata.pattern.parser import parse_pattern
    >>> from cesar.automata.schema import parse_stream_spec
    >>> schemas = {"S": parse_stream_spec("S(k:string,v:int)")}
    >>> text = "PATTERN SEQ(S+ a[], S b) WHERE [k] AND b.v > a[a.LEN].v WITHIN 5"
    >>> print(format_resolved(resolve(parse_pattern(text), schemas, "out")))
    SEQ under skip_till_any_match, WITHIN 5 ticks
      a: S+ (Kleene closure)
        begin: TRUE
        take: a[i].k = a[1].k
        close: TRUE
      b: S
        begin: b.k = a[1].k AND b.v > a[a.LEN].v
    """
    window = "" if pattern.window is None else f", WITHIN {pattern.window} ticks"
    skip = "" if pattern.skip is None else f", {pattern.skip}"
    lines = [f"{pattern.operator} under {pattern.strategy.value}{window}{skip}"]
    if pattern.operator == "AND":
        lines.append(f"  where: {to_cel(pattern.conjuncts)}")
    for n, step in enumerate(pattern.steps):
        for negation in pattern.negations:
            if negation.after == n - 1:
                lines.append(f"  {negation.var}: not {'/'.join(negation.types)} before {step.var}")
                lines.append(f"    when: {to_cel(negation.pred)}")
        kind = "+ (Kleene closure)" if step.kleene else ""
        lines.append(f"  {step.var}: {'/'.join(step.types)}{kind}")
        lines.append(f"    begin: {to_cel(step.begin)}")
        if step.kleene:
            lines.append(f"    take: {to_cel(step.take)}")
            lines.append(f"    close: {to_cel(step.close)}")
    for negation in pattern.negations:
        if negation.after == BETWEEN_ENDS:
            lines.append(
                f"  {negation.var}: not {'/'.join(negation.types)} between the first and last"
            )
            lines.append(f"    when: {to_cel(negation.pred)}")
        if negation.after == len(pattern.steps) - 1:
            lines.append(
                f"  {negation.var}: not {'/'.join(negation.types)} within the window after"
            )
            lines.append(f"    when: {to_cel(negation.pred)}")
    return "\n".join(lines)
