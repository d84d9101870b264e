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
import tifffile
from cli_helpers import WAIT_SECONDS
from label_files import read_label_image
from PIL import Image

from ccl_cli.errors import EXIT_BUSY
from ccl_cli.io.output_paths import GCCL_DIR, LOCK_NAME

EIGHT = np.ones((3, 3), bool)
POLL = ("--poll", "--poll-interval", "0.5")


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

    def __init__(self, folder: Path, out: Path, *options: str, quiet: bool = True) -> None:
        self.out = out
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ccl_cli", "watch", str(folder), "--out", str(out),
             "--json", *(["--quiet"] if quiet else []), "--device", "cpu", *options],
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

    def wait_for(self, *names: str, times: int = 1) -> dict[str, dict]:
        """The latest records of `names`, reading lines until each has come `times` times."""
        while not all(len(self.records.get(name, ())) >= times for name in names):
            self.next_record()
        return {name: self.records[name][-1] for name in names}

    def ended(self) -> tuple[int, str]:
        """The exit code and stderr of a watch that ends by itself."""
        self.process.wait(timeout=WAIT_SECONDS)
        assert self.process.stderr is not None
        return self.process.returncode, self.process.stderr.read()

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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), POLL], ids=["events", "poll"])
def test_restart_redoes_nothing_and_summary_is_kept_true(
    folder: Path, tmp_path: Path, options: tuple[str, ...]
) -> None:
    out = tmp_path / "out"
    watch = Watch(folder, out, *options)
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
    again = Watch(folder, out, *options)
    try:
        records = again.wait_for("old0.png", "old1.png", "old2.png", "new.png")
        assert {r["status"] for r in records.values()} == {"skipped"}
        # (a watch refuses --skip-existing: its rows do not name it)
        assert {r["message"] for r in records.values()} == {
            "outputs are current (made before this watch began)"
        }
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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- a watch that follows changes ------------------------------------------------------


def write_in_two(path: Path, data: bytes, pause: float) -> None:
    """Write `data` to `path` in two halves, closing the file in between (an appending
    writer), `pause` seconds apart."""
    path.write_bytes(data[: len(data) // 2])
    time.sleep(pause)
    with open(path, "ab") as handle:
        handle.write(data[len(data) // 2 :])


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), POLL], ids=["events", "poll"])
def test_a_file_changed_after_it_was_labeled_is_labeled_again(
    folder: Path, tmp_path: Path, options: tuple[str, ...]
) -> None:
    out = tmp_path / "out"
    watch = Watch(folder, out, *options)
    try:
        watch.wait_for("old0.png")
        (folder / "a.png").write_bytes(png_bytes(40))
        assert watch.wait_for("a.png")["a.png"]["status"] == "ok"
        assert_labels_right(folder / "a.png", out)
        (folder / "a.png").write_bytes(png_bytes(41, size=64))  # overwritten: new content
        assert watch.wait_for("a.png", times=2)["a.png"]["status"] == "ok"
        assert_labels_right(folder / "a.png", out)
        tmp = folder / ".a.png.tmp"  # replaced by a rename: a new inode
        tmp.write_bytes(png_bytes(42, size=56))
        os.rename(tmp, folder / "a.png")
        assert watch.wait_for("a.png", times=3)["a.png"]["status"] == "ok"
        assert_labels_right(folder / "a.png", out)
        watch.stop()
    finally:
        watch.kill()
    assert len(watch.records["old0.png"]) == 1  # unchanged files are not labeled again


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), POLL], ids=["events", "poll"])
def test_a_file_that_failed_while_being_written_is_tried_again_once_it_changes(
    folder: Path, tmp_path: Path, options: tuple[str, ...]
) -> None:
    out = tmp_path / "out"
    watch = Watch(folder, out, *options)
    try:
        watch.wait_for("old0.png")
        data = png_bytes(43, size=96)
        # the first half stays long enough to be taken: it fails as a truncated PNG
        write_in_two(folder / "slow.png", data, pause=2.5)
        records = watch.wait_for("slow.png", times=2)
        watch.stop()
    finally:
        watch.kill()
    assert watch.records["slow.png"][0]["status"] == "failed"
    assert records["slow.png"]["status"] == "ok"
    assert_labels_right(folder / "slow.png", out)
    rows = [row for row in summary_rows(out) if row["path"].endswith("slow.png")]
    assert [row["status"] for row in rows] == ["failed", "ok"]
    assert not list(out.glob("slow.*.stale.*"))  # the stale copies went with the new outputs


