"""What every benchmark's JSON result carries beside its figures: the machine and the date."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any


def machine() -> str:
    """Host name, architecture and cores of this machine."""
    return f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores"


def now() -> str:
    """The local date and time, with its zone."""
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


def stamped(records: list[dict[str, Any]]) -> dict[str, Any]:
    """``records`` with the machine and the date (the noisy machine: compare within one run).

    >>> sorted(stamped([]))
    ['date', 'machine', 'records']
    """
    return {"machine": machine(), "date": now(), "records": records}


def write_json(path: Path, result: dict[str, Any]) -> None:
    """Write ``result`` as indented JSON."""
    path.write_text(json.dumps(result, indent=1) + "\n")
