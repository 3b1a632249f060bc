"""The merged query DAG: prefix sharing, parallel edges, reference counts, no-merge mode."""

from cesar.automata.compiler import compile_query
from cesar.automata.schema import parse_stream_spec
from cesar.server.engine.dag import ROOT, QueryDag

CATALOG = {"S": parse_stream_spec("S(k:string,v:int)"), "T": parse_stream_spec("T(k:string,v:int)")}


def automaton(text, name="q"):
    return compile_query(text, CATALOG, name).automata[-1]


def test_equal_prefixes_share_nodes_and_edges_and_removal_keeps_the_other():
    dag = QueryDag()
    a = dag.add(automaton("FILTER{v > 1} S NEXT{$1.k = $2.k} S", "a"))
    b = dag.add(automaton("FILTER{v = 2}(FILTER{v > 1} S NEXT{$1.k = $2.k} S)", "b"))
    dag.check_valid()
    assert a.nodes[1] == b.nodes[1] and a.nodes[2] != b.nodes[2]
    assert len(dag.nodes) == 4 and len(dag.edges) == 4
    assert dag.levels() == {1: 1, 2: 2}
    dag.remove(a)
    dag.check_valid()
    assert len(dag.nodes) == 3 and len(dag.edges) == 3
    assert dag.nodes[b.nodes[1]].refs == 1
    dag.remove(b)
    dag.check_valid()
    assert list(dag.nodes) == [ROOT] and not dag.edges


def test_a_different_filter_loop_prevents_sharing_the_node():
    dag = QueryDag()
    a = dag.add(automaton("S NEXT{$1.k = $2.k} S", "a"))
    b = dag.add(automaton("S NEXT{$1.v < $2.v} S", "b"))
    dag.check_valid()
    assert a.nodes[1] != b.nodes[1]


def test_subscriptions_equal_up_to_constants_share_the_final_node():
    dag = QueryDag()
    a = dag.add(automaton("FILTER{v > 1} S", "a"))
    b = dag.add(automaton("FILTER{v > 2} S", "b"))
    assert a.final == b.final and a.edges == b.edges
    assert (a.constants, b.constants) == (((1,),), ((2,),))
    assert a.created_nodes and not b.created_nodes
    dag.remove(a)
    assert dag.nodes[b.final].refs == 1
    dag.check_valid()


def test_two_nodes_of_one_automaton_never_merge():
    dag = QueryDag()
    both = dag.add(automaton("FILTER{v > 1} S NEXT{} S UNION FILTER{v > 2} S NEXT{} S", "u"))
    dag.check_valid()
    assert len(set(both.nodes)) == len(both.nodes)


def test_union_of_a_stream_with_itself_keeps_two_parallel_edges():
    dag = QueryDag()
    placement = dag.add(automaton("S UNION S"))
    dag.check_valid()
    assert len(dag.nodes[placement.final].entering) == 2
    assert len(set(placement.edges)) == 2


def test_without_merging_every_automaton_has_its_own_nodes():
    dag = QueryDag(merge=False)
    a = dag.add(automaton("FILTER{v > 1} S", "a"))
    b = dag.add(automaton("FILTER{v > 1} S", "b"))
    dag.check_valid()
    assert a.final != b.final and len(dag.nodes) == 3


def test_automata_sharing_nothing_get_their_own_spaces_and_one_never_joins_two():
    dag = QueryDag()
    a = dag.add(automaton("FILTER{v > 1} S NEXT{} T", "a"))
    b = dag.add(automaton("FILTER{v > 1} T NEXT{} S", "b"))
    c = dag.add(automaton("FILTER{v > 5} S NEXT{} T", "c"))
    assert a.space != b.space and c.space == a.space and c.nodes == a.nodes
    both = dag.add(automaton("(FILTER{v > 1} S NEXT{} T) UNION (FILTER{v > 1} T NEXT{} S)", "both"))
    dag.check_valid()
    shared = set(both.nodes) & (set(a.nodes) | set(b.nodes))
    assert shared - {ROOT}, "it shares the nodes of one space"
    assert all(dag.nodes[n].space == both.space for n in both.nodes if n != ROOT)
    assert both.space in (a.space, b.space)
    assert not set(both.nodes) & set(a.nodes if both.space == b.space else b.nodes) - {ROOT}


def test_nodes_whose_timeouts_publish_differently_are_not_shared():
    """Two patterns equal but for their after-match policy wait out the same trailing
    negation at equal nodes, and publish different hidden attributes through their TIMEOUT
    edges: a node has one TIMEOUT edge, so the waiting nodes stay apart (sharing them failed
    an assertion when the second subscribed)."""
    schemas = {name: parse_stream_spec(f"{name}(k:string,v:int)") for name in ("S", "T")}
    text = (
        "PATTERN SEQ(T a, T b, !(S n)) WHERE skip_till_next_match(a, b) {{ n.k = a.k AND "
        "n.v > b.v }} WITHIN 0 AFTER MATCH SKIP {} PUBLISH {}"
    )
    dag = QueryDag()
    for policy, name in (("PAST LAST ROW", "P"), ("TO FIRST b", "Q")):
        (automaton,) = compile_query(text.format(policy, name), schemas).automata
        dag.add(automaton)
        dag.check_valid()
    same = "PATTERN SEQ(T a, T b, !(S n)) WHERE skip_till_next_match(a, b) { n.k = a.k AND "
    (again,) = compile_query(
        same + "n.v > b.v } WITHIN 0 AFTER MATCH SKIP PAST LAST ROW PUBLISH R", schemas
    ).automata
    before = len(dag.nodes)
    dag.add(again)
    dag.check_valid()
    assert len(dag.nodes) == before  # the same policy shares every node, the waiting one too
