"""Outputs of pages a multi-page file no longer has: whichever run meets the file next (a
label re-run, with --skip-existing or not, a stream, worker processes; a restarted watch is in
run/test_watch.py) moves what gccl made for those pages aside as a failure's outputs are
(x.labels.stale.png), says so on stderr, and leaves every file gccl did not make alone.

Expected labels come from scipy; which outputs belong to which page comes from the naming rule
in the README (page N of fax.tif -> fax.pNNNN.*, a file of one image -> fax.*).
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
import tifffile
from cli_helpers import TIMEOUT, mask
from label_files import read_label_image

EIGHT = np.ones((3, 3), bool)


def masks(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [((rng.random((18, 21)) < 0.4) * 255).astype(np.uint8) for _ in range(count)]


def write_tiff(path: Path, pages: list[np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tifffile.TiffWriter(path) as tiff:
        for page in pages:
            tiff.write(page, photometric="minisblack")


def label(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """`gccl label ARGS --device cpu` in `cwd`, not quiet: its notices are on stderr."""
    return subprocess.run(
        [sys.executable, "-m", "ccl_cli", "label", *args, "--device", "cpu"],
        cwd=cwd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT,
    )  # fmt: skip


def outputs(out: Path) -> list[str]:
    """The names of the files gccl writes per input (the run's own files left out)."""
    return sorted(
        path.name
        for path in out.iterdir()
        if path.is_file() and path.name not in ("summary.csv", "gccl-run.json")
    )


def fax_rows(out: Path) -> list[tuple[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [(row["page"], row["status"]) for row in rows if row["path"].endswith("fax.tif")]


def labeled_three_pages(tmp_path: Path, seed: int, named: str = "in") -> Path:
    """in/fax.tif written with 3 pages and labeled (`named`: what the command line names)
    into tmp_path/out, which is returned."""
    write_tiff(tmp_path / "in" / "fax.tif", masks(3, seed=seed))
    assert label(named, "-o", "out", cwd=tmp_path).returncode == 0
    return tmp_path / "out"


def assert_labels(path: Path, page: np.ndarray) -> None:
    expected, _ = ndi.label(page, structure=EIGHT)
    assert np.array_equal(read_label_image(path), expected)


RERUNS = {
    "again": ((), ()),
    "--skip-existing": ((), ("--skip-existing",)),
    "a stream": ((), ()),
    "worker processes": (("--processes", "2"), ("--processes", "2")),
}


@pytest.mark.slow
@pytest.mark.parametrize("how", list(RERUNS))
def test_a_rerun_after_the_file_lost_pages_moves_their_outputs_aside(
    tmp_path: Path, how: str
) -> None:
    first, second = RERUNS[how]
    write_tiff(tmp_path / "in" / "fax.tif", masks(3, seed=1))
    mask(tmp_path / "in" / "other.png")
    done = label("in", "-o", "out", *first, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    old_third = (out / "fax.p0003.labels.png").read_bytes()
    old_third_stats = (out / "fax.p0003.stats.csv").read_bytes()

    now = masks(2, seed=2)
    write_tiff(tmp_path / "in" / "fax.tif", now)
    if how == "a stream":
        again = label("-", "-o", "out", cwd=tmp_path, stdin="in\n")
    else:
        again = label("in", "-o", "out", *second, cwd=tmp_path)

    assert again.returncode == 0, again.stderr
    for number, page in enumerate(now, 1):
        assert_labels(out / f"fax.p{number:04d}.labels.png", page)
    assert not (out / "fax.p0003.labels.png").exists()
    assert not (out / "fax.p0003.stats.csv").exists()
    assert (out / "fax.p0003.labels.stale.png").read_bytes() == old_third
    assert (out / "fax.p0003.stats.stale.csv").read_bytes() == old_third_stats
    assert "fax.tif changed its pages" in again.stderr
    assert "fax.p0003.labels.stale.png" in again.stderr
    assert "Traceback" not in again.stderr
    assert fax_rows(out) == [("1", "ok"), ("2", "ok")]  # no row of a page that is gone
    assert (out / "other.labels.png").exists()


@pytest.mark.slow
def test_pages_kept_as_they_were_are_skipped_and_the_lost_one_still_moved_aside(
    tmp_path: Path,
) -> None:
    """A page taken out of a scan with its file's time kept: --skip-existing keeps the pages
    whose outputs are current, and still retires the one that is gone."""
    scan = masks(3, seed=3)
    write_tiff(tmp_path / "in" / "fax.tif", scan)
    old = time.time() - 3600
    os.utime(tmp_path / "in" / "fax.tif", (old, old))
    assert label("in", "-o", "out", cwd=tmp_path).returncode == 0
    out = tmp_path / "out"
    kept = {name: (out / name).stat().st_mtime_ns for name in outputs(out) if ".p0003." not in name}

    write_tiff(tmp_path / "in" / "fax.tif", scan[:2])
    os.utime(tmp_path / "in" / "fax.tif", (old, old))
    again = label("in", "-o", "out", "--skip-existing", cwd=tmp_path)

    assert again.returncode == 0, again.stderr
    assert fax_rows(out) == [("1", "skipped"), ("2", "skipped")]
    assert {name: (out / name).stat().st_mtime_ns for name in kept} == kept
    assert outputs(out) == sorted(
        [*kept, "fax.p0003.labels.stale.png", "fax.p0003.stats.stale.csv"]
    )


@pytest.mark.slow
def test_a_file_that_became_one_page_and_then_two_keeps_the_outputs_of_its_pages_now(
    tmp_path: Path,
) -> None:
    out = labeled_three_pages(tmp_path, seed=4)

    (single,) = masks(1, seed=5)  # one page: its outputs lose the page mark
    write_tiff(tmp_path / "in" / "fax.tif", [single])
    once = label("in", "-o", "out", cwd=tmp_path)
    assert once.returncode == 0, once.stderr
    assert outputs(out) == sorted(
        [
            "fax.labels.png",
            "fax.stats.csv",
            *[f"fax.p000{n}.labels.stale.png" for n in (1, 2, 3)],
            *[f"fax.p000{n}.stats.stale.csv" for n in (1, 2, 3)],
        ]
    )
    assert_labels(out / "fax.labels.png", single)
    assert fax_rows(out) == [("", "ok")]

    two = masks(2, seed=6)  # two pages again: the one-page outputs go aside in their turn
    write_tiff(tmp_path / "in" / "fax.tif", two)
    twice = label("in", "-o", "out", cwd=tmp_path)
    assert twice.returncode == 0, twice.stderr
    assert outputs(out) == [
        "fax.labels.stale.png",
        "fax.p0001.labels.png",
        "fax.p0001.stats.csv",
        "fax.p0002.labels.png",
        "fax.p0002.stats.csv",
        "fax.p0003.labels.stale.png",
        "fax.p0003.stats.stale.csv",
        "fax.stats.stale.csv",
    ]
    assert_labels(out / "fax.labels.stale.png", single)
    for number, page in enumerate(two, 1):
        assert_labels(out / f"fax.p{number:04d}.labels.png", page)
    assert "fax.labels.stale.png" in twice.stderr


@pytest.mark.slow
def test_files_gccl_did_not_make_are_never_moved_nor_replaced(tmp_path: Path) -> None:
    out = labeled_three_pages(tmp_path, seed=7)
    (out / "fax.p0003.stats.csv").write_text("my own notes\n")  # edited: no longer gccl's
    (out / "fax.p0002.labels.stale.png").write_bytes(b"mine")  # the stale name is taken
    (out / "fax.p0004.labels.png").write_bytes(b"mine too")  # a page gccl never made
    second_labels = (out / "fax.p0002.labels.png").read_bytes()

    write_tiff(tmp_path / "in" / "fax.tif", masks(1, seed=8))
    again = label("in", "-o", "out", cwd=tmp_path)

    assert again.returncode == 0, again.stderr
    assert (out / "fax.p0003.stats.csv").read_text() == "my own notes\n"
    assert (out / "fax.p0002.labels.stale.png").read_bytes() == b"mine"
    assert (out / "fax.p0004.labels.png").read_bytes() == b"mine too"
    # the output whose stale name was taken stays where it is, and the notice says so
    assert (out / "fax.p0002.labels.png").read_bytes() == second_labels
    assert "stay as they are" in again.stderr and "fax.p0002.labels.png" in again.stderr
    # what gccl made and can move went aside
    assert (out / "fax.p0001.labels.stale.png").exists()
    assert (out / "fax.p0003.labels.stale.png").exists()
    assert not (out / "fax.p0001.labels.png").exists()
    assert not (out / "fax.p0003.stats.stale.csv").exists()


@pytest.mark.slow
def test_outputs_made_for_another_input_since_are_not_the_lost_pages(tmp_path: Path) -> None:
    """fax.p0003.png's outputs have page 3's names: once they took those names, the page's
    outputs are gone and nothing of fax.p0003.png's is moved for it."""
    out = labeled_three_pages(tmp_path, seed=9, named="in/fax.tif")
    mask(tmp_path / "in" / "fax.p0003.png", size=18, seed=10)
    assert label("in/fax.p0003.png", "-o", "out", cwd=tmp_path).returncode == 0
    made_for_png = (out / "fax.p0003.labels.png").read_bytes()

    write_tiff(tmp_path / "in" / "fax.tif", masks(2, seed=11))
    again = label("in/fax.tif", "-o", "out", cwd=tmp_path)

    assert again.returncode == 0, again.stderr
    assert (out / "fax.p0003.labels.png").read_bytes() == made_for_png
    assert not list(out.glob("*.stale.*"))
    assert "changed its pages" not in again.stderr


@pytest.mark.slow
def test_a_dry_run_says_which_outputs_of_lost_pages_it_would_move_and_moves_none(
    tmp_path: Path,
) -> None:
    out = labeled_three_pages(tmp_path, seed=12)
    before = outputs(out)
    write_tiff(tmp_path / "in" / "fax.tif", masks(2, seed=13))

    dry = label("in", "-o", "out", "--dry-run", cwd=tmp_path)

    assert dry.returncode == 0, dry.stderr
    assert "would keep" in dry.stderr and "fax.p0003.labels.png" in dry.stderr
    assert outputs(out) == before
