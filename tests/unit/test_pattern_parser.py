"""The pattern parser (automata/pattern/parser.py): the papers' examples as printed, and errors."""

import pytest

from cesar.automata.errors import CelSyntaxError
from cesar.automata.pattern.ast import Index, Ref, Strategy
from cesar.automata.pattern.parser import is_pattern, parse_pattern, tokenize
from cesar.automata.terms import to_cel

SASE_PLUS = {
    "query 1": """PATTERN SEQ(Shelf a, ∼(Register b), Exit c)
WHERE    skip_till_next_match(a, b, c) {
                  a.tag_id = b.tag_id
       and     a.tag_id = c.tag_id
                  /* equivalently, [tag_id] */     }
WITHIN    12 hours""",
    "query 2": """PATTERN SEQ(Alert a, Shipment+ b[ ])
WHERE    skip_till_any_match(a, b[ ]) {
                    a.type = 'contaminated'
       and       b[1].from = a.site
       and       b[i].from = b[i-1].to }
WITHIN    3 hours""",
    "query 3": """PATTERN SEQ(Stock+ a[ ], Stock b)
WHERE    skip_till_next_match(a[ ], b) {
                    [symbol]
       and       a[1].volume > 1000
       and       a[i].price > avg(a[..i-1].price)
       and       b.volume < 80%*a[a.LEN].volume }
WITHIN    1 hour""",
}
SASE = {
    "Q1": """EVENT SHELF-READING
WHERE category = ‘food’ ∧ manufacturer_id = ‘1’""",
    "Q2": """EVENT SEQ(SHELF-READING x, ! (COUNTER-READING y),
EXIT-READING z)
WHERE x.id = y.id ∧ x.id = z.id
/* or equivalently, [id] */
WITHIN 12 hours""",
    "misplaced": """EVENT SEQ(SHELF-READING x, SHELF-READING y,
! (ANY(COUNTER-READING, SHELF-READING) z) )
WHERE [id] ∧ x.shelf_id ≠ y.shelf_id ∧ x.shelf_id = z.shelf_id
WITHIN 1 hour""",
    "medicine": """EVENT
SEQ(MEDICINE-TAKEN x, MEDICINE-TAKEN y)
WHERE
[name=‘John’] ∧ [medicine=‘Antibiotics’] ∧
(x.amount + y.amount) > 1000
WITHIN 4 hours""",
    "Q3": """EVENT SEQ(A x1, B x2, ! (C x3), D x4)
WHERE [attr1, attr2] ∧ x1.attr3 = ‘1’ ∧ x1.attr4 < x4.attr4
WITHIN 10""",
}


@pytest.mark.parametrize("text", [*SASE_PLUS.values(), *SASE.values()], ids=[*SASE_PLUS, *SASE])
def test_the_papers_examples_parse_as_printed(text):
    pattern = parse_pattern(text)
    assert is_pattern(text)
    assert pattern.components


def test_query_3_reads_as_the_paper_means_it():
    pattern = parse_pattern(SASE_PLUS["query 3"])
    assert pattern.strategy is Strategy.NEXT and pattern.strategy_given
    assert [(c.types, c.var, c.kleene) for c in pattern.components] == [
        (("Stock",), "a", True),
        (("Stock",), "b", False),
    ]
    assert [e.attr for e in pattern.equivalences] == ["symbol"]
    assert dict(pattern.refs)["avg(a[..i-1].price)"] == Ref(
        "a", Index.UPTO_PREVIOUS, "price", "AVG"
    )
    assert to_cel(pattern.where).endswith("b.volume < 0.8 * a[a.LEN].volume")


def test_sase_spellings():
    misplaced = parse_pattern(SASE["misplaced"])
    negated = misplaced.components[2]
    assert negated.negated and negated.types == ("COUNTER_READING", "SHELF_READING")
    assert "x.shelf_id != y.shelf_id" in to_cel(misplaced.where)
    q1 = parse_pattern(SASE["Q1"])
    assert q1.components[0].var == "SHELF_READING"
    assert (
        to_cel(q1.where)
        == "SHELF_READING.category = 'food' AND SHELF_READING.manufacturer_id = '1'"
    )
    medicine = parse_pattern(SASE["medicine"])
    assert [(e.attr, to_cel(e.value)) for e in medicine.equivalences] == [
        ("name", "'John'"),
        ("medicine", "'Antibiotics'"),
    ]
    assert misplaced.strategy is Strategy.ANY and not misplaced.strategy_given


