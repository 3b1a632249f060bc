"""OpenCEP's nested and OR examples, written in cesar, on the bundled one-minute quotes.

OpenCEP's nested tests compose ``AND(SEQ(AAPL a, AMZN b), SEQ(AVID c, BIDU d))`` and the like
(its test/NestedTests.py); here they read the bundled stocks (one stream, the stock a
``Name``).  Each pattern's matches are counted by brute force in this file, with loops over
the quotes that know nothing of cesar; ``cesar run`` must publish that many, with the engine
and with the reference evaluator.  Where the engine does not run a form yet (a Kleene closure
in a SEQ inside an AND), ``cesar run --engine engine`` must say why and exit non-zero.
"""

import csv
import itertools
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "stocks_sample.csv"
STREAM = "Stock(Name:string,Price:float,Volume:int)[min]"


def quotes() -> dict[str, list[tuple[int, float]]]:
    """(minute, price) per stock, in time order."""
    out: dict[str, list[tuple[int, float]]] = {}
    with SAMPLE.open() as f:
        for row in csv.DictReader(f):
            out.setdefault(row["Name"], []).append((int(row["t"]), float(row["Price"])))
    return out


Q = quotes()


def near(name: str, low: int, high: int) -> list[tuple[int, float]]:
    return [q for q in Q[name] if low <= q[0] <= high]


def count_and_of_seqs() -> int:
    """AND(SEQ(AAPL a, AMZN b), SEQ(GOOG c, MSFT d)): a before b, c before d, the two pairs in
    any order, all within 3 minutes; a's price above b's / 30 and d's above c's / 12."""
    total = 0
    for a in Q["AAPL"]:
        for b in near("AMZN", a[0] + 1, a[0] + 3):
            if not a[1] > b[1] / 30:
                continue
            for c in near("GOOG", b[0] - 3, a[0] + 3):
                for d in near("MSFT", c[0] + 1, c[0] + 3):
                    times = (a[0], b[0], c[0], d[0])
                    if max(times) - min(times) <= 3 and d[1] > c[1] / 12:
                        total += 1
    return total


def count_seq_or() -> int:
    """SEQ(TSLA a, OR(SEQ(TSLA b, TSLA c), FB d)): a rise then another rise, or an FB quote
    below 0.4 of a's price, within 3 minutes."""
    total = 0
    for a in Q["TSLA"]:
        for b, c in itertools.combinations(near("TSLA", a[0] + 1, a[0] + 3), 2):
            if a[1] < b[1] < c[1]:
                total += 1
        total += sum(1 for d in near("FB", a[0] + 1, a[0] + 3) if d[1] < 0.4 * a[1])
    return total


def count_either_order() -> int:
    """OR(SEQ(AAPL a, MSFT b), SEQ(MSFT b, AAPL a)): one quote of each in either order (not
    the same minute), within 2 minutes, Apple above 115.5 and Microsoft above 214."""
    total = 0
    for (t, p), (u, q) in itertools.product(Q["AAPL"], Q["MSFT"]):
        if t != u and abs(t - u) <= 2 and p > 115.5 and q > 214:
            total += 1
    return total


CASES = {
    "and_of_seqs": (
        "PATTERN AND(SEQ(Stock a, Stock b), SEQ(Stock c, Stock d))\n"
        "WHERE a.Name = 'AAPL' AND b.Name = 'AMZN' AND c.Name = 'GOOG' AND d.Name = 'MSFT'\n"
        "  AND a.Price > b.Price / 30 AND d.Price > c.Price / 12\n"
        "WITHIN 3 MIN PUBLISH Both\n",
        count_and_of_seqs,
    ),
    "seq_or": (
        "PATTERN SEQ(Stock a, OR(SEQ(Stock b, Stock c), Stock d))\n"
        "WHERE a.Name = 'TSLA' AND b.Name = 'TSLA' AND c.Name = 'TSLA' AND d.Name = 'FB'\n"
        "  AND b.Price > a.Price AND c.Price > b.Price AND d.Price < 0.4 * a.Price\n"
        "WITHIN 3 MIN PUBLISH Moves\n",
        count_seq_or,
    ),
    "either_order": (
        "PATTERN OR(SEQ(Stock a, Stock b), SEQ(Stock b, Stock a))\n"
        "WHERE a.Name = 'AAPL' AND b.Name = 'MSFT' AND a.Price > 115.5 AND b.Price > 214\n"
        "WITHIN 2 MIN RETURN a.Price AS apple, b.Price AS microsoft PUBLISH Pair\n",
        count_either_order,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_matches_are_what_a_brute_force_count_gives(cesar, case):
    text, count = CASES[case]
    expected = count()
    assert expected > 0, "the example should match something on the sample"
    query = cesar.write(f"{case}.sase", text)
    args = ["run", "--stream", STREAM, "--query", query, SAMPLE]
    reference = cesar.run(*args, "--engine", "reference")
    assert reference.returncode == 0, reference.stderr
    assert len(reference.stdout.splitlines()) == expected
    engine = cesar.run(*args, "--engine", "engine")
    assert engine.returncode == 0, engine.stderr
    got = sorted(json.dumps(json.loads(line)) for line in engine.stdout.splitlines())
    want = sorted(json.dumps(json.loads(line)) for line in reference.stdout.splitlines())
    assert got == want


def test_the_engine_refuses_a_closure_inside_an_and_saying_why(cesar):
    query = cesar.write(
        "closure.sase",
        "PATTERN AND(SEQ(Stock+ a[], Stock b), Stock c) WHERE a[1].Name = 'AAPL' WITHIN 2 MIN\n",
    )
    engine = cesar.run("run", "--stream", STREAM, "--query", query, SAMPLE)
    assert engine.returncode != 0
    assert "the Kleene closure a is inside an AND" in engine.stderr
    assert "the reference evaluator does" in engine.stderr
