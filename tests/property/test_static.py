"""The static conjunct index (FR, AN) and the atom pool against models, check_valid after each."""

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cesar.index.static import AtomPool, Atoms, ConjunctIndex, StaticIndex
from tests.strategies import OPS

atoms = st.tuples(
    st.sampled_from(["x", "y"]),
    st.sampled_from(sorted(OPS)),
    st.integers(0, 5) | st.just(float("nan")),
)
conjuncts = st.lists(atoms, max_size=3, unique=True).map(
    lambda items: tuple(sorted(items, key=repr))
)
events = st.fixed_dictionaries(
    {"x": st.integers(-1, 6) | st.just(float("nan")), "y": st.integers(-1, 6)}
)


def satisfied(conjunct: Atoms, attrs: dict) -> bool:
    return all(OPS[op](attrs[name], const) for name, op, const in conjunct)


class StaticIndexMachine(RuleBasedStateMachine):
    """add / remove / probe on a StaticIndex against a dict of conjunct → payloads."""

    def __init__(self) -> None:
        super().__init__()
        self.index = StaticIndex()
        self.model: dict[Atoms, set[int]] = {}

    @rule(conjunct=conjuncts, payload=st.integers(0, 3))
    def add(self, conjunct: Atoms, payload: int) -> None:
        self.index.add(conjunct, payload)
        self.model.setdefault(conjunct, set()).add(payload)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        conjunct = data.draw(st.sampled_from(sorted(self.model, key=repr)))
        payload = data.draw(st.sampled_from(sorted(self.model[conjunct])))
        self.index.remove(conjunct, payload)
        self.model[conjunct].discard(payload)
        if not self.model[conjunct]:
            del self.model[conjunct]

    @rule(attrs=events)
    def probe(self, attrs: dict) -> None:
        got = [(entry.atoms, frozenset(entry.payloads)) for entry in self.index.probe(attrs)]
        assert len(got) == len({c for c, _ in got}), "an entry was returned twice"
        expected = {(c, frozenset(p)) for c, p in self.model.items() if satisfied(c, attrs)}
        assert set(got) == expected

    @invariant()
    def valid(self) -> None:
        self.index.check_valid()
        assert len(self.index) == len(self.model)


TestStaticIndex = StaticIndexMachine.TestCase
TestStaticIndex.settings = settings(max_examples=200, stateful_step_count=30)


class ConjunctIndexMachine(RuleBasedStateMachine):
    """Keys with their conjuncts on two streams against a dict of key → (stream, conjuncts)."""

    def __init__(self) -> None:
        super().__init__()
        self.index: ConjunctIndex[int] = ConjunctIndex()
        self.model: dict[int, tuple[str, tuple[Atoms, ...]]] = {}

    @rule(
        key=st.integers(0, 6),
        stream=st.sampled_from(["S", "T"]),
        statics=st.lists(conjuncts, max_size=3),
    )
    def add(self, key: int, stream: str, statics: list[Atoms]) -> None:
        if key in self.model:
            return
        self.index.add(key, stream, tuple(statics))
        self.model[key] = (stream, tuple(statics))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.model)))
        self.index.remove(key)
        del self.model[key]

    @rule(stream=st.sampled_from(["S", "T"]), attrs=events)
    def probe(self, stream: str, attrs: dict) -> None:
        expected = {}
        for key, (key_stream, statics) in self.model.items():
            positions = [p for p, c in enumerate(statics) if satisfied(c, attrs)]
            if key_stream == stream and positions:
                expected[key] = positions
        got = {k: sorted(v) for k, v in self.index.probe(stream, attrs).items()}
        assert got == expected

    @invariant()
    def valid(self) -> None:
        self.index.check_valid()
        assert len(self.index) == len(self.model)
        assert all(key in self.index for key in self.model)


TestConjunctIndex = ConjunctIndexMachine.TestCase
TestConjunctIndex.settings = settings(max_examples=200, stateful_step_count=30)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.booleans(), conjuncts), max_size=30), st.data())
def test_an_atom_pool_shares_equal_atoms_and_drops_them_with_their_last_holder(steps, data):
    pool, held = AtomPool(), []
    for hold, conjunct in steps:
        if hold or not held:
            pooled = pool.hold(conjunct)
            assert pooled == conjunct or any(a != a for _, _, a in conjunct)  # NaN ≠ NaN
            assert all(x is y for x, y in zip(pooled, pool.hold(pooled), strict=True))
            held += [pooled, pooled]
        else:
            pool.release(held.pop(data.draw(st.integers(0, len(held) - 1))))
        pool.check_valid(held)
    for atoms in held:
        pool.release(atoms)
    assert len(pool) == 0
