"""`cesar explain`'s placement line: how a query is placed and, if pinned, on which value."""

from cesar.automata.compiler import compile_query
from cesar.automata.explain import explain
from cesar.automata.schema import parse_stream_spec

STREAMS = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}


def placement(text: str) -> str:
    lines = explain(compile_query(text, STREAMS, "q"), STREAMS).splitlines()
    return next(line for line in lines if line.startswith("placement: "))


def test_the_placement_line_names_the_key_the_value_it_is_pinned_to_or_global():
    rise = "Stock NEXT{$1.Name = $2.Name AND $2.Price > $1.Price} Stock"
    assert placement(rise) == "placement: key-partitioned on Name (runs on every shard)"
    assert placement(f"FILTER{{Name = 'IBM'}} ({rise})") == (
        "placement: key-partitioned on Name, pinned to Name = 'IBM' "
        "(runs on the shard owning 'IBM' alone)"
    )
    assert placement("Stock NEXT{$2.Price > $1.Price} Stock").startswith("placement: global")
