"""What `gccl label` says on screen matches what it did: a threshold that cannot flood a 1-bit
image, names that collide and the option that keeps them apart, folders without images, the
progress bar only where someone watches, and typos of options."""

from __future__ import annotations

import csv
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from label_files import read_label_image
from PIL import Image
from typer.testing import CliRunner

from ccl_cli.cli import app

EIGHT = np.ones((3, 3), bool)


def label(*args: str, quiet: bool = False):
    """`gccl label ARGS --device cpu` in this process."""
    extra = ["--quiet"] if quiet else []
    return CliRunner().invoke(app, ["label", *args, "--device", "cpu", *extra])


def rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        return {Path(row["path"]).name: row for row in csv.DictReader(handle)}


def page_with_ink(seed: int) -> np.ndarray:
    """A white page (True) with a few black strokes (False) on it."""
    rng = np.random.default_rng(seed)
    page = np.ones((40, 64), bool)
    for _ in range(6):
        y, x = rng.integers(0, 36), rng.integers(0, 56)
        page[y : y + rng.integers(1, 4), x : x + rng.integers(2, 8)] = False
    return page


def test_a_1_bit_tiff_thresholded_for_jpeg_scans_is_labeled_as_its_ink(tmp_path: Path) -> None:
    folder = tmp_path / "scans"
    folder.mkdir()
    page = page_with_ink(3)
    Image.fromarray(page).save(folder / "fax.tif", compression="group4")  # 1-bit, G4
    gray = np.where(page_with_ink(4), 240, 20).astype(np.uint8)  # what a JPEG scan holds
    Image.fromarray(gray).save(folder / "photo.png")
    out = tmp_path / "out"
    result = label(str(folder), "--threshold", "127", "--invert", "-o", str(out))
    assert result.exit_code == 0, result.output
    for name, ink in (("fax", ~page), ("photo", gray < 127)):
        want, count = ndi.label(ink, EIGHT)
        np.testing.assert_array_equal(read_label_image(out / f"{name}.labels.png"), want)
        assert rows(out)[f"{name}.{'tif' if name == 'fax' else 'png'}"]["kept"] == str(count)
    assert rows(out)["fax.tif"]["dtype"] == "bool" and rows(out)["fax.tif"]["message"] == ""


def test_an_image_on_one_side_of_the_threshold_is_labeled_and_named(tmp_path: Path) -> None:
    Image.fromarray(np.ones((8, 8), bool)).save(tmp_path / "blank.png")  # a blank 1-bit page
    Image.fromarray(np.full((8, 8), 200, np.uint8)).save(tmp_path / "bright.png")
    out = tmp_path / "out"
    result = label(str(tmp_path / "blank.png"), str(tmp_path / "bright.png"), "-o", str(out),
                   "--threshold", "127", "--invert")  # fmt: skip
    assert result.exit_code == 0, result.output
    for name in ("blank.png", "bright.png"):
        row = rows(out)[name]
        assert row["status"] == "ok" and row["kept"] == "0"
        assert row["message"].startswith("no value is below --threshold 127 with --invert")
        assert f"{name}: no value is below --threshold 127" in result.stderr


def test_a_threshold_every_value_passes_fails_that_image_instead_of_a_flood(
    tmp_path: Path,
) -> None:
    Image.fromarray(page_with_ink(1)).save(tmp_path / "fax.png")
    Image.fromarray(np.full((8, 8), 7, np.uint16)).save(tmp_path / "depth.png")
    out = tmp_path / "out"
    result = label(str(tmp_path / "fax.png"), str(tmp_path / "depth.png"), "-o", str(out),
                   "--threshold", "300", "--invert")  # fmt: skip
    assert result.exit_code == 1
    fax = rows(out)["fax.png"]
    assert fax["status"] == "failed" and not (out / "fax.labels.png").exists()
    assert fax["message"] == (
        "--threshold 300 with --invert is above a 1-bit image's 0 and 255: "
        "every pixel would be foreground"
    )
    assert f"fax.png: {fax['message']}" in result.stderr
    assert rows(out)["depth.png"]["status"] == "ok"  # 7 < 300 is the 16-bit image's answer


