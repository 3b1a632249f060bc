"""Edge templates: an edge with its constants lifted out, so equal shapes share (Section 4.2).

Subscriptions of a pub/sub service come from a few shapes with different
constants (a ticker, a threshold, a window).  Section 4.2 merges automata only
where their edges are equal; lifting the constants out of each edge's
predicate first lets the merged DAG share a node wherever the *shapes* agree,
each subscription keeping its own constants beside the shared edge.

:func:`template` replaces every constant of an edge's DNF conjuncts (static
and dynamic parts, in order) by a :class:`~cesar.automata.terms.Param`
numbered by position and returns the constants; guards and the attribute map
keep their constants (they are part of the shape).  Parameter ``?i`` stands
for the i-th constant, so an engine evaluating the template with a
subscription's constants decides exactly what the original edge does.

>>> from cesar.automata.compiler import compile_query
>>> from cesar.automata.schema import parse_stream_spec
>>> from cesar.automata.terms import to_cel
>>> S = {"S": parse_stream_spec("S(Name:string,Price:float)")}
>>> def first_edge(text):
...     return compile_query(text, S, "q").automata[0].edges[0]
>>> ibm, msft = template(first_edge("FILTER{Name = 'IBM' AND Price > 10.0} S")), template(
...     first_edge("FILTER{Name = 'MSFT' AND Price > 12.5} S"))
>>> ibm[0] == msft[0], ibm[1], msft[1]
(True, ('IBM', 10.0), ('MSFT', 12.5))
>>> to_cel(ibm[0].conjuncts[0].static.pred())
'Name = ?0 AND Price > ?1'
"""

from __future__ import annotations

from dataclasses import replace

from cesar.automata.automaton import Edge, SplitConjunct
from cesar.automata.normal import Conjunct
from cesar.automata.schema import Value
from cesar.automata.terms import FALSE, Cmp, Const, Leaf, Or, Param, Pred, Term, map_pred

Constants = tuple[Value, ...]
"""An edge's constants, in the order of the template's parameters."""


def template(edge: Edge) -> tuple[Edge, Constants]:
    """The edge with its conjuncts' constants replaced by parameters, and those constants.

    The template's ``pred`` is the disjunction of its conjuncts (the original
    ``pred`` holds the constants).  O(size of the predicate).
    """
    constants: list[Value] = []

    def lift(leaf: Leaf) -> Term:
        if isinstance(leaf, Const):
            constants.append(leaf.value)
            return Param(len(constants) - 1, leaf.type)
        return leaf

    def lift_conjunct(conjunct: Conjunct) -> Conjunct:
        atoms = []
        for atom in conjunct.atoms:
            lifted = map_pred(atom, lift)
            assert isinstance(lifted, Cmp)
            atoms.append(lifted)
        return Conjunct(tuple(atoms))

    conjuncts = tuple(
        SplitConjunct(lift_conjunct(c.static), lift_conjunct(c.dynamic)) for c in edge.conjuncts
    )
    whole: list[Pred] = [Conjunct(c.static.atoms + c.dynamic.atoms).pred() for c in conjuncts]
    pred: Pred = FALSE if not whole else whole[0] if len(whole) == 1 else Or(tuple(whole))
    return replace(edge, pred=pred, conjuncts=conjuncts), tuple(constants)
