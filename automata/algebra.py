"""The CESAR algebra (Section 2): σ, π, ρ, α, ∪, ;θ and μ as frozen dataclasses.

Each operator node knows its output attributes (schema inference) and checks
its inputs when built; a violation raises :class:`AlgebraError`.  Predicates
inside nodes are in canonical form (:mod:`cesar.automata.normal`), so two nodes built
from equivalent text compare equal.

Attribute references carry scopes: in σ and α they read the event itself
(``Scope.EVENT``); in ;θ, ``$1`` reads the left event and ``$2`` the right one;
in μ, ``$1`` reads the left event as it entered the run, ``$`` the run's state
after its previous step and ``$2`` the new right event.  DUR is the duration of
the event the predicate judges: the selected event, the concatenation, or the
run extended by the new event.

>>> from cesar.automata.schema import AttrType as T
>>> stock = Source("Stock", (("Name", T.STRING), ("Price", T.FLOAT)))
>>> Seq(Rename(stock, (("Name", "Name_1"), ("Price", "Price_1"))), stock, TRUE).names
('Name_1', 'Price_1', 'Name', 'Price')
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from cesar.automata.schema import AttrType
from cesar.automata.terms import TRUE, Pred, Term, to_cel
from cesar.automata.typecheck import assignable

Columns = tuple[tuple[str, AttrType], ...]
FIRST_SUFFIX = "_1"
"""Suffix of the attributes that keep a FOLD run's first values (and NEXT's left values)."""


class AlgebraError(ValueError):
    """An operator applied to inputs whose schemas it cannot accept."""


def first_name(name: str) -> str:
    """The name under which μ keeps the run's first value of ``name``."""
    return name + FIRST_SUFFIX


@dataclass(frozen=True)
class Assign:
    """``name := term`` of type ``type``, as used by α and by μ's aggregates."""

    name: str
    term: Term
    type: AttrType

    def __str__(self) -> str:
        return f"{self.name} := {to_cel(self.term)}"


class _Node:
    """Every operator node has output ``attributes``; ``names`` lists them."""

    attributes: Columns

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.attributes)


@dataclass(frozen=True)
class Source(_Node):
    """A stream read by name (a base stream, or a derived stream for resubscription)."""

    name: str
    columns: Columns

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        return self.columns


@dataclass(frozen=True)
class Select(_Node):
    """σ_θ(E): the events of E that satisfy θ (scope ``EVENT``)."""

    input: Expr
    pred: Pred

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        return self.input.attributes


@dataclass(frozen=True)
class Project(_Node):
    """π_X(E): keeps the attributes X, in the order given."""

    input: Expr
    keep: tuple[str, ...]

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        types = dict(self.input.attributes)
        missing = [name for name in self.keep if name not in types]
        if missing or len(set(self.keep)) != len(self.keep):
            raise AlgebraError(f"cannot project {self.keep} from {tuple(types)}")
        return tuple((name, types[name]) for name in self.keep)


@dataclass(frozen=True)
class Rename(_Node):
    """ρ_f(E): renames attributes by the pairs (old, new); others keep their names."""

    input: Expr
    mapping: tuple[tuple[str, str], ...]

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        table = dict(self.mapping)
        unknown = set(table) - set(self.input.names)
        if unknown:
            raise AlgebraError(f"cannot rename missing attributes {sorted(unknown)}")
        out = tuple((table.get(name, name), typ) for name, typ in self.input.attributes)
        if len({name for name, _ in out}) != len(out):
            raise AlgebraError(f"renaming {self.mapping} makes two attributes share a name")
        return out


@dataclass(frozen=True)
class Introduce(_Node):
    """α_g(E): computes every assignment over the input event, simultaneously.

    A new name is appended; an existing name takes the new value and type.
    """

    input: Expr
    assignments: tuple[Assign, ...]

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        out = dict(self.input.attributes)
        for assign in self.assignments:
            out[assign.name] = assign.type
        return tuple(out.items())


