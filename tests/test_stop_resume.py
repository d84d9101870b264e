"""A run stopped at any moment, however (SIGINT, SIGTERM, SIGHUP, SIGKILL, a crash between any
two steps of an output's commit), on one or several processes, resumes cleanly: a rerun with
--skip-existing labels exactly what is left and exits 0, one without replaces everything, and
the stopped run's summary lists as ok every input whose outputs it finished.

Outputs are checked against scipy.ndimage.label (the label images) and a run that was never
stopped (every other file)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import TIMEOUT, gccl, mask
from label_files import read_label_image
from PIL import Image
from scipy import ndimage

#: Each input's files with --preview --polygons.
ENDINGS = (".labels.png", ".stats.csv", ".preview.png", ".polygons.geojson")
INPUTS = 10
OPTIONS = ("--preview", "--polygons")


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """INPUTS small masks in a folder, the outputs of a run never stopped, their stems."""
    root = tmp_path_factory.mktemp("job")
    for n in range(INPUTS):
        mask(root / "in" / f"m{n}.png", size=24 + n, seed=n)
    assert gccl(str(root / "in"), "-o", str(root / "clean"), *OPTIONS)[0] == 0
    return root / "in", root / "clean", [f"m{n}" for n in range(INPUTS)]


def complete(out: Path, stems: list[str]) -> set[str]:
    """The inputs whose every output is in place."""
    return {stem for stem in stems if all((out / (stem + e)).is_file() for e in ENDINGS)}


def rows(out: Path) -> dict[str, str]:
    """summary.csv's status by input stem."""
    with open(out / "summary.csv", newline="") as handle:
        return {Path(row["path"]).stem: row["status"] for row in csv.DictReader(handle)}


def assert_like_a_clean_run(out: Path, clean: Path, stems: list[str], src: Path) -> None:
    """Every input's files as a run never stopped made them, label images as scipy's; nothing
    else: no temporaries, no stale copies."""
    for stem in stems:
        pixels = np.asarray(Image.open(src / f"{stem}.png")) != 0
        expected, _ = ndimage.label(pixels, structure=np.ones((3, 3)))
        assert np.array_equal(read_label_image(out / f"{stem}.labels.png"), expected), stem
        for ending in ENDINGS[1:]:
            assert (out / (stem + ending)).read_bytes() == (clean / (stem + ending)).read_bytes()
    names = {path.name for path in out.iterdir()} - {".gccl", "summary.csv", "gccl-run.json"}
    assert names == {stem + ending for stem in stems for ending in ENDINGS}


def assert_resumes(job: tuple[Path, Path, list[str]], out: Path, replace: bool = True) -> None:
    """--skip-existing labels exactly the inputs left (exit 0), then (`replace`) a plain run
    replaces everything (exit 0); both give a clean run's files."""
    src, clean, stems = job
    done = complete(out, stems)
    code, _, stderr = gccl(str(src), "-o", str(out), *OPTIONS, "--skip-existing")
    assert code == 0, stderr
    assert "not made by gccl" not in stderr
    assert rows(out) == {s: "skipped" if s in done else "ok" for s in stems}
    assert_like_a_clean_run(out, clean, stems, src)
    if replace:
        code, _, stderr = gccl(str(src), "-o", str(out), *OPTIONS)
        assert code == 0, stderr
        assert rows(out) == dict.fromkeys(stems, "ok")
        assert_like_a_clean_run(out, clean, stems, src)


def stop_when(out: Path, finished: int, run: subprocess.Popen[str]) -> None:
    """Wait until `finished` inputs have their statistics (or the run ended)."""
    deadline = time.monotonic() + TIMEOUT
    while run.poll() is None and time.monotonic() < deadline:
        if out.exists() and len(list(out.glob("*.stats.csv"))) >= finished:
            return
        time.sleep(0.002)


#: (processes, inputs finished when the signal comes, the signal): moments across the run.
STOPS = [
    (1, 2, signal.SIGKILL),
    (1, 6, signal.SIGHUP),
    (2, 0, signal.SIGINT),
    (2, 3, signal.SIGKILL),
    (2, 7, signal.SIGTERM),
    (4, 1, signal.SIGTERM),
    (4, 5, signal.SIGINT),
]


