"""What every benchmark's JSON result carries beside its figures: the machine and the date."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def stamped(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``records`` with the machine and the date (the noisy machine: compare within one run).

    >>> sorted(stamped([]))
    ['date', 'machine', 'records']
    """
    return {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "records": records,
    }


def write_json(path: Path, result: dict[str, Any]) -> None:
    """Write ``result`` as indented JSON."""
    path.write_text(json.dumps(result, indent=1) + "\n")
