"""The single-automaton runtime, epoch by epoch (Algorithm 1), on hand-made streams."""

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.evaluate import Faults
from cesar.automata.runtime import AutomatonState, Runner, process_epoch
from cesar.automata.schema import Event, parse_stream_spec
from tests.paper import QUERY_7, STOCK_VOL, TABLE_1, minutes

STOCK = parse_stream_spec(STOCK_VOL)
S = parse_stream_spec("S(k:string,v:int)")


def automaton_of(text, schemas=None):
    query = compile_query(text, schemas or {"S": S}, "q")
    return query.automata[-1]


def quote(name, price, volume, clock):
    t = minutes(clock)
    return Event.of("Stock", t, t, {"Name": name, "Price": float(price), "Volume": volume})


def s(t, k, v, t0=None):
    return Event.of("S", t if t0 is None else t0, t, {"k": k, "v": v})


def view(state, node, names):
    """The instances at ``node`` as (values of ``names``..., t0, t1), sorted."""
    return sorted((*(i.binding[n] for n in names), i.t0, i.t1) for i in state.at(node))


def test_query_7_follows_table_1_instance_by_instance():
    """Section 3.1, Table 1: the instances at states A, B and C after each event."""
    automaton = automaton_of(QUERY_7, {"Stock": STOCK})
    # Figure 2's states: A is the FOLD node, B the NEXT node, C the final node.
    a, b, c = 1, 2, automaton.final
    assert [n.id for n in automaton.nodes] == [0, a, b, c]
    at_a, at_b = ("company", "maxP", "minP"), ("company_1", "maxP_1", "minP_1")
    m = minutes
    # The paper shows minP as NULL until the first rebind; our left operand sets minP = Price.
    expected = [
        ([("IBM", 90.0, 90.0, m("9:10"), m("9:10"))], [], []),
        ([("IBM", 90.0, 85.0, m("9:10"), m("9:15"))], [], []),
        (
            [("Dell", 40.0, 40.0, m("9:17"), m("9:17")), ("IBM", 90.0, 85.0, m("9:10"), m("9:15"))],
            [],
            [],
        ),
        (
            [("Dell", 40.0, 40.0, m("9:17"), m("9:17")), ("IBM", 90.0, 81.0, m("9:10"), m("9:21"))],
            [("IBM", 90.0, 81.0, m("9:10"), m("9:21"))],
            [],
        ),
        (
            [("Dell", 40.0, 40.0, m("9:17"), m("9:17")), ("IBM", 90.0, 81.0, m("9:10"), m("9:21"))],
            [("IBM", 90.0, 81.0, m("9:10"), m("9:21"))],
            [],
        ),
        (
            [("Dell", 40.0, 40.0, m("9:17"), m("9:17"))],
            [],
            [("IBM", 90.0, 81.0, 91.0, m("9:10"), m("9:24"))],
        ),
    ]
    state = AutomatonState()
    for row, (want_a, want_b, want_c) in zip(TABLE_1, expected, strict=True):
        state, outputs = process_epoch(automaton, state, {"Stock": [quote(*row)]})
        assert view(state, a, at_a) == want_a, row
        assert view(state, b, at_b) == want_b, row
        assert state.at(c) == ()
        got_c = sorted(
            (*(e.attrs()[n] for n in ("company", "maxP", "minP", "finalP")), e.t0, e.t1)
            for e in outputs
        )
        assert got_c == want_c, row


def test_forall_filter_edge_sees_every_simultaneous_event():
    """e3' (IBM 99 at 9:17, with e3) makes I1 leave A: no IBM output at 9:24 (Section 3.1)."""
    automaton = automaton_of(QUERY_7, {"Stock": STOCK})
    epochs = [[quote(*row)] for row in TABLE_1]
    epochs[2].append(quote("IBM", 99, 8000, "9:17"))
    state, outputs = AutomatonState(), []
    for index, epoch in enumerate(epochs):
        state, out = process_epoch(automaton, state, {"Stock": epoch})
        outputs += out
        if index == 2:
            assert [i.binding["company"] for i in state.at(1)] == ["Dell"]
    assert outputs == []


def test_exists_edges_spawn_one_instance_per_satisfying_event():
    automaton = automaton_of("S NEXT{} S")
    state, _ = process_epoch(automaton, AutomatonState(), {"S": [s(1, "a", 1), s(1, "b", 2)]})
    assert view(state, 1, ("k_1",)) == [("a", 1, 1), ("b", 1, 1)]
    state, out = process_epoch(automaton, state, {"S": [s(2, "c", 3), s(2, "d", 4)]})
    assert len(out) == 4
    assert view(state, 1, ("k_1",)) == [("c", 2, 2), ("d", 2, 2)]


