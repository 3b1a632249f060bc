"""The build backend: generate ``cesar.v1`` from the ``.proto`` files, then build with setuptools.

``pip install .`` (and ``pip install -e .``, ``pip wheel .``) call this in-tree
PEP 517 backend (``pyproject.toml``, ``[build-system]``): before setuptools
builds, protoc (grpcio-tools, a build requirement) writes ``*_pb2.py``,
``*_pb2.pyi`` and ``*_pb2_grpc.py`` next to the ``.proto`` files, so every
install carries its gRPC modules and none are committed.

``pip wheel .`` and ``pip install .`` then compile the hot path into the wheel
(:func:`compiled_wheel`, ``proto/build_compiled.py``): the wheel carries the
extension modules beside the sources and is tagged for this Python and
platform.  Compiling needs mypy and cesar's dependencies where the build runs
(``pip wheel --no-build-isolation .`` in the development environment); where
they are missing, or with ``CESAR_PURE=1`` set for the build, the wheel is the
pure one and says so on standard error.

``python proto/build_backend.py --out DIR`` writes them under ``DIR`` instead,
which is how a test checks that the installed code is not stale.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
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
    """PEP 517: generate ``cesar.v1``, setuptools builds the wheel, then the hot path is
    compiled into it (module docstring)."""
    generate()
    name = build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)
    if os.environ.get("CESAR_PURE") == "1":
        print("cesar: CESAR_PURE=1: a pure wheel, nothing compiled", file=sys.stderr)
        return name
    return compiled_wheel(Path(wheel_directory) / name).name


def compiled_wheel(wheel: Path) -> Path:
    """``wheel`` (pure) with the hot path compiled into it by ``proto/build_compiled.py``,
    tagged ``cpXY-cpXY-<platform>``; the pure wheel if the compiler cannot run here."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch)
        with zipfile.ZipFile(wheel) as pure:
            pure.extractall(tree)
        compiler = PROTO_ROOT / "build_compiled.py"
        done = subprocess.run(
            [sys.executable, str(compiler), "--into", str(tree)], capture_output=True, text=True
        )
        if done.returncode != 0:
            print(
                f"cesar: the hot path was not compiled ({done.stderr.strip()[-2000:]}); "
                "the wheel is the pure one",
                file=sys.stderr,
            )
            return wheel
        (info,) = tree.glob("*.dist-info")
        text = (info / "WHEEL").read_text()
        text = text.replace("Root-Is-Purelib: true", "Root-Is-Purelib: false")
        text = re.sub(r"(?m)^Tag: .*$", f"Tag: {tag}-{tag}-{platform}", text)
        (info / "WHEEL").write_text(text)
        out = wheel.with_name(wheel.name.replace("py3-none-any", f"{tag}-{tag}-{platform}"))
        _pack(tree, info, out)
    wheel.unlink()
    return out


def _pack(tree: Path, info: Path, out: Path) -> None:
    """Zip ``tree`` into the wheel ``out`` with a new RECORD (PEP 376: path, hash, size).

    The extension modules go last: an installer writes the files in the wheel's order, and a
    compiled module older than its source is taken for a stale one (``cesar.build``)."""
    files = sorted(
        (p for p in tree.rglob("*") if p.is_file() and p != info / "RECORD"),
        key=lambda p: (p.suffix == ".so", p.as_posix()),
    )
    lines = []
    for path in files:
        data = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{path.relative_to(tree).as_posix()},sha256={digest},{len(data)}")
    lines.append(f"{(info / 'RECORD').relative_to(tree).as_posix()},,")
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as packed:
        for path in [*files, info / "RECORD"]:
            packed.write(path, path.relative_to(tree).as_posix())


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
