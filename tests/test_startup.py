"""What a `gccl label` process imports (the modules its run uses, not the others), and how
it ends.

Each run is a fresh Python (`-X importtime` lists every module it imported,
in every thread), so nothing another test imported counts.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

#: Not needed by a quiet CPU run of one 8-bit gray PNG without a config file:
#: the progress display and its console, TIFF and Pillow's readers, CUDA,
#: a JIT compiler, SciPy, the on-disk
#: bookkeeping of runs whose inputs arrive over time.
NOT_FOR_A_QUIET_PNG_RUN = (
    "rich",
    "tifffile",
    "PIL",
    "cupy",
    "ccl_cli.backends.cuda",
    "numba",
    "llvmlite",
    "scipy",
    "sqlite3",
)


def python(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run `python ARGUMENTS` in `cwd` (a fresh process), its output captured."""
    return subprocess.run(
        [sys.executable, *arguments], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def imported(arguments: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `python -X importtime ARGUMENTS`; its result and the modules it imported."""
    done = python(["-X", "importtime", *arguments], cwd)
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done, names


def loaded(names: set[str], package: str) -> bool:
    return any(name == package or name.startswith(package + ".") for name in names)


@pytest.mark.slow
def test_a_quiet_cpu_run_of_one_png_imports_only_what_it_uses(tmp_path: Path) -> None:
    values = np.zeros((24, 32), np.uint8)
    values[2:6, 3:9] = 255
    values[10:20, 20:30] = 255
    Image.fromarray(values).save(tmp_path / "one.png")
    done, names = imported(
        ["-m", "ccl_cli", "label", "one.png", "--out", "o", "--device", "cpu", "-q"], tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "o" / "summary.csv", newline="") as handle:
        (row,) = csv.DictReader(handle)
    assert row["status"] == "ok" and row["kept"] == "2"
    assert loaded(names, "ccl_cli.backends.cpu.labels")  # it labeled
    assert [package for package in NOT_FOR_A_QUIET_PNG_RUN if loaded(names, package)] == []


@pytest.mark.slow
def test_a_run_with_progress_and_a_tiff_loads_rich_and_tifffile(tmp_path: Path) -> None:
    """The other side of the test above: the same check sees the modules a run uses."""
    import tifffile

    tifffile.imwrite(tmp_path / "one.tif", np.eye(8, dtype=np.uint8))
    done, names = imported(
        ["-m", "ccl_cli", "label", "one.tif", "--out", "o", "--device", "cpu"], tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert loaded(names, "rich") and loaded(names, "tifffile")


def test_settings_without_a_config_file_do_not_load_yaml(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("min-area: 3\n")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from ccl_cli.config import resolve\n"
        "resolve([], {'min_area': '2'})\n"
        "print('yaml' in sys.modules)\n"
        f"print(resolve([Path({str(config)!r})], {{}}).min_area, 'yaml' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "3", "True"]


@pytest.mark.slow
@pytest.mark.parametrize(("given", "expected"), [(None, "1"), ("3", "3")])
def test_a_command_imports_numpy_with_openblas_on_one_thread_unless_told(
    tmp_path: Path, given: str | None, expected: str
) -> None:
    """OpenBLAS reads OPENBLAS_NUM_THREADS as numpy is imported, which importing the command
    line does after setting it; a value the user set stays."""
    Image.fromarray(np.eye(16, dtype=np.uint8) * 255).save(tmp_path / "one.png")
    script = (
        "import os, sys\n"
        "from ccl_cli import cli, exits\n"
        "def report(code):\n"
        "    print('numpy' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS'))\n"
        "    sys.stdout.flush()\n"
        "    os._exit(code)\n"
        "exits.end_with = report\n"
        "sys.argv = ['gccl', 'label', 'one.png', '--out', 'o', '--device', 'cpu', '-q']\n"
        "cli.main()\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        environment["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", expected]


@pytest.mark.slow
def test_a_command_ends_with_its_code_its_output_whole_and_no_process_left(
    tmp_path: Path,
) -> None:
    """The command skips the interpreter's teardown (exits.end_with): every JSON line and the
    summary are there, the exit code says an input failed, no worker process is left."""
    (tmp_path / "in").mkdir()
    for i in range(20):
        Image.fromarray(np.eye(16, dtype=np.uint8) * 255).save(tmp_path / "in" / f"{i:02}.png")
    (tmp_path / "in" / "bad.png").write_bytes(b"not a png")
    arguments = ["label", "in", "--out", "o", "--device", "cpu", "--processes", "2", "--json"]
    done = python(["-m", "ccl_cli", *arguments], tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(line["status"] for line in lines) == ["failed"] + ["ok"] * 20
    with open(tmp_path / "o" / "summary.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 21
    assert _processes_in(tmp_path) == []


#: A command run with an object whose finalizer, run by the interpreter's teardown, prints,
#: and an exit handler registered while the command runs (as multiprocessing's are).
_TEARDOWN_WATCHED = """
import atexit, os, sys
from ccl_cli import cli

class Watched:
    def __del__(self, write=os.write):
        write(1, b"teardown\\n")

watched = Watched()
real = cli.app
def app(*args, **kwargs):
    atexit.register(print, "handler", flush=True)
    return real(*args, **kwargs)
cli.app = app
sys.argv = ["gccl", *sys.argv[1:]]
cli.main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("traced", [False, True])
def test_the_command_ends_after_the_exit_handlers_without_the_teardown(
    tmp_path: Path, traced: bool
) -> None:
    """Exit handlers registered during the command run, then the process ends with the
    command's code; the interpreter's teardown runs only under a tracer (coverage)."""
    (tmp_path / "bad.png").write_bytes(b"not a png")
    script = (
        _TEARDOWN_WATCHED
        if not traced
        else "import sys; sys.settrace(lambda *a: None)\n" + _TEARDOWN_WATCHED
    )
    arguments = ["label", "bad.png", "--out", "o", "--device", "cpu", "-q"]
    done = python(["-c", script, *arguments], tmp_path)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout.split() == (["handler", "teardown"] if traced else ["handler"])


def _processes_in(folder: Path, seconds: float = 10.0) -> list[int]:
    """The processes whose working folder is `folder` (the run's workers and fork server),
    once they are gone or after `seconds`: a fork server ends just after its client."""
    deadline = time.monotonic() + seconds
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and (entry / "cwd").resolve() == folder.resolve():
                    found.append(int(entry.name))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.slow
def test_under_a_profiler_the_command_exits_normally_so_it_writes_its_results(
    tmp_path: Path,
) -> None:
    Image.fromarray(np.eye(16, dtype=np.uint8) * 255).save(tmp_path / "one.png")
    arguments = ["label", "one.png", "--out", "o", "--device", "cpu", "-q"]
    done = python(["-m", "cProfile", "-o", "run.prof", "-m", "ccl_cli", *arguments], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "run.prof").stat().st_size > 0
