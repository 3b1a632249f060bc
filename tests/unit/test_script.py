"""Files of several queries (automata/script.py): split at each ``;`` outside strings and
comments, positions kept as the file's."""

import pytest

from cesar.automata.compiler import compile_query
from cesar.automata.errors import CelError
from cesar.automata.schema import parse_stream_spec
from cesar.automata.script import split_script

STOCK = {"Stock": parse_stream_spec("Stock(Name:string,Price:float)")}


def test_queries_split_at_semicolons_outside_strings_and_comments():
    text = (
        "FILTER{Name = 'A;B'} Stock PUBLISH A -- one; still a comment\n"
        ";\n"
        "PATTERN SEQ(Stock a, Stock b) /* a ; in a comment */ PUBLISH B;\n"
        "  ;  -- nothing here\n"
    )
    pieces = split_script(text)
    assert len(pieces) == 2
    assert [compile_query(p, STOCK).output.name for p in pieces] == ["A", "B"]


def test_a_file_of_one_query_is_that_query_and_a_file_of_comments_none():
    assert split_script("Stock PUBLISH A\n") == ["Stock PUBLISH A\n"]
    assert split_script("-- only a comment;\n  ;\n") == []


def test_an_error_in_a_later_query_names_the_files_line_and_column():
    text = "Stock PUBLISH A;\nStock PUBLISH B; FILTER{Price >} Stock"
    *_, bad = split_script(text)
    with pytest.raises(CelError, match="line 2, column 32"):
        compile_query(bad, STOCK)
