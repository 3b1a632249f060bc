"""Which build runs: the compiled modules when current, the sources otherwise (cesar.build)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import cesar.server.engine.engine
from cesar import build
from cesar.build import COMPILED, SUFFIX, extension_of, source_of, state


def _tree(tmp_path, compiled):
    """A package tree holding every module of COMPILED as a source, the first ``compiled``
    of them built too."""
    package = tmp_path / "cesar"
    for number, module in enumerate(COMPILED):
        source = source_of(module, package)
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text("")
        os.utime(source, (1_000, 1_000))
        if number < compiled:
            extension_of(module, package).write_bytes(b"")
            os.utime(extension_of(module, package), (2_000, 2_000))
    return package


def test_the_state_of_a_tree_none_some_all_or_a_source_edited_since(tmp_path):
    assert state(_tree(tmp_path / "a", 0)) == "pure"
    assert state(_tree(tmp_path / "b", 3)) == "partial"
    package = _tree(tmp_path / "c", len(COMPILED))
    assert state(package) == "compiled"
    os.utime(source_of(COMPILED[-1], package), (3_000, 3_000))
    assert state(package) == "stale"


def test_this_suite_runs_the_compiled_build():
    # make setup compiles the hot path; a failure here means it did not, or a source changed
    # since (make setup builds it again).
    assert build.state() == "compiled" and not build.running_pure(), build.describe()
    assert cesar.server.engine.engine.__file__.endswith(SUFFIX)


def test_cesar_pure_runs_every_module_from_its_source():
    code = (
        "import importlib, cesar.build as b; print(b.describe()); "
        "print(*(importlib.import_module(m).__file__.endswith('.py') for m in b.COMPILED))"
    )
    for value, says, sources in (("1", "pure (CESAR_PURE is set)", True), ("0", "compiled", False)):
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "CESAR_PURE": value},
            capture_output=True,
            text=True,
            check=True,
        )
        first, second = done.stdout.splitlines()
        assert first.startswith(says)
        assert second.split() == [str(sources)] * len(COMPILED)


def _constants_read_in_functions(tree: ast.Module) -> set[str]:
    """The module-level names of ``tree`` bound to a value without ``Final`` that a function
    of the module reads (annotations and casts aside: type aliases are read there)."""
    bound = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            final = "Final" in ast.unparse(node.annotation)
            if isinstance(node.target, ast.Name) and not final:
                bound.add(node.target.id)
    read = set()
    for function in ast.walk(tree):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations = {
                id(part)
                for arg in ast.walk(function.args)
                if isinstance(arg, ast.arg) and arg.annotation is not None
                for part in ast.walk(arg.annotation)
            }
            annotations |= {id(part) for part in ast.walk(function.returns or ast.Pass())}
            for statement in function.body:
                for node in ast.walk(statement):
                    if isinstance(node, ast.AnnAssign):
                        annotations |= {id(part) for part in ast.walk(node.annotation)}
                    elif isinstance(node, ast.Call) and ast.unparse(node.func) == "cast":
                        annotations |= {id(part) for part in ast.walk(node.args[0])}
                    if isinstance(node, ast.Name) and id(node) not in annotations:
                        read.add(node.id)
    return bound & read


def test_a_compiled_modules_constants_are_final():
    # mypyc reads a module-level name that is not Final from the module's dict at every use
    # (a varint's table: two dict look-ups a call, 11 % of a shard's alert writing); Final
    # makes it a C static or an inlined literal.
    found = {
        module: sorted(names)
        for module in COMPILED
        if (names := _constants_read_in_functions(ast.parse(source_of(module).read_text())))
    }
    assert not found, found
