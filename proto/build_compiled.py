"""Compile the hot path (``cesar.build.COMPILED``) with mypyc into the installed package.

``make setup`` runs this after installing cesar: mypyc type-checks the modules
with the project's mypy settings (``pyproject.toml``), generates C, and
setuptools builds one extension per module and a shared library; they are
copied into the installed package tree (the editable install's tree of links,
or ``--into`` another), beside the sources, where Python finds them first.
The C sources and objects stay under ``build/mypyc``.  ``cesar --version``
says whether the compiled modules run (``cesar.build``).

    python proto/build_compiled.py [--into SITE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent


def compile_in_parallel(compiler: Any, sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
    """``CCompiler.compile`` with its C files compiled one per core at once: mypyc writes a C
    file per module (64 here), which the standard compile runs one after the other."""
    _, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
        kwargs.get("output_dir"),
        kwargs.get("macros"),
        kwargs.get("include_dirs"),
        sources,
        kwargs.get("depends"),
        kwargs.get("extra_postargs"),
    )
    cc_args = compiler._get_cc_args(
        pp_opts, kwargs.get("debug", False), kwargs.get("extra_preargs")
    )

    def one(obj: str) -> None:
        source, extension = build[obj]
        compiler._compile(obj, source, extension, cc_args, extra_postargs, pp_opts)

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(one, objects))
    return list(objects)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--into", type=Path, help="the folder holding the installed cesar")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path(os.environ.get("CESAR_BUILD_CACHE") or REPOSITORY / "build" / "mypyc"),
        help="where the C sources and objects are kept (default: build/mypyc, or "
        "$CESAR_BUILD_CACHE); an unchanged module's object is not compiled again",
    )
    args = parser.parse_args(argv)

    import distutils.ccompiler  # setuptools' copy, under the name its build_ext imports

    from mypyc.build import mypycify
    from setuptools import Distribution

    distutils.ccompiler.CCompiler.compile = compile_in_parallel  # type: ignore[method-assign]

    # The installed cesar, not proto/cesar (this script's folder is first on the path).
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent]
    if args.into is not None:
        sys.path.insert(0, str(args.into))
    import cesar
    from cesar.build import COMPILED, SUFFIX, extension_of, source_of

    root = Path(cesar.__file__).parent.parent
    package = root / "cesar"
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    # Relative to the folder holding cesar: the C mypyc writes (it names each source in its
    # tracebacks) is then the same wherever cesar is installed, and objects are reused.
    sources = [str(source_of(module, package).relative_to(root)) for module in COMPILED]
    tick = time.perf_counter()
    here = Path.cwd()
    os.chdir(root)
    try:
        modules = mypycify(
            [
                "--config-file",
                str(REPOSITORY / "pyproject.toml"),
                "--cache-dir",
                str(work / "mypy_cache"),
                *sources,
            ],
            opt_level="3",
            multi_file=True,
            target_dir=str(work / "build"),
        )
        distribution = Distribution({"name": "cesar-compiled", "ext_modules": modules})
        command = distribution.get_command_obj("build_ext")
        command.build_lib = str(work / "lib")
        command.build_temp = str(work / "temp")
        distribution.run_command("build_ext")
    finally:
        os.chdir(here)
    built = work / "lib"
    # An extension of a module no longer compiled, or an earlier build's shared library, would
    # be loaded before the source (or hold the old class layouts): none is left behind.
    wanted = {extension_of(module, package) for module in COMPILED}
    for stale in package.rglob(f"*{SUFFIX}"):
        if stale not in wanted:
            stale.unlink()
    for stale in root.glob(f"*__mypyc{SUFFIX}"):
        stale.unlink()
    for module in COMPILED:
        shutil.copy(extension_of(module, built / "cesar"), extension_of(module, package))
    for shared in (m.name for m in modules if m.name.endswith("__mypyc")):
        shutil.copy(built / f"{shared}{SUFFIX}", root / f"{shared}{SUFFIX}")
    seconds = time.perf_counter() - tick
    print(f"compiled {len(COMPILED)} modules with mypyc in {seconds:.0f} s into {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
