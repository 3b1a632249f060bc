"""The static conjunct index (FR, AN) against brute force, with check_valid after every change."""

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.normal import Conjunct
from cesar.automata.schema import AttrType
from cesar.automata.terms import Attr, Cmp, Const, Scope
from cesar.index.static import ConjunctRegistry, StaticIndex

OPS = ["=", "!=", "<", "<=", ">", ">="]
atoms = st.builds(
    lambda name, op, value: Cmp(op, Attr(Scope.EVENT, name), Const(value, AttrType.INT)),
    st.sampled_from(["x", "y"]),
    st.sampled_from(OPS),
    st.integers(0, 5),
)
conjuncts = st.lists(atoms, max_size=3, unique=True).map(
    lambda items: Conjunct(tuple(sorted(items, key=repr)))
)
events = st.fixed_dictionaries({"x": st.integers(-1, 6), "y": st.integers(-1, 6)})
PY = {
    "=": int.__eq__,
    "!=": int.__ne__,
    "<": int.__lt__,
    "<=": int.__le__,
    ">": int.__gt__,
    ">=": int.__ge__,
}


def satisfied(conjunct, attrs):
    return all(PY[a.op](attrs[a.left.name], a.right.value) for a in conjunct.atoms)


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.booleans(), conjuncts, st.integers(0, 3)), max_size=25),
    st.lists(events, min_size=1, max_size=5),
)
def test_probe_returns_exactly_the_satisfied_conjuncts(operations, probes):
    index = StaticIndex()
    model: dict[Conjunct, set[int]] = {}
    for add, conjunct, payload in operations:
        if add:
            index.add(conjunct, payload)
            model.setdefault(conjunct, set()).add(payload)
        elif payload in model.get(conjunct, set()):
            index.remove(conjunct, payload)
            model[conjunct].discard(payload)
            if not model[conjunct]:
                del model[conjunct]
        index.check_valid()
        assert len(index) == len(model)
    for attrs in probes:
        got = [(entry.conjunct, frozenset(entry.payloads)) for entry in index.probe(attrs)]
        assert len(got) == len({c for c, _ in got}), "an entry was returned twice"
        expected = {(c, frozenset(p)) for c, p in model.items() if satisfied(c, attrs)}
        assert set(got) == expected


@settings(max_examples=200)
@given(
    st.lists(st.tuples(st.sampled_from(["S", "T"]), st.lists(conjuncts, max_size=3)), max_size=8),
    events,
)
def test_registry_reports_each_key_and_conjunct_position(edges, attrs):
    registry = ConjunctRegistry()
    for key, (stream, statics) in enumerate(edges):
        registry.add(key, stream, tuple(statics))
        registry.check_valid()
    for stream in ("S", "T"):
        expected = {}
        for key, (edge_stream, statics) in enumerate(edges):
            positions = [p for p, c in enumerate(statics) if satisfied(c, attrs)]
            if edge_stream == stream and positions:
                expected[key] = positions
        got = {k: sorted(v) for k, v in registry.probe(stream, attrs).items()}
        assert got == expected
    for key in range(len(edges)):
        registry.remove(key)
        registry.check_valid()
    assert len(registry) == 0 and registry.conjuncts() == 0
