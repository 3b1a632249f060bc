"""Throughput against number of queries, per engine, from techbench JSON files (Figures 16-17).

    pip install -e '.[perf]'        # matplotlib, only for plotting
    python -m perf.plot OUT.png RUN.json [RUN.json ...]

Each RUN.json is a ``perf.techbench --json`` output; every (template, engine) pair becomes one
line of events/s against queries, on a log scale as in the paper's Figure 17.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path


def series(paths: Sequence[str]) -> dict[str, list[tuple[int, float]]]:
    """(template, engine) label → sorted (queries, events/s) points."""
    lines: dict[str, list[tuple[int, float]]] = {}
    for path in paths:
        for record in json.loads(Path(path).read_text())["records"]:
            label = f"{record['template']}, {record['engine']}"
            lines.setdefault(label, []).append((record["queries"], record["events_per_s"]))
    return {label: sorted(points) for label, points in sorted(lines.items())}


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
