"""Generate the ``cesar.v1`` Python modules from ``proto/cesar/v1/*.proto``.

``python -m server.protogen`` writes ``*_pb2.py``, ``*_pb2.pyi`` and
``*_pb2_grpc.py`` next to the ``.proto`` files (``make setup`` runs it);
``--out DIR`` writes them elsewhere, which is how a test checks that the
generated code is not stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent.parent / "proto"


def proto_files(root: Path = PROTO_ROOT) -> list[Path]:
    """The service definitions, relative to ``root``, sorted."""
    return sorted(p.relative_to(root) for p in (root / "cesar" / "v1").glob("*.proto"))


def generate(out: Path, root: Path = PROTO_ROOT) -> list[Path]:
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.protogen", description=__doc__)
    parser.add_argument("--out", type=Path, default=PROTO_ROOT, help="output root")
    args = parser.parse_args(argv)
    for path in generate(args.out):
        print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