def test_names_that_collide_are_kept_apart_by_keep_extension(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    masks = {"jpg": np.zeros((10, 12), np.uint8), "bmp": np.zeros((10, 12), np.uint8)}
    masks["jpg"][2:5, 2:5] = 255
    masks["bmp"][1:3, 1:9] = masks["bmp"][6:9, 1:3] = 255
    for suffix, values in masks.items():
        Image.fromarray(values).save(folder / f"x.{suffix}", quality=100)
    refused = label(str(folder), "-o", str(tmp_path / "o1"))
    assert refused.exit_code == 1
    assert "--keep-extension keeps it in their names" in refused.stderr
    kept = label(str(folder), "-o", str(tmp_path / "o2"), "--keep-extension", "--threshold", "127")
    assert kept.exit_code == 0, kept.output
    names = sorted(path.name for path in (tmp_path / "o2").iterdir() if "x." in path.name)
    assert names == [
        "x.bmp.labels.png", "x.bmp.stats.csv", "x.jpg.labels.png", "x.jpg.stats.csv"
    ]  # fmt: skip
    for suffix, values in masks.items():
        want, _ = ndi.label(values > 127, EIGHT)
        got = read_label_image(tmp_path / "o2" / f"x.{suffix}.labels.png")
        np.testing.assert_array_equal(got, want)
    again = label(str(folder), "-o", str(tmp_path / "o2"), "--keep-extension", "--threshold",
                  "127", "--skip-existing")  # fmt: skip
    assert again.exit_code == 0 and "nothing new: 2 skipped" in again.stderr


def test_a_folder_of_sub_folders_says_on_screen_what_the_summary_says(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / "in" / name).mkdir(parents=True)
        Image.fromarray(np.eye(6, dtype=np.uint8) * 255).save(tmp_path / "in" / name / "m.png")
    result = label(str(tmp_path / "in"), "-o", str(tmp_path / "o"))
    assert result.exit_code == 3
    message = rows(tmp_path / "o")["in"]["message"]
    assert "its 2 sub-folder(s) are scanned with --recursive" in message
    assert f"in: {message}" in result.stderr


def test_an_empty_folder_is_nothing_labeled_of_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = label(str(tmp_path / "empty"), "-o", str(tmp_path / "o"))
    assert result.exit_code == 3
    assert "labeled 0 of 0 input(s), 1 without images" in result.stderr
    assert "1/1" not in result.stderr and "━" not in result.stderr


def run_gccl(*args: str, stderr: int) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ccl_cli", "label", *args, "--device", "cpu"],
        stdout=subprocess.PIPE, stderr=stderr, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_no_progress_bar_where_stderr_is_no_terminal_one_plain_closing_line(
    tmp_path: Path,
) -> None:
    for n in range(2):
        Image.fromarray(np.eye(6, dtype=np.uint8) * 255 * n).save(tmp_path / f"m{n}.png")
    logged = run_gccl(str(tmp_path / "m0.png"), str(tmp_path / "m1.png"), "-o",
                      str(tmp_path / "o"), stderr=subprocess.PIPE)  # fmt: skip
    assert logged.returncode == 0, logged.stderr
    lines = logged.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gccl: labeled 2 of 2 input(s) in "), lines
    assert "\x1b" not in logged.stderr.decode()  # no colours, no cursor movement
    # On a terminal the bar is drawn.
    main, side = pty.openpty()
    try:
        watched = run_gccl(str(tmp_path / "m0.png"), "-o", str(tmp_path / "o2"), stderr=side)
        os.close(side)
        shown = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the other side closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(main)
    assert watched.returncode == 0
    assert "━" in shown.decode(errors="replace") and "1/1" in shown.decode(errors="replace")


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [("-threshold", "--threshold"), ("--thresh", "--threshold"), ("--keep-ext", None)],
)
def test_a_mistyped_option_gets_the_option_it_was_meant_to_be(
    tmp_path: Path, typed: str, suggested: str | None
) -> None:
    result = CliRunner().invoke(app, ["label", str(tmp_path), typed, "127", "-o", "o"])
    assert result.exit_code == 2
    meant = suggested or "--keep-extension"
    assert f"No such option: {typed} (did you mean {meant}?)" in result.output
