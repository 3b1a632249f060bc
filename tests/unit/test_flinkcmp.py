"""perf.flinkcmp's queries mean what their MATCH_RECOGNIZE twins mean.

Flink is not installed for the tests (it lives in its own environment); these
tests pin cesar's side to the documented semantics — every consecutive-quote
drop below ``f``, every run of exactly ``n`` rising quotes from every start,
every longest rising run followed by a quote below ``f`` times its last, the
first quote below ``f`` times a start with none 5 % above it before —
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
    step = query // 4
    f = round(0.99 - 0.01 * (step % 10), 2)
    for symbol, quotes in by_stock.items():
        for start in range(len(quotes)):
            first = quotes[start][1]
            if query % 4 == 0:
                if start + 1 < len(quotes) and quotes[start + 1][1] < f * first:
                    out.append((symbol, quotes[start][0], quotes[start + 1][0]))
            elif query % 4 == 1:
                n = 3 + step % 6
                run = quotes[start : start + n]
                if len(run) == n and all(b[1] > a[1] for a, b in pairwise(run)):
                    out.append((symbol, run[0][0], run[-1][0]))
            elif query % 4 == 2:
                end = start
                while end + 1 < len(quotes) and quotes[end + 1][1] > quotes[end][1]:
                    end += 1
                if (
                    end > start
                    and end + 1 < len(quotes)
                    and quotes[end + 1][1] < f * quotes[end][1]
                ):
                    out.append((symbol, quotes[start][0], quotes[end + 1][0]))
            else:
                later = [i for i in range(start + 1, len(quotes)) if quotes[i][1] < f * first]
                if later and all(quotes[i][1] <= 1.05 * first for i in range(start + 1, later[0])):
                    out.append((symbol, quotes[start][0], quotes[later[0]][0]))
    return sorted(out)


def test_twins_find_drops_rising_runs_runs_then_drops_and_drops_without_a_rise() -> None:
    prices = {
        "A": [10, 11, 12, 13, 12.5, 12.0, 13, 14, 15, 16],
        "B": [5, 4, 5, 6, 7, 6.9, 6.0],
        "C": [10, 10.6, 9.8, 10.0, 9.0, 9.5, 9.4],
    }
    rows = [
        (symbol, f"2000-01-{day + 3:02d}", float(series[day]))
        for day in range(10)
        for symbol, series in sorted(prices.items())
        if day < len(series)
    ]
    texts = queries(4)
    assert [q for q, _, _ in texts] == ["Q0", "Q1", "Q2", "Q3"]
    assert "PATTERN (A B{2})" in texts[1][2] and "PATTERN (A B)" in texts[0][2]
    assert "PATTERN (A B+ C)" in texts[2][2] and "PATTERN (A B*? C)" in texts[3][2]
    assert texts[2][1].startswith("PATTERN") and texts[3][1].startswith("PATTERN")
    found = run_cesar(rows, texts).matches
    for number, (query, _, _) in enumerate(texts):
        assert found[query] == direct(rows, number), query
    assert all(found[q] for q in ("Q0", "Q1", "Q2", "Q3"))