def test_changes_are_installed_at_the_end_of_the_epoch():
    """Two simultaneous events never pair: the instance one spawns is not visible to the other."""
    automaton = automaton_of("S NEXT{} S")
    _, out = process_epoch(automaton, AutomatonState(), {"S": [s(1, "a", 1), s(1, "b", 2)]})
    assert out == []


def test_an_event_affects_an_instance_only_if_it_starts_after_the_instance_ends():
    automaton = automaton_of("S NEXT{} S")
    state, _ = process_epoch(automaton, AutomatonState(), {"S": [s(3, "a", 1)]})
    state, out = process_epoch(automaton, state, {"S": [s(5, "long", 2, t0=3)]})
    assert out == []
    assert view(state, 1, ("k_1",)) == [("a", 3, 3), ("long", 3, 5)]
    state, out = process_epoch(automaton, state, {"S": [s(6, "b", 3, t0=4)]})
    assert [(e.t0, e.t1, e.attrs()["k_1"]) for e in out] == [(3, 6, "a")]


def test_process_epoch_leaves_its_input_state_alone():
    automaton = automaton_of("S NEXT{} S")
    first, _ = process_epoch(automaton, AutomatonState(), {"S": [s(1, "a", 1)]})
    before = dict(first.instances)
    process_epoch(automaton, first, {"S": [s(2, "b", 2)]})
    assert first.instances == before
    assert first.count() == 1


def test_a_faulting_right_operand_event_neither_kills_nor_extends():
    """1 / v faults for v = 0: that event is not in the right operand at all."""
    automaton = automaton_of("S NEXT{} (SELECT k, 1 / v AS inv FROM S)")
    faults = Faults()
    state, _ = process_epoch(automaton, AutomatonState(), {"S": [s(1, "a", 5)]}, faults)
    state, out = process_epoch(automaton, state, {"S": [s(2, "zero", 0)]}, faults)
    assert out == []
    assert ("a", 1, 1) in view(state, 1, ("k_1",))
    assert faults.arithmetic > 0
    state, out = process_epoch(automaton, state, {"S": [s(3, "b", 1)]}, faults)
    assert ("a", "b") in {(e.attrs()["k_1"], e.attrs()["k"]) for e in out}


def test_a_faulting_aggregate_ends_the_run_without_extending_it():
    automaton = automaton_of("(SELECT *, 1 AS r FROM S) FOLD{, , $.r / ($2.v - 2) AS r} S")
    state, _ = process_epoch(automaton, AutomatonState(), {"S": [s(1, "a", 7)]})
    state, out = process_epoch(automaton, state, {"S": [s(2, "b", 2)]})
    assert out == []
    assert view(state, 1, ("k",)) == [("b", 2, 2)]


def test_runner_feeds_derived_streams_in_the_same_epoch():
    """Pairs end at t = 2; After pairs them with S events from t = 3 on, as the reference does."""
    program_text = {
        "pairs": "S NEXT{$1.k = $2.k} S PUBLISH Pairs",
        "after": "(SELECT k AS p FROM Pairs) NEXT{$1.p = $2.k} S PUBLISH After",
    }
    pairs = compile_query(program_text["pairs"], {"S": S}, "pairs")
    after = compile_query(program_text["after"], {"S": S, "Pairs": pairs.output}, "after")
    runner = Runner([*pairs.automata, *after.automata])
    assert runner.process([s(1, "a", 1)]) == []
    assert [e.stream for e in runner.process([s(2, "a", 2)])] == ["Pairs"]
    assert sorted(e.stream for e in runner.process([s(3, "a", 3)])) == ["After", "Pairs"]


def test_runner_rejects_epochs_out_of_order():
    runner = Runner(compile_query("S", {"S": S}, "q").automata)
    runner.process([s(2, "a", 1)])
    with pytest.raises(ValueError, match="epoch"):
        runner.process([s(2, "b", 1)])
    with pytest.raises(ValueError, match="epoch"):
        runner.process([s(3, "b", 1), s(4, "c", 1)])


def test_runner_counts_its_work():
    runner = Runner(compile_query("S NEXT{} S", {"S": S}, "q").automata)
    runner.run([s(1, "a", 1), s(2, "b", 2), s(2, "c", 3)])
    counters = runner.counters
    assert (counters.epochs, counters.events, counters.outputs) == (2, 3, 2)
    # epoch 1: ε; epoch 2: ε and the instance from t = 1.
    assert counters.instances_touched == 3
    # ε × 1 start edge × 1 event, then ε × 2 events and the instance × 2 edges × 2 events.
    assert counters.edge_checks == 1 + 2 + 4
    assert counters.spawned == 3
