import pytest

from cesar.automata import algebra as alg
from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelSemanticError
from cesar.automata.schema import parse_stream_spec
from cesar.automata.terms import Attr, Cmp, Const, Scope
from cesar.automata.translate import Options
from cesar.server.engine.workload import Workload, WorkloadError

STOCK = parse_stream_spec("Stock(Name:string,Price:float,Volume:int)[min]")
TICKS = parse_stream_spec("Ticks(Name:string,Price:float)")
SCHEMAS = {"Stock": STOCK, "Ticks": TICKS}


def names(text, schemas=SCHEMAS):
    return compile_query(text, schemas, "q").output.names


def test_next_suffixes_every_left_attribute_when_names_clash():
    assert names("Stock NEXT{} Stock") == (
        "Name_1",
        "Price_1",
        "Volume_1",
        "Name",
        "Price",
        "Volume",
    )
    nested = names("(Stock NEXT{} Stock) NEXT{} Stock")
    assert [n for n in nested if n.startswith("Price")] == ["Price_1_1", "Price_1", "Price"]
    assert names("(SELECT *, 1 AS Price_1 FROM Stock) NEXT{} Stock")[:4] == (
        "Name_1",
        "Price_1",
        "Volume_1",
        "Price_1_1",
    )


def test_next_keeps_names_without_clash_and_renames_scoped_references():
    q = compile_query("(SELECT Name AS N FROM Stock) NEXT{$1.N = $2.Name} Stock", SCHEMAS, "q")
    assert q.output.names == ("N", "Name", "Price", "Volume")
    q = compile_query("Stock NEXT{$1.Price < $2.Price} Stock", SCHEMAS, "q")
    assert isinstance(q.algebra, alg.Seq)
    assert q.algebra.pred == Cmp("<", Attr(Scope.LEFT, "Price_1"), Attr(Scope.RIGHT, "Price"))


def test_fold_suffixes_only_shared_names_and_keeps_aggregates():
    text = "(SELECT *, 1 AS cnt FROM Stock) FOLD{$2.Name = $.Name, , $.cnt + 1 AS cnt} Stock"
    assert names(text) == ("Name_1", "Price_1", "Volume_1", "cnt", "Name", "Price", "Volume")


def test_select_projects_renames_and_introduces():
    q = compile_query("SELECT Price AS P, Name, Price * 2 AS Price FROM Stock", SCHEMAS, "q")
    assert q.output.spec() == "q(P:float,Name:string,Price:float)[min]"


def test_an_unknown_stream_names_twenty_known_ones_and_counts_the_rest():
    many = {**SCHEMAS, **{f"s{n:03}": SCHEMAS["Stock"] for n in range(500)}}
    with pytest.raises(CelSemanticError) as info:
        compile_query("Nope", many, "q")
    names = ", ".join(["Stock", "Ticks", *(f"s{n:03}" for n in range(18))])
    assert f"unknown stream Nope (known streams: {names} and 482 more)" in str(info.value)


def test_publish_names_the_output_and_duration_compiles_to_ticks():
    q = compile_query("FILTER{DUR >= 2 HOURS} Stock PUBLISH Long", SCHEMAS)
    assert q.name == "Long"
    assert q.algebra.pred.right == Const(120, q.algebra.pred.right.type)
    q = compile_query("FILTER{DUR > 30 SEC} Stock", SCHEMAS, "q")
    assert q.algebra.pred.right.value == 0.5


