"""The documentation's diagrams are what ``cesar explain --dot`` prints today."""

from pathlib import Path

import pytest

DIAGRAMS = Path(__file__).resolve().parents[2] / "docs" / "diagrams"
STOCK = "Stock(Name:string,Price:float,Volume:int)[min]"


@pytest.mark.parametrize("query", sorted(DIAGRAMS.glob("*.cel")), ids=lambda p: p.stem)
def test_diagram_sources_are_current(cesar, query):
    result = cesar.run("explain", "--dot", "--stream", STOCK, query)
    assert result.returncode == 0, result.stderr
    assert result.stdout == query.with_suffix(".dot").read_text(), "run `make diagrams`"
    assert query.with_suffix(".svg").read_text().startswith("<?xml")


def test_every_diagram_is_shown_in_the_docs():
    text = (DIAGRAMS.parent / "automata.md").read_text()
    for query in DIAGRAMS.glob("*.cel"):
        assert f"](diagrams/{query.stem}.svg)" in text
