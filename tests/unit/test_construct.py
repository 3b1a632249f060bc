"""The algebra → automaton construction (Sections 3.3–3.5): shapes, labels and resubscription."""

import pytest

from cesar.automata.automaton import EdgeKind, format_automaton, format_dot
from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import parse_stream_spec
from cesar.automata.terms import to_cel
from cesar.automata.translate import Options
from tests.paper import QUERY_7, STOCK_VOL

CATALOG = {
    "S": parse_stream_spec("S(k:string,v:int)"),
    "T": parse_stream_spec("T(k:string,v:int)"),
    "Stock": parse_stream_spec(STOCK_VOL),
}


def automata(text, **options):
    return compile_query(text, CATALOG, "q", Options(**options)).automata


def edges(automaton):
    return [(e.source, e.kind, e.target, e.stream) for e in automaton.edges]


def labels(edge):
    return [(to_cel(c.static.pred()), to_cel(c.dynamic.pred())) for c in edge.conjuncts]


F, R, W = EdgeKind.FORWARD, EdgeKind.REBIND, EdgeKind.FILTER


def test_base_automaton_is_one_forward_edge_with_the_selection_and_map():
    (a,) = automata("SELECT k, v * 2 AS w FROM FILTER{k = 'a' AND v > 1} S")
    assert edges(a) == [(0, F, 1, "S")]
    assert a.final == 1
    (edge,) = a.edges
    assert labels(edge) == [("k = 'a' AND v > 1", "TRUE")]
    assert [str(m) for m in edge.map] == ["k := k", "w := v * 2"]


def test_next_adds_a_filter_and_a_forward_edge_at_the_left_final_node():
    (a,) = automata("FILTER{v > 2} S NEXT{$1.k = $2.k} FILTER{v < 3} S")
    assert edges(a) == [(0, F, 1, "S"), (1, W, 1, "S"), (1, F, 2, "S")]
    filter_edge, forward = a.edges[1], a.edges[2]
    assert labels(filter_edge) == [("v < 3", "$1.k_1 = k")]
    assert labels(forward) == labels(filter_edge)
    assert [str(m) for m in forward.map] == ["k_1 := $1.k_1", "v_1 := $1.v_1", "k := k", "v := v"]


def test_a_selection_above_next_joins_only_the_forward_edge():
    (a,) = automata("FILTER{v > v_1}(S NEXT{} S)")
    filter_edge, forward = a.edges[1], a.edges[2]
    assert labels(filter_edge) == [("TRUE", "TRUE")]
    assert labels(forward) == [("TRUE", "$1.v_1 < v")]


def test_fold_has_filter_rebind_and_forward_edges_and_copies_first_values():
    (a,) = automata(QUERY_7)
    assert edges(a) == [
        (0, F, 1, "Stock"),
        (1, W, 1, "Stock"),
        (1, R, 1, "Stock"),
        (1, F, 2, "Stock"),
        (2, W, 2, "Stock"),
        (2, F, 3, "Stock"),
    ]
    start, filter_a, rebind, forward = a.edges[:4]
    assert labels(start) == [("Volume > 10000", "TRUE")]
    assert labels(filter_a) == [("TRUE", "$1.company = Name")]
    assert labels(rebind) == [("TRUE", "$1.company = Name AND $1.minP > Price")]
    assert labels(forward) == [("TRUE", "$1.company = Name AND $1.minP > Price AND DUR >= 10")]
    assert [n for n, _ in a.nodes[1].attributes] == [
        "company",
        "maxP",
        "minP",
        "company_1",
        "minP_1",
    ]
    assert "company_1 := Name" in [str(m) for m in start.map]


def test_fold_keeps_an_aggregate_first_value_only_when_dollar_one_reads_it():
    (plain,) = automata("(SELECT *, 0 AS n FROM S) FOLD{, , $.n + 1 AS n} S")
    assert "n@first" not in [n for n, _ in plain.nodes[1].attributes]
    (read,) = automata("(SELECT *, 0 AS n FROM S) FOLD{, $.n = $1.n, $.n + 1 AS n} S")
    assert "n@first" in [n for n, _ in read.nodes[1].attributes]
    assert labels(read.edges[2]) == [("TRUE", "$1.n = $1.n@first")]


def test_union_shares_the_start_node_and_merges_the_final_nodes():
    (a,) = automata("FILTER{v > 1} S UNION T")
    assert edges(a) == [(0, F, 1, "S"), (0, F, 1, "T")]
    (b,) = automata("(S NEXT{} S) UNION (T NEXT{} T)")
    assert len(b.nodes) == 4
    assert [e.target for e in b.edges if e.kind is F and e.source != 0] == [b.final, b.final]


def test_states_grow_linearly_with_the_query():
    for length in (1, 2, 5, 10):
        text = " NEXT{} ".join([f"(SELECT k AS k{i}, v AS v{i} FROM S)" for i in range(length)])
        (a,) = automata(text)
        assert len(a.nodes) == length + 1
        assert len(a.edges) == 1 + 2 * (length - 1)


def test_right_operand_duration_is_the_event_s_own():
    (a,) = automata("S NEXT{DUR > 5} FILTER{DUR > 1} S")
    assert labels(a.edges[1]) == [("TRUE", "DUR > 5 AND DUR($2) > 1")]


def test_a_nested_right_operand_is_resubscribed():
    text = (
        "(SELECT k AS a, v AS b FROM S) NEXT{$2.v > $1.b} "
        "((SELECT k AS c FROM S) NEXT{} FILTER{v > 0} S) PUBLISH Nested"
    )
    inner, outer = automata(text)
    assert inner.internal and not outer.internal
    assert inner.name == "Nested#1"
    assert inner.output.names == ("c", "k", "v")
    assert edges(inner) == [(0, F, 1, "S"), (1, W, 1, "S"), (1, F, 2, "S")]
    assert edges(outer) == [(0, F, 1, "S"), (1, W, 1, "Nested#1"), (1, F, 2, "Nested#1")]
    assert outer.reads == {"S", "Nested#1"}


def test_disjunctions_split_into_conjuncts_with_static_and_dynamic_parts():
    (a,) = automata("S NEXT{($2.k = 'a' OR $2.v >= 3) AND $1.v < $2.v} S")
    assert labels(a.edges[1]) == [("k = 'a'", "$1.v_1 < v"), ("v >= 3", "$1.v_1 < v")]


def test_a_compiled_predicate_over_the_dnf_limit_is_a_positioned_error():
    text = "S NEXT{($2.v = 1 OR $2.v = 2) AND ($2.k = 'a' OR $2.k = 'b')} FILTER{v = 3 OR v = 4} S"
    with pytest.raises(CelSemanticError, match="more than the limit of 4") as info:
        automata(text, dnf_limit=4)
    assert (info.value.line, info.value.column) == (1, 1)


def test_listing_and_dot_name_every_node_and_edge():
    (a,) = automata(QUERY_7)
    listing = format_automaton(a)
    assert "q0 (start)" in listing and "q3 (final)" in listing
    assert listing.count("∀ FILTER") == 2 and listing.count("∃ REBIND") == 1
    dot = format_dot((a,))
    assert dot.count("->") == len(a.edges)
    assert 'a0q3 [label="q3", shape=doublecircle]' in dot
