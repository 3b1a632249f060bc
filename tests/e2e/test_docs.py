"""The documentation's diagrams are what ``cesar explain --dot`` prints today."""

import json
import os
import re
import subprocess
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


DOCS = DIAGRAMS.parent
ROOT = DOCS.parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
QUOTES = [(1, "IBM", 100), (2, "MSFT", 50), (3, "IBM", 104), (4, "MSFT", 53), (5, "IBM", 110)]
FIVE_EVENTS = "\n".join(json.dumps({"t": t, "Name": n, "Price": p}) for t, n, p in QUOTES)


def blocks(page: str, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall((DOCS / page).read_text()) if lang == language]


def test_the_index_links_every_page_and_every_link_resolves():
    text = (DOCS / "index.md").read_text()
    linked = set(re.findall(r"\]\(([^)#]+)", text))
    assert {p.name for p in DOCS.glob("*.md")} - {"index.md"} <= linked
    for target in linked:
        assert (DOCS / target).exists(), target


def test_the_quickstart_runs_as_written():
    script = "set -e\n" + "\n".join(blocks("quickstart.md", "sh"))
    try:
        result = subprocess.run(
            ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=900
        )
    finally:
        subprocess.run(["pkill", "-f", "cesar serve --data-dir /tmp/cesar-quickstart"])
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    alerts = result.stdout.count('"stream": "Drops"')
    assert alerts >= 6  # cesar run's head -3, then listen --count 3
    assert '"events_accepted": 4680' in result.stdout  # the sample twice: publish, then feed


def test_the_readme_server_block_runs_as_written(tmp_path):
    """No sleep between ``cesar serve &`` and the first client command: clients wait for a
    starting server.  The block runs with its data directory and port moved aside."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("## Running the server")
    (sh, block), (py, python) = FENCE.findall(readme[start:])[:2]
    assert (sh, py) == ("sh", "python")
    port = 50000 + os.getpid() % 10000
    script = block.replace("/tmp/cesar", str(tmp_path / "data")).replace(
        "--shards 2", f"--shards 2 --port {port}"
    )
    program = tmp_path / "client.py"
    program.write_text(python.replace("127.0.0.1:50051", f"127.0.0.1:{port}"))
    script = (
        f"set -e\nexport CESAR_SERVER=127.0.0.1:{port}\n{script}\nwait %2\n"
        f".venv/bin/python {program}\nkill %1\nwait %1\n"
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "s1" in lines  # cesar subscribe, right after cesar serve &
    assert any('"stream": "Drops"' in line for line in lines)  # cesar listen ... &
    assert "published 2340 event(s), 0 rejected" in result.stderr
    assert "1 2020-10-27T13:30Z {'Name': 'AMZN', 'Price': 3201.5, 'Volume': 900}" in lines


def test_every_cel_example_of_the_language_reference_runs(cesar):
    events = cesar.write("five.jsonl", FIVE_EVENTS + "\n")
    examples = [
        body
        for body in blocks("language.md", "")
        if not body.startswith(("{", "query ", "line ")) and "PUBLISH" in body
    ]
    assert len(examples) >= 5
    for number, body in enumerate(examples):
        query = cesar.write(f"example{number}.cel", body)
        result = cesar.run(
            "run", "--stream", "Stock(Name:string,Price:float)[min]", "--query", query, events
        )
        assert result.returncode == 0, body + result.stderr
        assert result.stdout.strip(), f"no output from:\n{body}"


def test_the_architecture_page_names_every_module():
    text = (DOCS / "architecture.md").read_text()
    for folder in ("automata", "index", "server", "perf", "examples"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".lark") and path.name != "__init__.py":
                assert f"`{path.relative_to(ROOT)}`" in text, f"{path.relative_to(ROOT)} unnamed"


@pytest.mark.parametrize(
    "page",
    [*sorted(DOCS.glob("*.md")), ROOT / "README.md", ROOT / "tests" / "README.md"],
    ids=lambda p: p.name,
)
def test_no_page_points_outside_the_repository(page):
    text = page.read_text()
    assert "../shared" not in text and "shared/spec" not in text
    for target in re.findall(r"\]\(([^)#\s]+)", text):
        if "://" in target:
            continue
        resolved = (page.parent / target).resolve()
        assert ROOT in resolved.parents and resolved.exists(), f"{page.name} links {target}"