def test_hyphens_are_names_only_in_the_pattern_clause():
    pattern = parse_pattern("EVENT SEQ(A-B x, C y) WHERE x.n-y.n > 1 RETURN x.n-1 AS m")
    assert pattern.components[0].types == ("A_B",)
    assert to_cel(pattern.where) == "x.n - y.n > 1"


def test_tokens_keep_their_line_and_column_across_lines_comments_and_strings():
    text = (
        "PATTERN SEQ(A a, B-C b) /* two\nlines */ WHERE a.x-b.y > 1\n"
        "  AND a.s = 'x\ny' -- to the end\nAFTER\n MATCH SKIP PAST LAST ROW"
    )
    tokens = list(tokenize(text))[6:27]
    assert " ".join(t.type for t in tokens) == (
        "NAME NAME RPAR WHERE NAME DOT NAME MINUS NAME DOT NAME CMP INT "
        "AND NAME DOT NAME CMP STRING AFTER_MATCH_SKIP NAME"
    )
    assert [str(t) for t in tokens if t.type in ("NAME", "STRING")] == (
        ["B-C", "b", "a", "x", "b", "y", "a", "s", "'x\ny'", "PAST"]
    )
    assert [(t.line, t.column) for t in tokens] == [
        *((1, 18), (1, 22), (1, 23)),
        *((2, 10), (2, 16), (2, 17), (2, 18), (2, 19), (2, 20), (2, 21), (2, 22), (2, 24), (2, 26)),
        *((3, 3), (3, 7), (3, 8), (3, 9), (3, 11), (3, 13)),
        *((5, 1), (6, 13)),
    ]


def test_clauses():
    pattern = parse_pattern(
        "PATTERN AND(Stock a, Stock b) WHERE a.s < b.s WITHIN 2 MIN "
        "RETURN a.s, b.s AS other PUBLISH Pairs"
    )
    assert pattern.operator == "AND"
    assert [(to_cel(r.term), r.alias) for r in pattern.returns] == [("a.s", None), ("b.s", "other")]
    assert pattern.publish == "Pairs" and to_cel(pattern.window) == "2 MIN"


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("PATTERN SEQ(A a,, B b)", (1, 17), "unexpected ','"),
        ("PATTERN SEQ(A a, B b) WHERE a.x > (", (1, 36), "unexpected end of query"),
        ("PATTERN SEQ(A a, B b) WHERE [x] OR a.y = 1", (1, 29), "equivalence test"),
        ("PATTERN SEQ(A+ a[], B b) WHERE a[2].x = 1", (1, 34), "[1], [i], [i-1]"),
        ("PATTERN SEQ(A+ a[], B b) WHERE a[j].x = 1", (1, 34), "running index is i"),
        ("PATTERN SEQ(A+ a[], B b) WHERE a[].x > 1", (1, 32), "take one of avg"),
        ("PATTERN SEQ(A a, B b) WHERE x > 1", (1, 29), "needs its variable"),
        ("PATTERN SEQ(A a) WHERE strict_contiguity(z) { }", (1, 42), "no variable"),
        ("PATTERN SEQ(A a) WHERE [x > 1]", (1, 27), "with '='"),
        ("PATTERN SEQ(A a) WHERE a.x = 'open", (1, 30), "unterminated string"),
        ("PATTERN SEQ(A a) /* open", (1, 18), "unterminated comment"),
        ("PATTERN SEQ(A a) RETURN [x]", (1, 25), "belongs in WHERE"),
    ],
)
def test_errors_have_a_line_a_column_and_a_caret(text, where, message):
    with pytest.raises(CelSyntaxError) as caught:
        parse_pattern(text)
    assert (caught.value.line, caught.value.column) == where
    assert message in str(caught.value)
    assert str(caught.value).splitlines()[-1].index("^") == where[1] + 1


def test_not_a_pattern():
    assert not is_pattern("FILTER{x > 1} S")
    assert not is_pattern("  -- EVENT in a comment\nS")
    assert is_pattern("\n-- shoplifting\npattern SEQ(A a)")