@pytest.mark.slow
def test_polling_waits_until_a_files_size_and_mtime_hold(folder: Path, tmp_path: Path) -> None:
    """A file there at the start, looking long finished (an old mtime), that still grows:
    polled, it is taken only once two looks a poll interval apart agree."""
    data = png_bytes(44, size=96)
    partial = folder / "growing.png"
    partial.write_bytes(data[: len(data) // 2])
    old = time.time() - 60
    os.utime(partial, (old, old))
    out = tmp_path / "out"
    watch = Watch(folder, out, "--poll", "--poll-interval", "1.0")
    try:
        time.sleep(0.3)
        with open(partial, "ab") as handle:
            handle.write(data[len(data) // 2 :])
        records = watch.wait_for("growing.png", "old0.png")
        time.sleep(1.5)  # no second look takes it again: it did not change
        watch.stop()
    finally:
        watch.kill()
    assert records["growing.png"]["status"] == "ok"
    assert len(watch.records["growing.png"]) == 1


@pytest.mark.slow
def test_sigterm_ends_a_watch_by_the_signal_and_it_says_what_it_watches(
    folder: Path, tmp_path: Path
) -> None:
    watch = Watch(folder, tmp_path / "out", quiet=False)
    try:
        watch.wait_for("old0.png", "old1.png", "old2.png")
        code, stderr = watch.stop(signal.SIGTERM)
    finally:
        watch.kill()
    assert code == -signal.SIGTERM
    assert stderr.count("(Ctrl-C to stop)") == 1
    assert f"watching {folder} into {tmp_path / 'out'}" in stderr
    assert len(summary_rows(tmp_path / "out")) == 3
    quiet = Watch(folder, tmp_path / "out2")
    try:
        quiet.wait_for("old0.png")
        _, stderr = quiet.stop()
    finally:
        quiet.kill()
    assert "watching" not in stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("options", "config", "needle"),
    [
        (["-0"], None, "No such option: -0"),
        (["--relative-to", "."], None, "No such option: --relative-to"),
        (["--processes", "2"], None, "No such option: --processes"),
        (["--skip-existing"], None, "No such option: --skip-existing"),
        ([], "null-separated: true", "--null-separated means nothing to gccl watch"),
        ([], "processes: 4", "--processes means nothing to gccl watch"),
    ],
)
def test_options_that_mean_nothing_to_a_watch_are_refused(
    folder: Path, tmp_path: Path, options: list[str], config: str | None, needle: str
) -> None:
    if config is not None:
        (tmp_path / "c.yaml").write_text(config + "\n")
        options = [*options, "--config", str(tmp_path / "c.yaml")]
    args = ["watch", str(folder), "-o", str(tmp_path / "o"), *options]
    done = subprocess.run(
        [sys.executable, "-m", "ccl_cli", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_a_file_whose_output_names_are_too_long_fails_alone_and_the_watch_goes_on(
    folder: Path, tmp_path: Path
) -> None:
    long = "y" * 250 + ".png"  # fits NAME_MAX; its outputs do not
    out = tmp_path / "out"
    for attempt, after in (("dropped in", "after1.png"), ("found by a restart", "after2.png")):
        watch = Watch(folder, out)
        try:
            watch.wait_for("old0.png", "old1.png", "old2.png")
            if attempt == "dropped in":
                (folder / long).write_bytes(png_bytes(47))
            (folder / after).write_bytes(png_bytes(48))
            records = watch.wait_for(long, after)
            code, stderr = watch.stop()
        finally:
            watch.kill()
        assert records[long]["status"] == "failed", attempt
        assert "File name too long" in records[long]["message"]
        assert records[after]["status"] == "ok"
        assert code == -signal.SIGTERM and "Traceback" not in stderr, stderr


def tiff_pages(path: Path, pages: int, seed: int) -> list[np.ndarray]:
    """Write a TIFF of `pages` random masks to a hidden name and rename it to `path` (as a
    scanner that replaces a file does); returns the pages."""
    rng = np.random.default_rng(seed)
    masks = [((rng.random((20, 23)) < 0.4) * 255).astype(np.uint8) for _ in range(pages)]
    hidden = path.with_name(f".{path.name}.tmp")
    with tifffile.TiffWriter(hidden) as tiff:
        for mask in masks:
            tiff.write(mask, photometric="minisblack")
    os.rename(hidden, path)
    return masks


@pytest.mark.slow
def test_a_file_overwritten_with_fewer_pages_keeps_no_outputs_of_the_pages_it_lost(
    folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    watch = Watch(folder, out, quiet=False)
    try:
        watch.wait_for("old0.png")
        tiff_pages(folder / "fax.tif", 3, seed=1)
        watch.wait_for("fax.tif", times=3)
        assert sorted(p.name for p in out.glob("fax.p*.labels.png")) == [
            f"fax.p000{page}.labels.png" for page in (1, 2, 3)
        ]
        (single,) = tiff_pages(folder / "fax.tif", 1, seed=2)
        assert watch.wait_for("fax.tif", times=4)["fax.tif"]["status"] == "ok"
        pages = tiff_pages(folder / "fax.tif", 2, seed=3)
        watch.wait_for("fax.tif", times=6)
        code, stderr = watch.stop()
    finally:
        watch.kill()
    assert code == -signal.SIGTERM, stderr
    # what each version left: its own outputs, and the earlier versions' moved aside
    for page, mask in enumerate(pages, 1):
        expected, _ = ndi.label(mask, structure=EIGHT)
        labels = read_label_image(out / f"fax.p000{page}.labels.png")
        assert np.array_equal(labels, expected)
    assert not (out / "fax.p0003.labels.png").exists()
    assert not (out / "fax.labels.png").exists()  # the one-page version's, moved aside
    expected, _ = ndi.label(single, structure=EIGHT)
    assert np.array_equal(read_label_image(out / "fax.labels.stale.png"), expected)
    assert (out / "fax.p0003.labels.stale.png").exists()
    assert "fax.tif changed its pages" in stderr and "fax.p0003.labels.stale.png" in stderr


@pytest.mark.slow
def test_a_restarted_watch_moves_aside_the_outputs_of_pages_lost_while_it_was_stopped(
    folder: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    watch = Watch(folder, out)
    try:
        watch.wait_for("old0.png")
        tiff_pages(folder / "fax.tif", 3, seed=1)
        watch.wait_for("fax.tif", times=3)
        code, stderr = watch.stop()
    finally:
        watch.kill()
    assert code == -signal.SIGTERM, stderr
    third = (out / "fax.p0003.labels.png").read_bytes()
    (single,) = tiff_pages(folder / "fax.tif", 1, seed=2)  # while no watch runs
    again = Watch(folder, out, quiet=False)
    try:
        assert again.wait_for("fax.tif")["fax.tif"]["status"] == "ok"
        code, stderr = again.stop()
    finally:
        again.kill()
    assert code == -signal.SIGTERM, stderr
    expected, _ = ndi.label(single, structure=EIGHT)
    assert np.array_equal(read_label_image(out / "fax.labels.png"), expected)
    assert not list(out.glob("fax.p000?.labels.png")) and not list(out.glob("fax.p000?.stats.csv"))
    assert (out / "fax.p0003.labels.stale.png").read_bytes() == third
    assert "fax.tif changed its pages" in stderr and "fax.p0003.labels.stale.png" in stderr
    rows = [row for row in summary_rows(out) if row["path"].endswith("fax.tif")]
    assert [(row["page"], row["status"]) for row in rows] == [("", "ok")]


# --- a watch resolves its folders once -----------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("options", [(), POLL], ids=["events", "poll"])
def test_a_recursive_watch_never_enters_linked_folders(
    folder: Path, tmp_path: Path, options: tuple[str, ...]
) -> None:
    (folder / "l1").symlink_to(".")
    (folder / "l2").symlink_to(".")
    out = tmp_path / "OW"
    (folder / "o").symlink_to(out)  # the watch's own --out, linked into the folder
    watch = Watch(folder, out, "-r", *options)
    try:
        watch.wait_for("old0.png", "old1.png", "old2.png")
        (folder / "a.png").write_bytes(png_bytes(45))
        watch.wait_for("a.png")
        time.sleep(1.5)  # a poll or two: nothing else comes
        watch.stop()
    finally:
        watch.kill()
    assert sorted(watch.records) == ["a.png", "old0.png", "old1.png", "old2.png"]
    assert all(len(found) == 1 for found in watch.records.values()), watch.records
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [GCCL_DIR]
    assert not list(out.glob("*.labels.labels.*"))


@pytest.mark.slow
def test_a_bind_mount_of_the_watched_folder_as_out_is_refused(folder: Path, tmp_path: Path) -> None:
    mount = tmp_path / "mount"
    mount.mkdir()
    command = (
        f"mount --bind {folder} {mount} && exec {sys.executable} -m ccl_cli watch "
        f"{folder} -r --out {mount}/o -q --device cpu"
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", command],
        capture_output=True, text=True, timeout=WAIT_SECONDS,
    )  # fmt: skip
    if "mount" in done.stderr and done.returncode != 2:
        pytest.skip(f"no private mount namespace here ({done.stderr.strip()})")
    assert done.returncode == 2, done.stderr
    assert "inside the input folder" in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["old0.png", "old1.png", "old2.png"]


@pytest.mark.slow
def test_an_out_deleted_during_a_watch_stops_it_with_one_line(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    watch = Watch(folder, out)
    try:
        watch.wait_for("old0.png", "old1.png", "old2.png")
        shutil.rmtree(out)
        started = time.monotonic()
        code, stderr = watch.ended()
    finally:
        watch.kill()
    assert time.monotonic() - started < 5
    assert code == 2
    assert "was deleted during the run" in stderr or "moved or deleted" in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert not out.exists()  # nothing written there by path afterwards


@pytest.mark.slow
@pytest.mark.parametrize("change", ["replaced", "moved", "deleted"])
def test_a_watched_folder_moved_stops_the_watch_with_one_line(
    folder: Path, tmp_path: Path, change: str
) -> None:
    out = tmp_path / "out"
    watch = Watch(folder, out)
    try:
        watch.wait_for("old0.png", "old1.png", "old2.png")
        if change == "deleted":
            shutil.rmtree(folder)
        else:
            os.rename(folder, tmp_path / "in.old")
        if change == "replaced":
            folder.mkdir()
            (folder / "new.png").write_bytes(png_bytes(46))
        code, stderr = watch.ended()
    finally:
        watch.kill()
    assert code == 2
    said = "moved or replaced" if change == "replaced" else "moved or deleted"
    assert f"the watched folder {folder} was {said}" in stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert len(summary_rows(out)) == 3  # nothing of the folder now at that path
    assert sorted(watch.records) == ["old0.png", "old1.png", "old2.png"]


def test_a_volume_file_dropped_in_is_one_input_labeled_in_kind(folder: Path, tmp_path: Path):
    out = tmp_path / "out"
    values = (np.random.default_rng(7).random((6, 20, 30)) < 0.3).astype(np.uint8)
    watch = Watch(folder, out)
    try:
        watch.wait_for("old0.png", "old1.png", "old2.png")
        np.save(tmp_path / "v.npy", values)
        os.rename(tmp_path / "v.npy", folder / "v.npy")  # complete when it appears
        record = watch.wait_for("v.npy")["v.npy"]
        code, _ = watch.stop()
    finally:
        watch.kill()
    assert code == -signal.SIGTERM
    assert (record["status"], record["depth"], record["width"]) == ("ok", 6, 30)
    expected, _ = ndi.label(values, structure=np.ones((3, 3, 3), bool))
    assert np.array_equal(np.load(out / "v.labels.npy"), expected)
