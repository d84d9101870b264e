"""`gccl label -`: each path labeled and reported as soon as its line arrives."""

from __future__ import annotations

import csv
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import WAIT_SECONDS, files, gccl, make_inputs
from PIL import Image

from ccl_cli.config import Settings
from ccl_cli.io.inputs import InputItem
from ccl_cli.run import command, local, sources
from ccl_cli.run.records import Record
from ccl_cli.run.sources import windowed


def _read_line(process: subprocess.Popen, timeout: float = WAIT_SECONDS) -> str:
    """The next line of the process's stdout; fails if none comes within `timeout` (a hang)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    assert ready, "no JSON line arrived"
    return process.stdout.readline()


@pytest.mark.slow
def test_each_json_line_arrives_before_the_next_path_is_sent(tmp_path: Path):
    make_inputs(tmp_path / "in", 6, 20)
    paths = sorted(str(p) for p in (tmp_path / "in").rglob("*") if p.is_file())
    paths.insert(3, str(tmp_path / "in" / "missing.png"))
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "ccl_cli", "label", "-", "--out", str(out), "--json",
         "--device", "cpu", "--quiet"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        bufsize=1,
    )  # fmt: skip
    assert process.stdin is not None
    try:
        for path in paths:
            process.stdin.write(path + "\n")
            process.stdin.flush()
            record = json.loads(_read_line(process))
            assert record["path"] == path
            if path.endswith("missing.png"):
                assert record["status"] == "failed"
                assert "no such file" in record["message"]
            else:
                assert record["status"] == "ok"
                assert Path(record["outputs"]["stats"]).exists()
        process.stdin.close()
        process.wait(timeout=WAIT_SECONDS)
        assert process.stderr is not None
        stderr = process.stderr.read()
    finally:
        process.kill()
    assert process.returncode == 1, stderr  # one input failed
    assert "missing.png: no such file" in stderr
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["path"] for row in rows] == paths
    # the same files as a run over the same paths read from a list
    batch = tmp_path / "batch"
    code, _, _ = gccl(*paths, "--out", str(batch))
    assert code == 1
    assert files(out) == files(batch)


@pytest.mark.slow
def test_end_of_input_ends_the_run_with_nothing_read(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "ccl_cli", "label", "-", "--out", str(tmp_path / "out"),
         "--device", "cpu", "--quiet"],
        input="", capture_output=True, text=True, timeout=WAIT_SECONDS,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr  # nothing to label
    assert done.stderr == ""  # --quiet: not even the notice
    assert (tmp_path / "out" / "summary.csv").read_text().count("\n") == 1


def test_windowed_closes_a_batch_once_its_window_ends():
    """Inputs that arrive together are one batch; a pause ends it; the end ends all."""
    a, b, c = (InputItem(Path(name), Path(name)) for name in "abc")
    arrivals: list[list[InputItem] | None] = [[a, b], [], [c], [], None]
    ticks: list[int] = []

    def take(timeout: float) -> list[InputItem] | None:
        return arrivals.pop(0)

    got = list(windowed(take, 0.0, lambda: ticks.append(1)))
    assert got == [a, b, None, None, c, None, None]  # an empty take (a wake) pauses too
    assert ticks  # called while no batch was open


def test_windowed_pauses_when_woken_and_keeps_an_open_window():
    """An empty take with no batch open (a wake) is a pause; within an open window it is
    not: the window still closes when its time is up, after what arrived within it."""
    a, b = (InputItem(Path(name), Path(name)) for name in "ab")
    arrivals: list[list[InputItem] | None] = [[], [a], [], [b], None]
    asked: list[float] = []

    def take(timeout: float) -> list[InputItem] | None:
        asked.append(timeout)
        return arrivals.pop(0)

    got = list(windowed(take, 60.0, lambda: None))
    assert got == [None, a, b]  # one batch: the window of a was still open for b
    assert asked[2] > 59  # within the window, a take waits for what is left of it


@pytest.mark.slow
def test_stdin_lines_name_files_folders_and_globs(tmp_path: Path):
    make_inputs(tmp_path / "in", 5, 16)
    lines = f"{tmp_path / 'in' / 'sub'}\n\n{tmp_path / 'in'}/img00[12].png\n"
    done = subprocess.run(
        [sys.executable, "-m", "ccl_cli", "label", "-", "--out", str(tmp_path / "out"),
         "--device", "cpu", "--quiet", "--json"],
        input=lines, capture_output=True, text=True, timeout=WAIT_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    names = sorted(Path(json.loads(line)["path"]).name for line in done.stdout.splitlines())
    assert names == ["img000.npy", "img001.png", "img002.png", "img004.png"]


class _Collected:
    """A reporter that keeps the finished records on a queue."""

    def __init__(self) -> None:
        self.records: queue.SimpleQueue[Record] = queue.SimpleQueue()

    def start(self, total: int | None) -> None:
        pass

    def finished(self, record: Record) -> None:
        self.records.put(record)

    def notice(self, message: str) -> None:
        pass


def test_an_input_is_reported_when_its_write_ends_not_when_the_next_line_comes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The write thread wakes the source waiting for the next line: the record comes as
    soon as its outputs are written (an idle poll of a minute would be far too late)."""
    monkeypatch.setattr(sources, "POLL_SECONDS", 60.0)
    written = local._write

    def slow_write(*args: object) -> object:
        time.sleep(0.3)  # the source is waiting for input by then
        return written(*args)

    monkeypatch.setattr(local, "_write", slow_write)
    image = tmp_path / "big.png"  # decoded in the pool: more than INLINE_BYTES
    noise = np.random.default_rng(3).random((300, 400)) < 0.5
    Image.fromarray((noise * 255).astype(np.uint8)).save(image)
    read_end, write_end = os.pipe()
    reporter = _Collected()
    settings = Settings(out=tmp_path / "out", device="cpu")
    with os.fdopen(read_end) as stdin, os.fdopen(write_end, "w") as lines:
        run = threading.Thread(
            target=command.run_label, args=(["-"], settings, reporter, stdin), daemon=True
        )
        run.start()
        lines.write(f"{image}\n")
        lines.flush()
        record = reporter.records.get(timeout=WAIT_SECONDS / 2)
        assert record.status == "ok"
        assert Path(record.outputs["stats"]).is_file()
    run.join(WAIT_SECONDS)
    assert not run.is_alive()
