"""`gccl watch`: files already there, then each new one once complete, until stopped.

Each test runs the command as a process and reads its --json lines as they
come; a file's labels are checked against scipy's, so a file read before it
was complete (a truncated PNG fails to decode) would fail the test.
"""

from __future__ import annotations

import csv
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from cli_helpers import WAIT_SECONDS
from label_files import read_label_image
from PIL import Image

from ccl_cli.errors import EXIT_BUSY
from ccl_cli.io.output_paths import GCCL_DIR, LOCK_NAME

EIGHT = np.ones((3, 3), bool)


def png_bytes(seed: int, size: int = 48) -> bytes:
    mask = (np.random.default_rng(seed).random((size, size)) < 0.4).astype(np.uint8) * 255
    buffer = io.BytesIO()
    Image.fromarray(mask).save(buffer, format="PNG")
    return buffer.getvalue()


def assert_labels_right(source: Path, out: Path) -> None:
    values = np.asarray(Image.open(source))
    expected, _ = ndi.label(values, structure=EIGHT)
    assert np.array_equal(read_label_image(out / f"{source.stem}.labels.png"), expected)


class Watch:
    """A running `gccl watch` and its --json lines."""

    def __init__(self, folder: Path, out: Path, *options: str) -> None:
        self.out = out
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ccl_cli", "watch", str(folder), "--out", str(out),
             "--json", "--quiet", "--device", "cpu", *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.records: dict[str, list[dict]] = {}
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put("")

    def next_record(self) -> dict:
        try:
            line = self.lines.get(timeout=WAIT_SECONDS)
        except queue.Empty:
            raise AssertionError(f"no JSON line arrived; so far {sorted(self.records)}") from None
        assert line, "the watch ended"
        record = json.loads(line)
        self.records.setdefault(Path(record["path"]).name, []).append(record)
        return record

    def wait_for(self, *names: str) -> dict[str, dict]:
        """The records of `names`, reading lines until each has come."""
        while not all(name in self.records for name in names):
            self.next_record()
        return {name: self.records[name][-1] for name in names}

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        self.process.send_signal(signum)
        self.process.wait(timeout=WAIT_SECONDS)
        while line := self.lines.get(timeout=WAIT_SECONDS):
            record = json.loads(line)
            self.records.setdefault(Path(record["path"]).name, []).append(record)
        assert self.process.stderr is not None
        return self.process.returncode, self.process.stderr.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        (folder / f"old{i}.png").write_bytes(png_bytes(i))
    old = time.time() - 60  # long finished
    for path in folder.iterdir():
        os.utime(path, (old, old))
    return folder


