"""The proto outside Python: a Node.js client (@grpc/grpc-js + @grpc/proto-loader) end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from google.protobuf.json_format import MessageToDict

from cesar.perf.serverproc import QUERIES, Server, expected_lines, normalized, sample_events
from cesar.server.wire.convert import to_event

NODE_DIR = Path(__file__).with_name("node")


def _install() -> None:
    """``npm ci`` from the committed lock file, once per checkout."""
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        subprocess.run(
            [shutil.which("npm") or "npm", "ci", "--no-audit", "--no-fund"],
            cwd=NODE_DIR,
            check=True,
            capture_output=True,
            timeout=300,
        )


def test_node_client_subscribes_publishes_and_receives_the_alerts(
    server: Server, tmp_path: Path
) -> None:
    _install()
    events = sample_events()[:900]
    payload = [MessageToDict(to_event(e), preserving_proto_field_name=True) for e in events]
    events_file = tmp_path / "events.json"
    events_file.write_text(json.dumps(payload))
    result = subprocess.run(
        ["node", str(NODE_DIR / "client.js"), server.address, str(QUERIES[1]), str(events_file)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    expected = normalized(expected_lines([("drops", QUERIES[1].read_text())], events))
    assert sum(expected.values()) > 10
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    assert _numbers_as_floats(
        json.dumps({k: v for k, v in line.items() if k not in ("subscription", "seq")})
        for line in lines
    ) == _numbers_as_floats(expected.elements())


def _numbers_as_floats(lines: Iterable[str]) -> Counter[str]:
    """JavaScript prints 3233.0 as 3233; compare numbers as floats."""
    out: Counter[str] = Counter()
    for line in lines:
        record = json.loads(line)
        record["attrs"] = {
            k: float(v) if isinstance(v, int | float) else v for k, v in record["attrs"].items()
        }
        out[json.dumps(record, sort_keys=True)] += 1
    return out
