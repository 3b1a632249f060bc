"""Throughput against number of queries, per engine, from techbench JSON files (Figures 16-17).

    python -m cesar.perf.plot OUT.png RUN.json [RUN.json ...]

Each RUN.json is a ``cesar.perf.techbench --json`` output; every (template, engine) pair becomes one
line of events/s against queries, on a log scale as in the paper's Figure 17.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def series(paths: Sequence[str]) -> dict[str, list[tuple[int, float]]]:
    """(template, engine) label → sorted (queries, events/s) points."""
    lines: dict[str, list[tuple[int, float]]] = {}
    for path in paths:
        for record in json.loads(Path(path).read_text())["records"]:
            label = f"{record['template']}, {record['engine']}"
            lines.setdefault(label, []).append((record["queries"], record["events_per_s"]))
    return {label: sorted(points) for label, points in sorted(lines.items())}


def unavailable() -> str | None:
    """Why no figure can be drawn here (matplotlib, a development dependency, is missing), or
    None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install 'cesar[dev]'), so no figure is drawn"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, points in series(args[1:]).items():
        axes.plot([q for q, _ in points], [r for _, r in points], marker="o", label=label)
    axes.set_yscale("log")
    axes.set_xlabel("concurrent subscriptions")
    axes.set_ylabel("events per second (log)")
    axes.set_title("cesar technical benchmark (Cayuga Section 5.1)")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args[0], dpi=120)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def loadtest_figure(result: dict[str, Any], path: Path) -> None:
    """Four panels of a ``cesar loadtest`` result over time: rates, latency, memory, latency CDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    line = result["timeline"]
    t = [p["t"] for p in line]
    figure, ((rates, latency), (memory, spread)) = plt.subplots(2, 2, figsize=(11, 7))
    rates.plot(t, [p["events_per_s"] for p in line], label="events/s acknowledged")
    rates.plot(t, [p["alerts_per_s"] for p in line], label="alerts/s received")
    rates.set_title("throughput")
    latency.plot(t, [p["latency_p50_ms"] for p in line], label="p50")
    latency.plot(t, [p["latency_p99_ms"] for p in line], label="p99")
    latency.set_title("publish → alert latency per 2 s window (ms)")
    memory.plot(t, [p["rss_front_mb"] for p in line], label="front")
    memory.plot(t, [p["rss_shards_mb"] for p in line], label="shards (sum)")
    memory.set_title("server RSS (MB)")
    marks = result["load"]["latency_ms"]
    spread.bar(list(marks), list(marks.values()))
    spread.set_title("latency over the run (ms)")
    for axes in (rates, latency, memory):
        axes.set_xlabel("seconds since the load began")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=8)
    s = result["settings"]
    figure.suptitle(
        f"cesar loadtest: {result['subscribe']['subscriptions']:,} subscriptions, "
        f"{s['subscribers']} clients, {s['publishers']} publishers, churn {s['churn']}/s, "
        f"{s['serve'] or '?'} shards"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def plans_figure(summary: dict[str, Any], path: Path) -> None:
    """Three panels of a ``cesar.perf.planbench`` summary: partial matches and events/s with
    a rare type (eager, pinned lazy chain, planner), memory by window (eager's live partial
    matches, recompute's buffered events), events/s of each plan on the drifting stream."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = summary["records"]
    figure, (rare, memory, drift) = plt.subplots(1, 3, figsize=(15, 4.5))
    shapes = [r for r in records if r["benchmark"] in ("rare", "stocks_rare")]
    labels = sorted({r.get("shape", "stocks") for r in shapes}, key=str)
    kinds = ("eager", "lazy (pinned)", "planner")
    for offset, kind in enumerate(kinds):
        values = []
        for label in labels:
            mine = [r for r in shapes if r.get("shape", "stocks") == label]
            values.append(mine[offset]["events_per_s"])
        rare.bar([i + offset * 0.27 for i in range(len(labels))], values, 0.27, label=kind)
    rare.set_xticks([i + 0.27 for i in range(len(labels))], labels, fontsize=7)
    rare.set_yscale("log")
    rare.set_title("one type 100x rarer: events/s (log)")
    windows = [r for r in records if r["benchmark"] == "any_window"]
    eager = [r for r in windows if r["engine"] == "eager"]
    again = [r for r in windows if r["engine"] == "plans"]
    memory.plot(
        [r["window_min"] for r in eager],
        [r["live_partials_peak"] for r in eager],
        marker="o",
        label="eager: live partial matches (peak)",
    )
    memory.plot(
        [r["window_min"] for r in again],
        [r["buffered_peak"] for r in again],
        marker="o",
        label="recompute: buffered events (peak)",
    )
    memory.set_xlabel("window (minutes)")
    memory.set_title("skip till any match Kleene: memory by window")
    plans = [r for r in records if r["benchmark"] == "drift"]
    drift.bar([r["fixed"] for r in plans], [r["events_per_s"] for r in plans])
    drift.set_title("frequencies change midway: events/s")
    drift.tick_params(axis="x", labelsize=7, rotation=20)
    for axes in (rare, memory):
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle("cesar evaluation plans (perf/planbench.py)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
