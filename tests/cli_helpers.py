"""Helpers of the tests that run whole `gccl label` jobs: in this process (CliRunner), in a
subprocess under a timeout (the attacks), on other workers (Dask, processes); and `gccl bench`
in this process.

Imported by name (`from cli_helpers import ...`), like oracles.py.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tifffile
from PIL import Image
from rich.console import Console
from typer.testing import CliRunner

from ccl_cli.bench.command import Options, run_bench_command
from ccl_cli.cli import app
from ccl_cli.io.output_paths import GCCL_DIR, RUN_RECORD_NAME

#: Generous: a 2-core CI machine starting worker processes can be slow.
WAIT_SECONDS = 60

#: Generous: a subprocess run that needs this long has hung (a good one takes a second or two).
TIMEOUT = 120


def gccl_process(
    *args: str, cwd: Path, stdin: str | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """`gccl label ARGS --quiet --device cpu` in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "ccl_cli", "label", *args, "--quiet", "--device", "cpu"],
        cwd=cwd,
        input=stdin or "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def mask(path: Path, size: int = 12, seed: int = 0) -> Path:
    """A small random 8-bit mask PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(((rng.random((size, size)) < 0.4) * 255).astype(np.uint8)).save(path)
    return path


def tree(root: Path) -> dict[str, bytes]:
    """Every file below `root` (links as their target's name), by relative path."""
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(root))] = os.readlink(path).encode()
        elif path.is_file():
            found[str(path.relative_to(root))] = path.read_bytes()
    return found


def summary(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        return {row["path"]: row for row in csv.DictReader(handle)}


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The run's only stderr line (a usage error: no traceback)."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def gccl(*args: str) -> tuple[int, str, str]:
    """Run `gccl label ... --quiet`: exit code, stdout, stderr."""
    result = CliRunner().invoke(app, ["label", *args, "--quiet", "--device", "cpu"])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def make_inputs(root: Path, count: int, size: int) -> None:
    """`count` random masks of a few shapes and dtypes under `root` and a sub-folder."""
    rng = np.random.default_rng(11)
    for i in range(count):
        shape = (size + i % 3, size - i % 2)
        folder = root / "sub" if i % 4 == 0 else root
        folder.mkdir(parents=True, exist_ok=True)
        if i % 5 == 0:
            np.save(folder / f"img{i:03}.npy", rng.integers(0, 4, shape).astype(np.uint16))
        else:
            mask = ((rng.random(shape) < 0.45) * 255).astype(np.uint8)
            Image.fromarray(mask).save(folder / f"img{i:03}.png")


def make_fax(path: Path, pages: int, size: int = 24) -> None:
    """A multi-page TIFF of `pages` random masks (a fax, a scanned document)."""
    rng = np.random.default_rng(pages)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tifffile.TiffWriter(path) as tiff:
        for _ in range(pages):
            mask = ((rng.random((size, size + 3)) < 0.45) * 255).astype(np.uint8)
            tiff.write(mask, photometric="minisblack", compression="zlib")


def files(out: Path) -> dict[str, bytes]:
    """Every file under `out` but gccl's own folder (the lock names its holder, the record of
    made files the outputs' inodes), summary without seconds, the run record's version and
    options (not its times and engine)."""
    found = {}
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.relative_to(out).parts[0] != GCCL_DIR:
            found[str(path.relative_to(out))] = path.read_bytes()
    found["summary.csv"] = summary_without_seconds(out).encode()
    if RUN_RECORD_NAME in found:
        record = json.loads(found[RUN_RECORD_NAME])
        found[RUN_RECORD_NAME] = json.dumps([record["version"], record["options"]]).encode()
    return found


def summary_without_seconds(out: Path) -> str:
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][-1] == "seconds"
    return "\n".join(",".join(row[:-1]) for row in rows)


def json_lines(stdout: str, moved: tuple[str, str] | None = None) -> dict[str, dict]:
    """--json lines by input path, without seconds; `moved` = (old, new) renames
    the leading folder of every output path, to compare runs into two --out folders."""
    objects = [json.loads(line) for line in stdout.splitlines()]
    for obj in objects:
        del obj["seconds"]
        if moved is not None:
            obj["outputs"] = {k: v.replace(*moved, 1) for k, v in obj["outputs"].items()}
    return {obj["path"]: obj for obj in objects}


def on_first_outputs(out: Path, action: Callable[[], None]) -> tuple[threading.Thread, list[int]]:
    """A started thread that runs `action` once a statistics CSV appears under `out`;
    the list gets how many there were by then."""
    seen: list[int] = []

    def watch() -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            done = len(list(out.rglob("*.stats.csv"))) if out.exists() else 0
            if done:
                seen.append(done)
                action()
                return
            time.sleep(0.005)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, seen


def stopped_by_sigterm(inputs: Path, out: Path, *options: str) -> tuple[int, str]:
    """Run `gccl label INPUTS --out OUT OPTIONS` and send this process SIGTERM once its
    first outputs appear: (exit code, stderr)."""
    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # a late signal never ends pytest
    try:
        sender, seen = on_first_outputs(out, lambda: os.kill(os.getpid(), signal.SIGTERM))
        code, _, stderr = gccl(str(inputs), "--out", str(out), *options)
        sender.join(WAIT_SECONDS)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen, "the run ended before any output appeared"
    return code, stderr


def assert_interrupted_summary(inputs: Path, out: Path, count: int) -> None:
    """summary.csv lists all `count` inputs; some not-run ("interrupted"); every ok one
    has its outputs."""
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == count
    not_run = [row for row in rows if row["status"] == "not-run"]
    assert not_run
    assert {row["message"] for row in not_run} == {"interrupted"}
    for row in rows:
        if row["status"] == "ok":
            relative = Path(row["path"]).relative_to(inputs)
            assert (out / relative.with_suffix(".stats.csv")).exists()


def run_bench(opts: Options, inputs: list[str] | None = None, **paths: Path) -> tuple[int, str]:
    """`gccl bench` with `opts` in this process, quiet; (exit code, what it printed on stderr)."""
    err = io.StringIO()
    code = run_bench_command(
        inputs or [],
        opts,
        quiet=True,
        out=Console(file=io.StringIO(), width=200),
        err=Console(file=err, width=200),
        **paths,
    )
    return code, err.getvalue()
