"""Which build runs: the hot path compiled by mypyc, or every module from its Python source.

``make setup`` compiles the modules of :data:`COMPILED` (the epoch's round, the
engine's state and parameters, the indices, the term evaluator) with mypyc into
extension modules beside their sources (``proto/build_compiled.py``); Python
then imports the extension before the source.  The sources stay the program:
mypyc compiles the same strictly typed code, and both builds give the same
outputs (the property tests run on the compiled build, a smaller set on the
pure one, ``tests/integration/test_build.py``).

The pure modules run instead when ``CESAR_PURE=1`` is in the environment, or
when any compiled module is older than its source (an edit since the last
``make setup``): all or none, since compiled modules know each other's class
layouts.  :func:`install` puts a finder before the standard ones that loads
:data:`COMPILED` from source; ``cesar/__init__.py`` calls it before anything
else is imported.  Cost at start: two ``stat`` calls per compiled module.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

COMPILED: tuple[str, ...] = (
    "cesar.automata.arithmetic",
    "cesar.automata.evaluate",
    "cesar.automata.making",
    "cesar.automata.schema",
    "cesar.automata.skipping",
    "cesar.index.ai",
    "cesar.index.keyed",
    "cesar.index.masks",
    "cesar.index.ranges",
    "cesar.index.static",
    "cesar.index.thresholds",
    "cesar.server.engine.clocks",
    "cesar.server.engine.codegen",
    "cesar.server.engine.dag",
    "cesar.server.engine.edges",
    "cesar.server.engine.engine",
    "cesar.server.engine.installing",
    "cesar.server.engine.matches",
    "cesar.server.engine.options",
    "cesar.server.engine.params",
    "cesar.server.engine.probing",
    "cesar.server.engine.program",
    "cesar.server.engine.reaching",
    "cesar.server.engine.remembered",
    "cesar.server.engine.rounds",
    "cesar.server.engine.skipping",
    "cesar.server.engine.state",
    "cesar.server.engine.stepping",
    "cesar.server.engine.work",
    "cesar.server.shard.lanes",
    "cesar.server.wire.alertbytes",
    "cesar.server.wire.protocolumns",
)
"""The modules ``make setup`` compiles, by their installed names."""

ROOT = Path(__file__).parent
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def source_of(module: str, root: Path = ROOT) -> Path:
    """The ``.py`` file of ``module`` under the installed package ``root``."""
    return root.joinpath(*module.split(".")[1:]).with_suffix(".py")


def extension_of(module: str, root: Path = ROOT) -> Path:
    """Where the compiled ``module`` lies: beside its source, with this Python's suffix."""
    return source_of(module, root).with_name(module.rsplit(".", 1)[1] + SUFFIX)


def state(root: Path = ROOT) -> str:
    """``compiled``, ``pure`` (none compiled), ``partial`` or ``stale`` (a source is newer)."""
    found = 0
    for module in COMPILED:
        try:
            built = extension_of(module, root).stat().st_mtime
        except FileNotFoundError:
            continue
        found += 1
        if source_of(module, root).stat().st_mtime > built:
            return "stale"
    if found == 0:
        return "pure"
    return "compiled" if found == len(COMPILED) else "partial"


def pure_requested() -> bool:
    """Whether ``CESAR_PURE`` asks for the pure modules (any value but empty and ``0``)."""
    return os.environ.get("CESAR_PURE", "") not in ("", "0")


def running_pure() -> bool:
    """Whether this process runs the pure modules (:func:`install` decided it)."""
    return any(isinstance(finder, SourceFirst) for finder in sys.meta_path)


def describe() -> str:
    """One line on the build this process runs, as ``cesar --version`` prints it.

    >>> describe().split(" ")[0] in ("compiled", "pure")
    True
    """
    if not running_pure():
        return f"compiled (mypyc, {len(COMPILED)} modules)"
    if pure_requested():
        return "pure (CESAR_PURE is set)"
    reasons = {
        "pure": "not compiled: make setup builds it",
        "partial": "some modules not compiled: make setup builds them",
        "stale": "a compiled module is older than its source: make setup builds it again",
    }
    return f"pure ({reasons[state()]})"


class SourceFirst(importlib.abc.MetaPathFinder):
    """Finds each module of :data:`COMPILED` as its Python source, past its extension."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in COMPILED or not path:
            return None
        name = fullname.rsplit(".", 1)[1] + ".py"
        for folder in path:
            candidate = Path(folder, name)
            if candidate.exists():
                return importlib.util.spec_from_file_location(fullname, candidate)
        return None


def install() -> None:
    """Load the pure modules when asked to or when the compiled ones are not all current."""
    if running_pure():
        return
    if pure_requested() or state() != "compiled":
        sys.meta_path.insert(0, SourceFirst())
