"""`pip install .` gives a working cesar: wheel built from a clean copy, installed in a fresh venv.

The wheel is built from the tracked files alone (as a clean clone has them),
by the project's build backend, which generates cesar.v1 and compiles the hot
path into it (the development build's C objects reused through
``CESAR_BUILD_CACHE``: only what differs is compiled again); it is installed
without dependencies into a new virtual environment whose third-party
packages come from the project's (a ``.pth`` line: no network, and no
editable cesar).  From outside the repository the installed ``cesar`` says it
runs compiled, and ``cesar run`` reads the bundled sample and prints what the
development install prints.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from cesar.build import COMPILED

ROOT = Path(__file__).resolve().parents[2]
STOCK = "Stock(Name:string,Price:float,Volume:int)[min]"


def run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_wheel_installs_and_runs_from_outside_the_repository(tmp_path: Path) -> None:
    source = tmp_path / "source"
    tracked = run("git", "ls-files", "-co", "--exclude-standard", cwd=ROOT).splitlines()
    for relative in tracked:
        if (ROOT / relative).is_file():
            (source / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / relative, source / relative)
    dist = tmp_path / "dist"
    cache = {**os.environ, "CESAR_BUILD_CACHE": str(ROOT / "build" / "mypyc")}
    cache.pop("CESAR_PURE", None)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
        "-w", dist, source, cwd=tmp_path, env=cache)  # fmt: skip
    (wheel,) = dist.glob("cesar-*.whl")
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name.startswith(f"cesar-0.1.0-{tag}-{tag}-"), wheel.name
    names = run(sys.executable, "-m", "zipfile", "-l", wheel, cwd=tmp_path)
    for member in ("cesar/v1/cesar_pb2_grpc.py", "cesar/automata/cel.lark",
                   "cesar/examples/stocks_sample.csv", "cesar/server/cli/main.py",
                   "cesar/server/engine/rounds.cpython-", "__mypyc.cpython-"):  # fmt: skip
        assert member in names, f"{member} is not in the wheel"
    members = [line.split()[0] for line in names.splitlines()[1:] if line.strip()]
    leaked = [m for m in members if m.split("/")[0] in ("server", "automata", "index", "perf")]
    assert not leaked, f"installed outside the cesar package: {leaked[:3]}"

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path)
    Path(site.strip(), "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run(python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path)

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    where = run(python, "-c", "import cesar.examples as e; print(e.STOCKS_SAMPLE, e.QUERIES)",
                cwd=outside).split()  # fmt: skip
    sample, queries = Path(where[0]), Path(where[1])
    assert venv in sample.parents and ROOT not in sample.resolve().parents
    args = ["run", "--stream", STOCK, "--query", queries / "drops.cel", sample]
    installed = run(venv / "bin" / "cesar", *args, cwd=outside)
    developed = run(Path(sys.executable).with_name("cesar"), *args, cwd=outside)
    assert installed and installed == developed
    assert "loadtest" in run(venv / "bin" / "cesar", "--help", cwd=outside)
    pure = {k: v for k, v in os.environ.items() if k != "CESAR_PURE"}
    version = run(venv / "bin" / "cesar", "--version", cwd=outside, env=pure)
    assert f"compiled (mypyc, {len(COMPILED)} modules)" in version, version
