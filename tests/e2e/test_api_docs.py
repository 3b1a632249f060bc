"""The Python session in docs/api.md runs against a real server and its assertions hold."""

import re
from pathlib import Path

from cesar.perf.serverproc import Server

API = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_api_examples_run(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", API.read_text(), flags=re.S)
    assert len(blocks) >= 8
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-alice alice\ntok-feed spark scope=feed\n")
    server = Server(tmp_path / "data", "--tokens", str(tokens)).start()
    try:
        session = {"ADDRESS": server.address}
        for block in blocks:
            exec(compile(block, str(API), "exec"), session)
    finally:
        server.stop()


def test_every_rpc_is_documented() -> None:
    proto = (API.parent.parent / "proto" / "cesar" / "v1" / "cesar.proto").read_text()
    text = API.read_text()
    for rpc in re.findall(r"^\s*rpc (\w+)\(", proto, flags=re.M):
        assert f"## {rpc}" in text or f", {rpc}" in text, rpc
