"""The generated cesar.v1 modules are exactly what the .proto files generate now."""

from pathlib import Path

import pytest

from server.protogen import PROTO_ROOT, generate, proto_files


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    written = generate(tmp_path)
    assert {p.name for p in written} >= {"cesar_pb2.py", "cesar_pb2_grpc.py", "shard_pb2.py"}
    for relative in written:
        installed = PROTO_ROOT / relative
        assert installed.exists(), f"{relative} missing: run make setup"
        assert installed.read_bytes() == (tmp_path / relative).read_bytes(), (
            f"{relative} is stale: run make setup (python -m server.protogen)"
        )


def test_every_field_of_the_public_api_has_a_comment() -> None:
    for relative in proto_files():
        lines = (PROTO_ROOT / relative).read_text().splitlines()
        for number, line in enumerate(lines):
            code = line.split("//")[0].strip()
            if code.endswith(";") and "=" in code and not code.startswith(("option", "syntax")):
                documented = "//" in line or lines[number - 1].strip().startswith("//")
                assert documented, f"{relative}:{number + 1}: field without a comment: {code}"


@pytest.mark.parametrize("relative", proto_files())
def test_proto_files_live_under_their_package(relative: Path) -> None:
    assert relative.parts[:2] == ("cesar", "v1")
