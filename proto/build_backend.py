"""The build backend: generate ``cesar.v1`` from the ``.proto`` files, then build with setuptools.

``pip install .`` (and ``pip install -e .``, ``pip wheel .``) call this in-tree
PEP 517 backend (``pyproject.toml``, ``[build-system]``): before setuptools
builds, protoc (grpcio-tools, a build requirement) writes ``*_pb2.py``,
``*_pb2.pyi`` and ``*_pb2_grpc.py`` next to the ``.proto`` files, so every
install carries its gRPC modules and none are committed.

``python proto/build_backend.py --out DIR`` writes them under ``DIR`` instead,
which is how a test checks that the installed code is not stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from setuptools import build_meta
from setuptools.build_meta import (
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

PROTO_ROOT = Path(__file__).resolve().parent

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]


def proto_files(root: Path = PROTO_ROOT) -> list[Path]:
    """The service definitions, relative to ``root``, sorted."""
    return sorted(p.relative_to(root) for p in (root / "cesar" / "v1").glob("*.proto"))


def generate(out: Path = PROTO_ROOT, root: Path = PROTO_ROOT) -> list[Path]:
    """Run protoc (grpcio-tools) on every ``.proto``; the files written under ``out``."""
    from grpc_tools import protoc

    files = [str(p) for p in proto_files(root)]
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{root}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            *files,
        ]
    )
    if status != 0:
        raise RuntimeError(f"protoc failed with status {status}")
    return sorted(p.relative_to(out) for p in (out / "cesar" / "v1").glob("*_pb2*"))


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 517: generate ``cesar.v1``, then setuptools builds the wheel."""
    generate()
    return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """PEP 660: generate ``cesar.v1``, then setuptools builds the editable wheel."""
    generate()
    return build_meta.build_editable(wheel_directory, config_settings, metadata_directory)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python proto/build_backend.py", description=__doc__)
    parser.add_argument("--out", type=Path, default=PROTO_ROOT, help="output root")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
