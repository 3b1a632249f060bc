"""Every recipe of docs/cookbook.md runs on the bundled sample and gives the count it states."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COOKBOOK = (ROOT / "docs" / "cookbook.md").read_text()
STOCK = "Stock(Name:string,Price:float,Volume:int)[min]"
RECIPE = re.compile(r"^### (\d+)\. .*?\n```cel\n(.*?)^```\n\nOn the sample: ([^\n]*)", re.S | re.M)


def recipes() -> list[tuple[str, str, str]]:
    """(number, the recipe's text as the cookbook shows it, what it gives on the sample)."""
    return RECIPE.findall(COOKBOOK)


def test_there_are_thirty_recipes_each_with_its_count():
    assert [int(number) for number, _, _ in recipes()] == list(range(1, 31))
    assert COOKBOOK.count("```cel") == 30


def test_the_docs_say_how_many_recipes_there_are():
    twins = {n for n, body in SECTION.findall(COOKBOOK) if "```sase" in body}
    assert COOKBOOK.startswith(
        f"# Cookbook: common alerts in CEL\n\nThirty alerts people write first, each as a CEL"
        f" query ({WORDS[len(twins)]} also with a pattern)"
    )
    for path in ("README.md", "docs/index.md"):
        assert "thirty common alerts" in (ROOT / path).read_text()


WORDS = dict(
    enumerate(
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    )
)


SECTION = re.compile(r"^### (\d+)\. (.*?)(?=^##)", re.S | re.M)
PATTERN = re.compile(r"^```sase\n(.*?)^```\n\nOn the sample: (\d+) alerts", re.S | re.M)


def test_the_pattern_twins_give_their_counts(cesar):
    """Each pattern in a recipe (```sase) gives the count under it, run beside the recipe's
    queries (it may read what they publish)."""
    queries = {number: text for number, text, _ in recipes()}
    twins = [(n, *twin) for n, body in SECTION.findall(COOKBOOK) for twin in PATTERN.findall(body)]
    assert [number for number, _, _ in twins] == [
        *("14", "21", "22", "23", "23", "27", "28", "28", "29", "30"),
    ]
    for number, text, count in twins:
        recipe = cesar.write(f"twin{number}.cel", queries[number])
        args: list[str | Path] = ["run", "--stream", STOCK, "--query", recipe]
        args += ["--query", cesar.write(f"twin{number}.sase", text)]
        result = cesar.run(*args, ROOT / "examples" / "stocks_sample.csv")
        assert result.returncode == 0, result.stderr
        (name,) = re.findall(r"PUBLISH (\w+)", text)
        got = [line for line in result.stdout.splitlines() if json.loads(line)["stream"] == name]
        assert len(got) == int(count) > 0


def stream_of(number: str) -> str:
    """The stream a recipe's command names (``--stream '…'`` in its section), else STOCK."""
    body = next(body for n, body in SECTION.findall(COOKBOOK) if n == number)
    named = re.search(r"--stream '([^']+)'", body)
    return named.group(1) if named else STOCK


@pytest.mark.parametrize(("number", "text", "counts"), recipes(), ids=lambda v: str(v)[:3])
def test_the_recipe_gives_what_the_cookbook_says(cesar, number, text, counts):
    # As the cookbook tells a user: the recipe saved whole as recipe.cel, run with --query.
    recipe = cesar.write("recipe.cel", text)
    args: list[str | Path] = ["run", "--stream", stream_of(number), "--query", recipe]
    result = cesar.run(*args, ROOT / "examples" / "stocks_sample.csv")
    assert result.returncode == 0, result.stderr
    got = Counter(json.loads(line)["stream"] for line in result.stdout.splitlines())
    named = re.findall(r"(\d+) (?:alerts? )?of `(\w+)`", counts)
    if named:
        assert {stream: int(n) for n, stream in named} == dict(got)
    else:
        (total,) = re.findall(r"^(\d+) alerts?", counts)
        assert sum(got.values()) == int(total) > 0
