"""perf.flinkcmp's CEL queries mean what their MATCH_RECOGNIZE twins mean.

Flink is not installed for the tests (it lives in its own environment); these
tests pin the CEL side to the documented semantics — every consecutive-quote
drop below ``f``, every run of exactly ``n`` rising quotes from every start —
computed directly, so a Flink run that agrees with cesar agrees with them.
"""

from __future__ import annotations

from itertools import pairwise

from cesar.perf.flinkcmp import queries, run_cesar


def direct(rows: list[tuple[str, str, float]], query: int) -> list[tuple[str, int, int]]:
    by_stock: dict[str, list[tuple[int, float]]] = {}
    for symbol, date, price in rows:
        by_stock.setdefault(symbol, []).append((int(date[-2:]) - 3, price))
    out = []
    for symbol, quotes in by_stock.items():
        for start in range(len(quotes)):
            if query % 2 == 0:
                f = round(0.99 - 0.01 * ((query // 2) % 10), 2)
                if start + 1 < len(quotes) and quotes[start + 1][1] < f * quotes[start][1]:
                    out.append((symbol, quotes[start][0], quotes[start + 1][0]))
            else:
                n = 3 + (query // 2) % 6
                run = quotes[start : start + n]
                if len(run) == n and all(b[1] > a[1] for a, b in pairwise(run)):
                    out.append((symbol, run[0][0], run[-1][0]))
    return sorted(out)


def test_cel_twins_find_every_drop_and_every_rising_run_of_n() -> None:
    prices = {"A": [10, 11, 12, 13, 12.5, 12.0, 13, 14, 15, 16], "B": [5, 4, 5, 6, 7, 6.9, 6.0]}
    rows = [
        (symbol, f"2000-01-{day + 3:02d}", float(series[day]))
        for day in range(10)
        for symbol, series in sorted(prices.items())
        if day < len(series)
    ]
    texts = queries(4)
    assert [q for q, _, _ in texts] == ["Q0", "Q1", "Q2", "Q3"]
    assert "PATTERN (A B{2})" in texts[1][2] and "PATTERN (A B)" in texts[0][2]
    found = run_cesar(rows, texts).matches
    for number, (query, _, _) in enumerate(texts):
        assert found[query] == direct(rows, number), query
    assert found["Q1"] and found["Q2"]
