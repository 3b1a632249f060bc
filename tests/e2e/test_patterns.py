"""The papers' pattern examples of docs/patterns.md, run with ``cesar run`` as printed there.

Each example gives its streams, the pattern, the events and the matches worked out by hand in
the text; the engine and the reference evaluator must both give exactly those matches.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATTERNS = (ROOT / "docs" / "patterns.md").read_text()
EXAMPLES = PATTERNS[PATTERNS.index("## The papers' examples") :]
SECTION = re.compile(r"^### (.+?)\n(.*?)(?=^### |\Z)", re.S | re.M)


def block(body: str, kind: str) -> str:
    (found,) = re.findall(rf"^```{kind}\n(.*?)^```\n", body, re.S | re.M)
    return found


def examples() -> list[tuple[str, list[str], str, str, list[dict]]]:
    out = []
    for title, body in SECTION.findall(EXAMPLES):
        streams_line = body[body.index("Streams: ") : body.index("```sase")]
        specs = re.findall(r"`([^`]+)`", streams_line)
        matches = [json.loads(line) for line in block(body, "matches").splitlines()]
        out.append((title, specs, block(body, "sase"), block(body, "events"), matches))
    return out


def test_every_example_of_both_papers_is_here():
    titles = [title for title, *_ in examples()]
    assert len(titles) == 9
    assert sum("SASE+ Query" in t for t in titles) == 3


@pytest.mark.parametrize(
    ("title", "specs", "pattern", "events", "matches"), examples(), ids=lambda v: str(v)[:24]
)
def test_the_example_gives_the_matches_worked_out_by_hand(
    cesar, title, specs, pattern, events, matches
):
    query = cesar.write("pattern.sase", pattern)
    data = cesar.write("events.jsonl", events)
    args: list[str | Path] = ["run"]
    for spec in specs:
        args += ["--stream", spec]
    expected = sorted(json.dumps(m, sort_keys=True) for m in matches)
    for engine in ("engine", "reference"):
        result = cesar.run(*args, "--engine", engine, "--query", query, data)
        assert result.returncode == 0, result.stderr
        got = []
        for line in result.stdout.splitlines():
            record = json.loads(line)
            got.append(
                json.dumps(
                    {"t0": record["t0"], "t1": record["t1"], **record["attrs"]}, sort_keys=True
                )
            )
        assert sorted(got) == expected, engine
