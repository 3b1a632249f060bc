"""The AI index (add, remove, rebind) with the engine's access atom, against brute force."""

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from cesar.automata.normal import Conjunct
from cesar.automata.terms import Attr, Cmp, Scope
from cesar.index.ai import InstanceIndex
from cesar.server.engine.edges import access_atom

PY = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


@dataclass
class Inst:
    id: int
    binding: dict


def conjunct(op, flipped):
    left, right = Attr(Scope.LEFT, "b"), Attr(Scope.EVENT, "v")
    return Conjunct((Cmp(op, right, left) if flipped else Cmp(op, left, right),))


FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@settings(max_examples=300)
@given(
    st.sampled_from(sorted(PY)),
    st.booleans(),
    st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "rebind"]), st.integers(0, 12), st.integers(0, 4)
        ),
        max_size=30,
    ),
    st.lists(st.integers(-1, 5), min_size=1, max_size=4),
)
def test_probe_yields_exactly_the_instances_the_access_atom_holds_for(op, flipped, ops, probes):
    index = InstanceIndex((access_atom(conjunct(op, flipped)), access_atom(Conjunct(()))))
    model: dict[int, Inst] = {}
    for action, ident, value in ops:
        if action == "add" and ident not in model:
            model[ident] = Inst(ident, {"b": value})
            index.add(model[ident])
        elif action == "remove" and ident in model:
            index.remove(model.pop(ident))
        elif action == "rebind" and ident in model:
            index.rebind(model[ident], {"b": value})
            assert model[ident].binding == {"b": value}
        index.check_valid()
        assert len(index) == len(model)
        assert [i.id for i in index.instances()] == list(model)  # rebinding keeps the order
    access = access_atom(conjunct(op, flipped))
    assert access is not None and access.bound == "b"
    # The atom reads "$1.b op v" or "v op $1.b": the access op is instance-first.
    instance_first = FLIP[op] if flipped else op
    assert access.op == instance_first
    for value in probes:
        got = sorted(i.id for i in index.probe(0, {"v": value}))
        expected = sorted(
            i for i, inst in model.items() if PY[instance_first](inst.binding["b"], value)
        )
        assert got == expected
        assert sorted(i.id for i in index.probe(1, {"v": value})) == sorted(model)