@dataclass(frozen=True)
class Union(_Node):
    """E1 ∪ E2: both inputs must have the same attribute names and types."""

    left: Expr
    right: Expr

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        if dict(self.left.attributes) != dict(self.right.attributes):
            raise AlgebraError(
                f"union of incompatible schemas {self.left.attributes} and {self.right.attributes}"
            )
        return self.left.attributes


@dataclass(frozen=True)
class Seq(_Node):
    """E1 ;θ E2: each left event with its earliest-ending right successors satisfying θ.

    The output concatenates the two events; where both have an attribute, the
    right value overwrites the left (Section 2.2).
    """

    left: Expr
    right: Expr
    pred: Pred = TRUE

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        right = dict(self.right.attributes)
        out = [(name, right.get(name, typ)) for name, typ in self.left.attributes]
        left_names = set(self.left.names)
        out.extend((name, typ) for name, typ in self.right.attributes if name not in left_names)
        return tuple(out)


@dataclass(frozen=True)
class Fold(_Node):
    """μ(E1, E2): iteration with step predicate, keep predicate and aggregates (Section 2.3).

    The right schema must be a subset of the left.  A run starts from every
    left event; a step takes the earliest-ending right events after the run
    that satisfy ``step``; each that also satisfies ``keep`` extends the run:
    the right's attributes take its values and the aggregates are recomputed
    from the previous state.  Every extended run is output, with the first
    values of the right's attributes kept under ``name_1``.
    """

    left: Expr
    right: Expr
    step: Pred = TRUE
    keep: Pred = TRUE
    aggregates: tuple[Assign, ...] = ()

    @cached_property
    def attributes(self) -> Columns:  # type: ignore[override]
        left = dict(self.left.attributes)
        for name, typ in self.right.attributes:
            if name not in left or not assignable(typ, left[name]):
                raise AlgebraError(
                    f"μ needs the right schema inside the left: {name} {typ.value} is not "
                    f"on the left"
                )
        right_names = set(self.right.names)
        for assign in self.aggregates:
            if assign.name not in left or assign.name in right_names:
                raise AlgebraError(
                    f"aggregate {assign.name} must be a left attribute not on the right"
                )
        out = [
            (first_name(name) if name in right_names else name, typ) for name, typ in left.items()
        ]
        out.extend((name, left[name]) for name in self.right.names)
        if len({name for name, _ in out}) != len(out):
            raise AlgebraError("μ's first-value names collide with existing attributes")
        return tuple(out)


Expr = Source | Select | Project | Rename | Introduce | Union | Seq | Fold


def format_algebra(expr: Expr, indent: int = 0) -> str:
    """A readable, indented rendering of an algebra tree (used by ``cesar explain``).

    >>> from cesar.automata.schema import AttrType as T
    >>> print(format_algebra(Project(Source("S", (("a", T.INT), ("b", T.INT))), ("a",))))
    π[a]
      S(a:int, b:int)
    """
    pad = "  " * indent
    if isinstance(expr, Source):
        cols = ", ".join(f"{name}:{typ.value}" for name, typ in expr.columns)
        return f"{pad}{expr.name}({cols})"
    if isinstance(expr, Select):
        head, children = f"σ[{to_cel(expr.pred)}]", [expr.input]
    elif isinstance(expr, Project):
        head, children = f"π[{', '.join(expr.keep)}]", [expr.input]
    elif isinstance(expr, Rename):
        pairs = ", ".join(f"{old}→{new}" for old, new in expr.mapping)
        head, children = f"ρ[{pairs}]", [expr.input]
    elif isinstance(expr, Introduce):
        head, children = f"α[{', '.join(map(str, expr.assignments))}]", [expr.input]
    elif isinstance(expr, Union):
        head, children = "∪", [expr.left, expr.right]
    elif isinstance(expr, Seq):
        head, children = f";[{to_cel(expr.pred)}]", [expr.left, expr.right]
    else:
        aggs = ", ".join(map(str, expr.aggregates))
        head = f"μ[step: {to_cel(expr.step)}; keep: {to_cel(expr.keep)}; aggregates: {aggs or '-'}]"
        children = [expr.left, expr.right]
    return "\n".join([pad + head, *(format_algebra(child, indent + 1) for child in children)])