def summary_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("options", [(), ("--poll", "--poll-interval", "1.5")])
def test_existing_slow_renamed_deleted_and_bad_files(folder: Path, tmp_path: Path, options):
    out = tmp_path / "out"
    watch = Watch(folder, out, *options)
    try:
        records = watch.wait_for("old0.png", "old1.png", "old2.png")
        assert {r["status"] for r in records.values()} == {"ok"}
        # written slowly: half, a pause (shorter than the poll interval), the rest
        data = png_bytes(10)
        with open(folder / "slow.png", "wb") as handle:
            handle.write(data[: len(data) // 2])
            handle.flush()
            time.sleep(0.6)
            handle.write(data[len(data) // 2 :])
        # renamed in from a hidden name in the folder, and moved in from outside it
        (folder / ".part").write_bytes(png_bytes(11))
        os.rename(folder / ".part", folder / "renamed.png")
        (tmp_path / "outside.png").write_bytes(png_bytes(12))
        os.rename(tmp_path / "outside.png", folder / "moved.png")
        # a temporary that is deleted is never an input; a bad file fails alone
        (folder / ".scratch.png").write_bytes(b"partial")
        (folder / ".scratch.png").unlink()
        (folder / "bad.png").write_bytes(b"not an image")
        records = watch.wait_for("slow.png", "renamed.png", "moved.png", "bad.png")
        assert records["bad.png"]["status"] == "failed"
        assert "not a PNG" in records["bad.png"]["message"]
        for name in ("slow.png", "renamed.png", "moved.png"):
            assert records[name]["status"] == "ok", records[name]
            assert_labels_right(folder / name, out)
        # the watch goes on after the bad file
        shutil.copy(folder / "old0.png", folder / "after.png")
        assert watch.wait_for("after.png")["after.png"]["status"] == "ok"
        code, stderr = watch.stop()
    finally:
        watch.kill()
    assert code == -signal.SIGTERM, stderr
    assert "bad.png: not a PNG" in stderr
    assert "Traceback" not in stderr
    assert all(len(found) == 1 for found in watch.records.values()), watch.records
    assert ".scratch.png" not in watch.records
    rows = summary_rows(out)
    assert sorted(Path(row["path"]).name for row in rows) == sorted(watch.records)
    assert (out / GCCL_DIR / LOCK_NAME).exists()


def test_restart_redoes_nothing_and_summary_is_kept_true(folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    watch = Watch(folder, out)
    try:
        watch.wait_for("old0.png", "old1.png", "old2.png")
        (folder / "new.png").write_bytes(png_bytes(20))
        watch.wait_for("new.png")
        # summary.csv gets each row while the watch runs
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            if (out / "summary.csv").exists() and len(summary_rows(out)) == 4:
                break
            time.sleep(0.05)
        assert {row["status"] for row in summary_rows(out)} == {"ok"}
        # the --out lock is held: a label run into the same folder is refused
        busy = subprocess.run(
            [sys.executable, "-m", "ccl_cli", "label", str(folder), "--out", str(out), "-q"],
            capture_output=True, text=True, timeout=WAIT_SECONDS,
        )  # fmt: skip
        assert busy.returncode == EXIT_BUSY and "in use by a running gccl" in busy.stderr
        code, _ = watch.stop(signal.SIGINT)
    finally:
        watch.kill()
    assert code == 130
    stamps = {path.name: path.stat().st_mtime_ns for path in out.glob("*.stats.csv")}
    again = Watch(folder, out)
    try:
        records = again.wait_for("old0.png", "old1.png", "old2.png", "new.png")
        assert {r["status"] for r in records.values()} == {"skipped"}
        (folder / "newer.png").write_bytes(png_bytes(21))
        assert again.wait_for("newer.png")["newer.png"]["status"] == "ok"
        again.stop()
    finally:
        again.kill()
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.stats.csv") if p.name in stamps} == (
        stamps
    )
    statuses = {Path(row["path"]).name: row["status"] for row in summary_rows(out)}
    assert statuses == {
        "old0.png": "skipped",
        "old1.png": "skipped",
        "old2.png": "skipped",
        "new.png": "skipped",
        "newer.png": "ok",
    }


def test_a_flood_of_files_is_labeled_once_each(folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    watch = Watch(folder, out)
    names = [f"flood{i:03}.png" for i in range(150)]
    try:
        watch.wait_for("old0.png", "old1.png", "old2.png")
        data = png_bytes(30, 24)
        for name in names:
            (folder / name).write_bytes(data)
        records = watch.wait_for(*names)
        code, _ = watch.stop()
    finally:
        watch.kill()
    assert code == -signal.SIGTERM
    assert {r["status"] for r in records.values()} == {"ok"}
    assert all(len(watch.records[name]) == 1 for name in names)
    assert len(summary_rows(out)) == len(names) + 3


def test_watch_refuses_a_missing_folder_and_out_in_the_folder(folder: Path, tmp_path: Path):
    for args, needle in (
        ([str(tmp_path / "nope"), "--out", str(tmp_path / "o")], "is not a folder"),
        ([str(folder), "--out", str(folder)], "is the input folder"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "ccl_cli", "watch", *args, "-q", "--device", "cpu"],
            capture_output=True, text=True, timeout=WAIT_SECONDS,
        )  # fmt: skip
        assert done.returncode == 2
        assert needle in done.stderr
