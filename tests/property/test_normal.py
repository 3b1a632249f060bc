"""Canonical form and DNF keep a predicate's meaning, faults included."""

from hypothesis import given
from hypothesis import strategies as st

from cesar.automata.evaluate import Env, Faults, holds
from cesar.automata.normal import Canonical, canonical, dnf, split
from cesar.automata.terms import Scope
from tests.strategies import event_values, typed_preds


@given(typed_preds, event_values, st.integers(1, 5))
def test_canonical_and_dnf_preserve_truth(pred, values, dur):
    env = Env({Scope.EVENT: values}, dur)
    expected = holds(pred, env, Faults())
    assert holds(canonical(pred), env, Faults()) == expected
    conjuncts = dnf(pred, limit=10_000)
    assert any(all(holds(a, env, Faults()) for a in c.atoms) for c in conjuncts) == expected


@given(typed_preds)
def test_canonical_is_idempotent_and_dnf_is_sorted_and_unique(pred):
    once = canonical(pred)
    assert canonical(once) == once
    conjuncts = dnf(pred, limit=10_000)
    assert len(set(conjuncts)) == len(conjuncts)
    assert dnf(once, limit=10_000) == conjuncts


@given(st.lists(typed_preds, min_size=1, max_size=8))
def test_one_memo_over_many_predicates_gives_each_its_own_form(preds):
    """A compile's :class:`Canonical` sees many predicates; its memo must not leak one
    predicate's form into another's (the same forms and conjuncts as one memo each)."""
    forms = Canonical()
    for pred in preds + preds[::-1]:
        form = forms.pred(pred)
        assert form == canonical(pred)
        assert forms.conjuncts(form, limit=10_000) == dnf(pred, limit=10_000)


@given(typed_preds)
def test_split_partitions_each_conjunct(pred):
    for conjunct in dnf(pred, limit=10_000):
        static, dynamic = split(conjunct, Scope.EVENT)
        assert sorted(map(repr, static.atoms + dynamic.atoms)) == sorted(map(repr, conjunct.atoms))
        for atom in static.atoms:
            assert atom.left.scope is Scope.EVENT and type(atom.right).__name__ == "Const"
