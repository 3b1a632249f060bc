"""A parsed pattern against the stream schemas: names, types and windows (SASE+ §3.2).

:func:`resolve` checks every name and type and turns a :class:`Pattern` into
the :class:`Resolved` form both the literal evaluator and the compiler read:

* each component's streams must exist and share a time unit, each variable is
  declared once, and every reference is typed against its variable (a Kleene
  variable is read as ``a[1]``, ``a[i]``, ``a[a.LEN]`` or an aggregate);
* the equivalence tests ``[attr]`` are written out as equalities with the
  first component; time-window aggregates become attributes of their streams
  (:mod:`cesar.automata.derived`), durations become ticks;
* each WHERE conjunct is then placed on a step or a negation
  (:mod:`cesar.automata.pattern.placing`), and the output schema comes from
  RETURN or the default attributes (:mod:`cesar.automata.pattern.output`).

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
from cesar.automata.pattern.output import returns as output_of
from cesar.automata.pattern.placing import (
    BETWEEN_ENDS,
    Negation,
    Step,
    keys_of,
    place,
    variable,
)
from cesar.automata.schema import AttrType, StreamSchema, TimeUnit
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
    conjoin,
    conjuncts_of,
    map_pred,
    map_term,
    to_cel,
)
from cesar.automata.timeparts import TICKS_PARTS
from cesar.automata.translate import _some, common_zone, duration_ticks
from cesar.automata.typecheck import check_pred, infer_type

_WHOLE = (Index.LEN, Index.ALL, Index.UPTO_PREVIOUS)
"""Indices that read no single event, so no window of one."""

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
        steps, negations = place(where, positive, self.named, self.refs, pattern.operator)
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
        returns = output_of(self, positive)
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
            return self.leaf(Ref(var, index, window.name), call.pos)

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
        for component in self.named:
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
            first = self.leaf(
                Ref(variable(anchor), Index.FIRST if anchor.kleene else Index.ONLY, test.attr), pos
            )
            self.ref_type(first)  # a match's partition reads it, even with no other component
            if test.value is not None:
                out.append(Cmp("=", first, test.value, pos))
            for component in self.named:
                indices = [Index.FIRST, Index.CURRENT] if component.kleene else [Index.ONLY]
                if component is anchor:
                    indices = indices[1:]
                for index in indices:
                    ref = self.leaf(Ref(variable(component), index, test.attr), pos)
                    out.append(Cmp("=", ref, first, pos))
        return out

    def leaf(self, ref: Ref, pos: Pos) -> Attr:
        """The leaf reading ``ref``, registering it."""
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
