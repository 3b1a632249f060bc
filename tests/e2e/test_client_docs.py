"""The Python session in docs/client.md runs against a real server and its assertions hold."""

import re
from pathlib import Path

from cesar.perf.serverproc import Server

CLIENT = Path(__file__).resolve().parents[2] / "docs" / "client.md"


def test_the_client_guide_runs_as_written(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", CLIENT.read_text(), flags=re.S)
    assert len(blocks) >= 6
    server = Server(tmp_path / "data").start()
    try:
        session = {"ADDRESS": server.address, "TMP": tmp_path}
        for block in blocks:
            exec(compile(block, str(CLIENT), "exec"), session)
    finally:
        server.stop()