@pytest.mark.parametrize(
    ("text", "message", "column"),
    [
        ("Nope", "unknown stream Nope (known streams: Stock, Ticks)", 1),
        ("FILTER{Prise > 1} Stock", "unknown attribute Prise (available: Name, Price, Volume)", 8),
        ("FILTER{$2.Price > 1} Stock", "in FILTER write the bare attribute name Price", 8),
        ("Stock NEXT{Price > 1} Stock", "attribute Price needs a scope: $1.x (left) or $2.x", 12),
        ("Stock NEXT{$.Price > 1} Stock", "the run state $ exists only inside FOLD", 12),
        ("Stock NEXT{$2.Prise > 1} Stock", "unknown attribute Prise on the right ($2)", 12),
        ("FILTER{Name > 1} Stock", "cannot compare string Name with int 1", 13),
        ("FILTER{Name + 1 > 1} Stock", "operator + needs numbers, not string Name", 8),
        ("FILTER{NOPE(Name) = 1} Stock", "unknown function NOPE", 8),
        ("FILTER{CONTAINS(Name) = 1} Stock", "CONTAINS takes 2 arguments, 1 given", 8),
        ("FILTER{CONTAINS(Name, 3) = 1} Stock", "argument 2 of CONTAINS must be string", 23),
        ("Stock UNION Ticks", "counts time in tick but Stock in min", 13),
        ("FILTER{DUR > 3 MIN} Ticks", "needs streams with a time unit", 14),
        ("Stock FOLD{,,} (SELECT *, 1 AS x FROM Stock)", "missing on the left: x", 7),
        (
            "(SELECT *, 1 AS cnt FROM Stock) FOLD{,, $.cnt + 0.5 AS cnt} Stock",
            "aggregate cnt is int but its term is float",
            47,
        ),
        ("Stock FOLD{,, 1 AS nope} Stock", "aggregate nope must name an attribute", 15),
        ("Stock FOLD{,, 1 AS Volume} Stock", "also an attribute of the right operand", 15),
        (
            "Stock NEXT{} (SELECT Price AS Price_1, Name FROM Stock)",
            "Price would become Price_1",
            7,
        ),
        ("(SELECT *, 1 AS Price_1 FROM Stock) FOLD{,,} Stock", "would be named Price_1", 37),
        ("SELECT Name, Name FROM Stock", "produces attribute Name twice", 14),
        ("SELECT *, Price FROM Stock", "produces attribute Price twice", 11),
        ("SELECT Name FROM Stock UNION Stock", "only on the right: Price, Volume", 1),
        ("(Stock PUBLISH X) NEXT{} Stock", "PUBLISH is only allowed at the end", 2),
        ("FILTER{Price > 1} Stock PUBLISH Stock", "stream Stock already exists", 1),
    ],
)
def test_semantic_errors_name_the_problem_and_place(text, message, column):
    with pytest.raises(CelSemanticError) as info:
        compile_query(text, SCHEMAS, "q")
    assert message in str(info.value)
    if column:
        assert info.value.column == column, str(info.value)
    assert "^" in str(info.value)


def test_dnf_limit_is_configurable():
    ors = " AND ".join(f"(Price = {k} OR Volume = {k})" for k in range(5))
    text = f"FILTER{{{ors}}} Stock"
    compile_query(text, SCHEMAS, "q")
    with pytest.raises(CelSemanticError, match=r"32 conjuncts.*limit of 16"):
        compile_query(text, SCHEMAS, "q", Options(dnf_limit=16))


def test_program_orders_producers_first_and_rejects_cycles():
    program = Workload.build(
        [STOCK],
        [
            ("consumer", "FILTER{Price > 2} Cheap PUBLISH Mid"),
            ("producer", "FILTER{Price < 5} Stock PUBLISH Cheap"),
        ],
    )
    assert [q.name for q in program.queries] == ["Cheap", "Mid"]
    with pytest.raises(WorkloadError, match="stream Stock declared twice"):
        Workload.build([STOCK, STOCK], [("q", "Stock")])
    with pytest.raises(WorkloadError, match="cycle"):
        Workload.build(
            [STOCK],
            [("a", "FILTER{Price > 1} B PUBLISH A"), ("b", "FILTER{Price > 1} A PUBLISH B")],
        )
    with pytest.raises(WorkloadError, match=r"query two: .*stream Cheap already exists"):
        Workload.build(
            [STOCK],
            [("one", "Stock PUBLISH Cheap"), ("two", "Stock PUBLISH Cheap")],
        )
