"""Build gccl's packages from a fresh clone and run the tests from the unpacked sdist.

    python3 scripts/check_package.py [--no-isolation] [--keep DIR] [PYTEST ARGS...]

Steps, each of which must pass:
1. `git clone` of this repository's committed HEAD into a temporary folder.
2. `python -m build` there: an sdist and a wheel (isolated, so pip fetches setuptools;
   --no-isolation builds with this Python's setuptools, offline).
3. The wheel is tagged for a platform, holds the compiled engine without debug sections and
   none of its C sources.
4. The sdist holds every committed file the tests need (tests/, sample_data/, configs/,
   scripts/, benchmarks/, docs/ and the engine's sources).
5. In the unpacked sdist, the engine is compiled in place and pytest runs there (with this
   Python's packages) on PYTEST ARGS, by default the fast CPU checks below.
Exit 0 when all pass.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What the tests need from the repository, as committed (checked in the sdist).
NEEDED = ("tests/", "sample_data/", "configs/", "scripts/", "benchmarks/", "docs/")
#: The tests run from the unpacked sdist unless others are given: the engine, its binding
#: and the API against their references, and the layout rules.
DEFAULT_TESTS = (
    "tests/native",
    "tests/backends/test_cpu_engine.py",
    "tests/test_api.py",
    "tests/test_layout.py",
    "-q",
    "-p",
    "no:cacheprovider",
)


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, cwd=cwd, check=True, env=env)


def committed(prefixes: tuple[str, ...]) -> set[str]:
    """The committed files under `prefixes`."""
    listed = subprocess.run(
        ["git", "ls-files", *prefixes], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return set(listed)


def check_wheel(wheel: Path) -> None:
    """A platform wheel with the engine, stripped of debug sections, without C sources."""
    tag = wheel.name.removesuffix(".whl").split("-")[-1]
    if tag == "any":
        raise SystemExit(f"{wheel.name}: a pure-Python wheel, not one for a platform")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        modules = [
            n
            for n in names
            if n.startswith("ccl_cli/native/gccl_cpu") and n.endswith((".so", ".pyd"))
        ]
        if len(modules) != 1:
            raise SystemExit(f"{wheel.name}: expected one compiled engine, found {modules}")
        if b".debug_info" in archive.read(modules[0]):
            raise SystemExit(f"{wheel.name}: {modules[0]} has debug information")
        sources = [n for n in names if n.startswith("ccl_cli/native/src/")]
        if sources:
            raise SystemExit(f"{wheel.name}: carries the engine's C sources {sources[:3]}")
    print(f"ok: {wheel.name} ({tag}), {modules[0]} stripped, no C sources")


def check_sdist(sdist: Path, into: Path) -> Path:
    """Every committed file the tests need is in the sdist; returns its unpacked folder."""
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    (folder,) = into.iterdir()
    missing = sorted(
        name for name in committed((*NEEDED, "ccl_cli/native/src/")) if not (folder / name).exists()
    )
    if missing:
        raise SystemExit(f"{sdist.name} lacks {len(missing)} files the tests need: {missing[:10]}")
    print(f"ok: {sdist.name} holds every committed file under {', '.join(NEEDED)}")
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-isolation", action="store_true", help="build with this Python")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument("pytest_args", nargs="*", help="what pytest runs in the sdist")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gccl-package-") as temporary:
        work = args.keep or Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        clone = work / "clone"
        run(["git", "clone", "--quiet", "--no-local", str(ROOT), str(clone)], work)
        build = [sys.executable, "-m", "build", "--outdir", str(work / "dist")]
        run([*build, *(["--no-isolation"] if args.no_isolation else []), str(clone)], work)
        (wheel,) = (work / "dist").glob("*.whl")
        (sdist,) = (work / "dist").glob("*.tar.gz")
        check_wheel(wheel)
        unpacked = check_sdist(sdist, work / "sdist")
        run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], unpacked)
        tests = args.pytest_args or list(DEFAULT_TESTS)
        # the sdist's package first on the path (not an installed gccl), in subprocesses too
        env = {**os.environ, "PYTHONPATH": str(unpacked)}
        run([sys.executable, "-m", "pytest", *tests], unpacked, env)
    print("ok: the packages build from a fresh clone and the tests pass from the sdist")


if __name__ == "__main__":
    main()
