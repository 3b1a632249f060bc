"""The build backend: the installed cesar.v1 modules are exactly what the .proto files generate."""

import importlib.util
from pathlib import Path

import pytest

import cesar.v1

PROTO_ROOT = Path(__file__).resolve().parents[2] / "proto"
_spec = importlib.util.spec_from_file_location("build_backend", PROTO_ROOT / "build_backend.py")
assert _spec is not None and _spec.loader is not None
build_backend = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_backend)
generate, proto_files = build_backend.generate, build_backend.proto_files
INSTALLED = Path(cesar.v1.__file__).parent


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    written = generate(tmp_path)
    assert {p.name for p in written} >= {"cesar_pb2.py", "cesar_pb2_grpc.py", "shard_pb2.py"}
    for relative in written:
        installed = INSTALLED / relative.name
        assert installed.exists(), f"{relative} missing: run make setup"
        assert installed.read_bytes() == (tmp_path / relative).read_bytes(), (
            f"{relative} is stale: run make setup "
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