@pytest.mark.parametrize(
    ("processes", "finished", "signum"),
    STOPS,
    ids=[f"p{p}-after{f}-{signal.Signals(s).name}" for p, f, s in STOPS],
)
def test_a_run_stopped_at_any_moment_resumes_exactly(
    tmp_path: Path, job: tuple[Path, Path, list[str]], processes: int, finished: int, signum: int
) -> None:
    stems = job[2]
    out = tmp_path / "out"
    command = ["label", str(job[0]), "-o", "out", *OPTIONS, "--json", "--device", "cpu"]
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ccl_cli",
            *command,
            "--processes",
            str(processes),
            "--batch-size",
            "1",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stop_when(out, finished, run)
        run.send_signal(signum)
        stdout, stderr = run.communicate(timeout=TIMEOUT)
    finally:
        run.kill()
    if signum == signal.SIGKILL:
        time.sleep(0.5)  # its workers end at their next step (they watch it)
    done = complete(out, stems)
    if signum != signal.SIGKILL and (out / "summary.csv").exists():
        # (by the signal, 130 for Ctrl-C; or 0: it ended first)
        assert run.returncode in (-signum, 128 + signum, 0), stderr
        # every input whose outputs are whole is ok, in the summary and in --json
        assert {stem for stem, status in rows(out).items() if status == "ok"} == done, stderr
        said = [json.loads(line) for line in stdout.splitlines()]
        assert {Path(obj["path"]).stem for obj in said if obj["status"] == "ok"} == done
    assert_resumes(job, out)


#: Runs one `gccl label` in a forked child that dies (os._exit) at its Nth call of the os
#: functions the commit of an output and the record of made files use.
STEPS = ("open", "write", "fsync", "fstat", "link", "rename", "unlink", "utime", "close")


class _Dying:
    """The `os` module as out_dir.py and made_lines.py see it, ending the process at the
    call numbered `at` (counted over STEPS)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.calls = 0
        #: Counting: inside a write (out_dir.OutDir.write).
        self.active = False

    def __getattr__(self, name: str) -> object:
        real = getattr(os, name)
        if name not in STEPS:
            return real

        def call(*args: object, **kwargs: object) -> object:
            self.calls += self.active
            if self.active and self.calls == self.at:
                os._exit(9)
            return real(*args, **kwargs)

        return call


def _run_dying_at(src: Path, out: Path, at: int) -> int:
    """Fork a child that labels `src` into `out` and dies at step `at` of its writes; its exit
    status (0: it made fewer steps)."""
    from ccl_cli.io import made_lines, out_dir

    child = os.fork()
    if child == 0:  # pragma: no cover (the child)
        try:
            dying = _Dying(at)
            out_dir.os = dying  # type: ignore[attr-defined]
            made_lines.os = dying  # type: ignore[attr-defined]
            write = out_dir.OutDir.write

            def counted(*args: object, **kwargs: object) -> object:
                dying.active = True
                try:
                    return write(*args, **kwargs)  # type: ignore[arg-type]
                finally:
                    dying.active = False

            out_dir.OutDir.write = counted  # type: ignore[assignment,method-assign]
            gccl(str(src), "-o", str(out), *OPTIONS, "--workers", "1")
        finally:
            os._exit(0)
    deadline = time.monotonic() + TIMEOUT
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            raise AssertionError(f"the run dying at step {at} hung")
        time.sleep(0.01)


def test_a_crash_between_any_two_steps_of_a_write_resumes_exactly(
    tmp_path: Path, job: tuple[Path, Path, list[str]]
) -> None:
    """Each step of every write (the temporary, its data, the record's line, the name) in
    turn is the last: the rerun finds what it needs."""
    src = tmp_path / "in"
    src.mkdir()
    os.link(job[0] / "m0.png", src / "m0.png")
    one = (src, job[1], ["m0"])
    at = 1
    while True:
        out = tmp_path / f"out{at}"
        if _run_dying_at(src, out, at) == 0:
            break  # no step left
        assert_resumes(one, out, replace=at % 8 == 0)
        at += 1
    assert at > 30  # (seven writes of several steps each)
