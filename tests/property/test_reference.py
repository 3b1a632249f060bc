"""Laws and definitions the reference evaluator must satisfy on random streams.

The streams have durations and simultaneous events.  Each property restates a
definition of Section 2 independently of how ``automata.reference`` computes it.
"""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from cesar.automata import algebra as alg
from cesar.automata.evaluate import Env, Faults, holds
from cesar.automata.reference import evaluate
from cesar.automata.schema import AttrType, Event
from cesar.automata.terms import And, Arith, Attr, Cmp, Const, Dur, Scope, conjoin, map_pred
from tests.strategies import streams

COLUMNS = (("k", AttrType.STRING), ("v", AttrType.INT))
S = alg.Source("S", COLUMNS)
T = alg.Source("T", COLUMNS)
LEFT_S = alg.Rename(S, (("k", "k_1"), ("v", "v_1")))


def i(value):
    return Const(value, AttrType.INT)


def left(name):
    return Attr(Scope.LEFT, name)


def right(name):
    return Attr(Scope.RIGHT, name)


SEQ_ATOMS = [
    Cmp("=", left("k_1"), right("k")),
    Cmp(">", right("v"), left("v_1")),
    Cmp(">=", right("v"), i(2)),
    Cmp("<=", Dur(), i(4)),
    Cmp("!=", Arith("%", right("v"), i(2)), i(0)),
]
seq_preds = st.lists(st.sampled_from(SEQ_ATOMS), max_size=3).map(lambda atoms: conjoin(*atoms))
EVENT_ATOMS = [
    Cmp("=", Attr(Scope.EVENT, "k"), Const("a", AttrType.STRING)),
    Cmp(">", Attr(Scope.EVENT, "v"), i(1)),
    Cmp("<", Dur(), i(3)),
]
event_preds = st.lists(st.sampled_from(EVENT_ATOMS), max_size=2).map(lambda a: conjoin(*a))


def bag(events):
    return Counter(events)


def inputs(s, t):
    return {"S": s, "T": [Event.of("T", e.t0, e.t1, e.attrs()) for e in t]}


def pair_env(x, y):
    renamed = {f"{key}_1": value for key, value in x.attrs().items()}
    return Env({Scope.LEFT: renamed, Scope.RIGHT: y.attrs()}, y.t1 - x.t0 + 1)


@given(streams(), streams(), seq_preds)
def test_seq_matches_the_definition(s, t, pred):
    """S1 ;θ S2 = {e1ˆe2 ⊨ θ | e2 after e1, ∄ e' ∈ S2 after e1, e'.END < e2.END, e1ˆe' ⊨ θ}."""
    t = [Event.of("T", e.t0, e.t1, e.attrs()) for e in t]
    expected = []
    for x in s:
        for y in t:
            if y.t0 <= x.t1 or not holds(pred, pair_env(x, y), Faults()):
                continue
            blocked = any(
                z.t0 > x.t1 and z.t1 < y.t1 and holds(pred, pair_env(x, z), Faults()) for z in t
            )
            if not blocked:
                values = {"k_1": x.attrs()["k"], "v_1": x.attrs()["v"], **y.attrs()}
                expected.append(Event.of("out", x.t0, y.t1, values))
    assert bag(evaluate(alg.Seq(LEFT_S, T, pred), inputs(s, t))) == bag(expected)


@given(streams(), event_preds, event_preds)
def test_selections_compose(s, p, q):
    both = evaluate(alg.Select(alg.Select(S, p), q), {"S": s})
    assert bag(both) == bag(evaluate(alg.Select(S, And((p, q))), {"S": s}))


@given(streams(), streams(), event_preds)
def test_selection_distributes_over_union(s, t, p):
    streams_ = inputs(s, t)
    union = evaluate(alg.Select(alg.Union(S, T), p), streams_)
    parts = evaluate(alg.Select(S, p), streams_) + evaluate(alg.Select(T, p), streams_)
    assert bag(union) == bag(parts)
    assert len(evaluate(alg.Union(S, S), streams_)) == 2 * len(s)


@given(streams(), streams(), streams(name="U"), seq_preds)
def test_seq_distributes_over_union_on_the_left(s, t, u, pred):
    streams_ = {**inputs(s, t), "U": u}
    union_left = alg.Rename(alg.Union(S, alg.Source("U", COLUMNS)), (("k", "k_1"), ("v", "v_1")))
    together = evaluate(alg.Seq(union_left, T, pred), streams_)
    u_left = alg.Rename(alg.Source("U", COLUMNS), (("k", "k_1"), ("v", "v_1")))
    apart = evaluate(alg.Seq(LEFT_S, T, pred), streams_) + evaluate(
        alg.Seq(u_left, T, pred), streams_
    )
    assert bag(together) == bag(apart)


