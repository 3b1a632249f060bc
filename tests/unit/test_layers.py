"""Every import runs down: compile side < indices < engine < server < client < perf and
the CLI.

The layers, lowest first; a module may import its own layer and those below,
never one above (imports inside functions count too, except the ``cesar``
command's entry point group, which is how commands above the server register).
``cesar.v1`` (generated gRPC code), ``cesar.examples`` (data) and ``cesar.build`` (which
build runs) sit beside the compile side: anything may import them.
"""

import ast
from pathlib import Path

import pytest

import cesar

LAYERS = [
    ("cesar.v1", "cesar.examples", "cesar.build"),
    ("cesar.automata",),
    ("cesar.index",),
    ("cesar.server.engine",),
    ("cesar.server.wire", "cesar.server.host"),
    ("cesar.server.front", "cesar.server.shard", "cesar.server.feed", "cesar.server.console"),
    ("cesar.client",),
    ("cesar.server.cli", "cesar.perf"),
]
# Within the top layer the CLI reaches perf only through entry points, never by import.
FORBIDDEN = {("cesar.server.cli", "cesar.perf")}
PACKAGE_DIRS = {
    "cesar.automata": "automata",
    "cesar.index": "index",
    "cesar.server": "server",
    "cesar.client": "server/client",
    "cesar.perf": "perf",
    "cesar.examples": "examples",
    "cesar.v1": "proto/cesar/v1",
}
ROOT = Path(__file__).resolve().parents[2]


def layer_of(module: str) -> tuple[int, str]:
    """(layer number, the layer's package) of a cesar module."""
    if module == "cesar.server":  # the package's face: a docstring, no imports
        return len(LAYERS) - 1, module
    for number, packages in enumerate(LAYERS):
        for package in packages:
            if module == package or module.startswith(package + "."):
                return number, package
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def modules() -> list[tuple[str, Path]]:
    out = []
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "_pb2" in path.name or (package == "cesar.server" and "client" in path.parts):
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            out.append((name, path))
    return [*out, ("cesar.build", ROOT / "proto" / "cesar" / "build.py")]


def cesar_imports(path: Path, name: str) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                base = name.rsplit(".", node.level)[0]
                found.append((node.lineno, f"{base}.{node.module}"))
            else:
                found.append((node.lineno, node.module))
    return [(line, m) for line, m in found if m == "cesar" or m.startswith("cesar.")]


@pytest.mark.parametrize(("name", "path"), modules(), ids=lambda v: str(v))
def test_no_import_runs_up(name: str, path: Path) -> None:
    own, own_package = layer_of(name)
    for line, target in cesar_imports(path, name):
        if target == "cesar":
            continue
        theirs, their_package = layer_of(target)
        assert theirs <= own, (
            f"{path.name}:{line}: {name} (layer {own}) imports {target} ({theirs})"
        )
        assert (own_package, their_package) not in FORBIDDEN, (
            f"{path.name}:{line}: imports {target}"
        )


def test_every_installed_module_is_checked() -> None:
    import pkgutil

    installed = {m.name for m in pkgutil.walk_packages(cesar.__path__, "cesar.")}
    installed |= {"cesar.automata", "cesar.index", "cesar.server", "cesar.perf", "cesar.examples"}
    checked = {name for name, _ in modules()}
    assert installed - {"cesar.v1"} - {n for n in installed if "_pb2" in n} <= checked