@given(
    st.lists(st.integers(0, 12), unique=True, max_size=6),
    st.lists(st.integers(0, 12), unique=True, max_size=6),
)
def test_fold_with_true_predicates_emits_every_prefix(left_times, right_times):
    """With TRUE predicates and distinct point events, a run from x extends by every later event."""
    s = [Event.of("S", t, t, {"k": "a", "v": t}) for t in sorted(left_times)]
    t = [Event.of("T", t, t, {"k": "a", "v": t}) for t in sorted(right_times)]
    out = evaluate(alg.Fold(S, T), inputs(s, t))
    expected = Counter()
    for x in left_times:
        later = sorted(r for r in right_times if r > x)
        for index, end in enumerate(later):
            expected[(x, end, later[index])] += 1
    assert Counter((e.t0, e.t1, e.attrs()["v"]) for e in out) == expected


STEP_ATOMS = [
    Cmp("=", Attr(Scope.STATE, "k"), right("k")),
    Cmp(">", right("v"), Attr(Scope.STATE, "v")),
    Cmp(">=", right("v"), left("v")),
    Cmp("<=", Dur(), i(5)),
]
step_preds = st.lists(st.sampled_from(STEP_ATOMS), max_size=2).map(lambda a: conjoin(*a))
KEEP_ATOMS = [Cmp("!=", right("v"), i(3)), Cmp("<", Attr(Scope.STATE, "n"), i(2))]
keep_preds = st.lists(st.sampled_from(KEEP_ATOMS), max_size=2).map(lambda a: conjoin(*a))
COUNTED = alg.Introduce(S, (alg.Assign("n", i(0), AttrType.INT),))
STEP_COUNT = (alg.Assign("n", Arith("+", Attr(Scope.STATE, "n"), i(1)), AttrType.INT),)


RENAMED = {"k": "k_1", "v": "v_1"}


def as_seq(pred):
    """A first-step μ predicate as a ;θ predicate: before the first step $ and $1 are both x."""

    def to_left(leaf):
        if isinstance(leaf, Attr) and leaf.scope in (Scope.STATE, Scope.LEFT):
            return Attr(Scope.LEFT, RENAMED.get(leaf.name, leaf.name))
        return leaf

    return map_pred(pred, to_left)


@given(streams(), streams(), step_preds, keep_preds)
def test_fold_first_step_is_a_conditional_sequence(s, t, step, keep):
    """S[1] = σ_keep(S[0] ;step S2), with the step count n = 1 marking first steps."""
    streams_ = inputs(s, t)
    fold = evaluate(alg.Fold(COUNTED, T, step, keep, STEP_COUNT), streams_)
    first_steps = Counter(
        (e.t0, e.t1, e.attrs()["k_1"], e.attrs()["v_1"], e.attrs()["k"], e.attrs()["v"])
        for e in fold
        if e.attrs()["n"] == 1
    )
    renamed = alg.Rename(COUNTED, (("k", "k_1"), ("v", "v_1")))
    seq = evaluate(alg.Seq(renamed, T, as_seq(step)), streams_)
    keep_as_seq = as_seq(keep)
    expected = Counter()
    for e in seq:
        values = e.attrs()
        env = Env(
            {Scope.LEFT: values, Scope.RIGHT: {"k": values["k"], "v": values["v"]}}, e.t1 - e.t0 + 1
        )
        if holds(keep_as_seq, env, Faults()):
            expected[(e.t0, e.t1, values["k_1"], values["v_1"], values["k"], values["v"])] += 1
    assert first_steps == expected


@given(streams(), streams(), step_preds, keep_preds)
def test_fold_runs_grow_one_step_at_a_time(s, t, step, keep):
    fold = evaluate(alg.Fold(COUNTED, T, step, keep, STEP_COUNT), inputs(s, t))
    runs = {(e.t0, e.attrs()["k_1"], e.attrs()["v_1"], e.attrs()["n"], e.t1) for e in fold}
    for t0, k, v, n, t1 in runs:
        assert n >= 1
        if n > 1:
            assert any((t0, k, v, n - 1) == (a, b, c, d) and end < t1 for a, b, c, d, end in runs)
    assert all(e.t1 > e.t0 for e in fold)
