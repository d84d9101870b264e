"""Real pictures (scikit-image's bundled data) through the whole command line.

Each is written to disk the way users keep such images, labeled by `gccl
label`, and compared with an independent reference: scipy.ndimage.label for
binary modes, the brute-force BFS oracle for tau mode.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
import skimage.data
import tifffile
from label_files import read_label_image
from oracles import bfs_labels, filter_min_area
from PIL import Image
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.contract.params import LabelParams

EIGHT = np.ones((3, 3), bool)


def label_file(path: Path, out: Path, *options: str) -> np.ndarray:
    result = CliRunner().invoke(
        app, ["label", str(path), "--out", str(out), "--quiet", "--device", "cpu", *options]
    )
    assert result.exit_code == 0, result.output
    return read_label_image(out / f"{path.stem}.labels.png")


def stats_rows(out: Path, stem: str) -> list[dict[str, str]]:
    with open(out / f"{stem}.stats.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_page_dark_text_with_threshold_and_invert(tmp_path: Path) -> None:
    page = skimage.data.page()
    path = tmp_path / "page.png"
    Image.fromarray(page).save(path)
    labels = label_file(path, tmp_path / "out", "--threshold", "100", "--invert")
    expected, count = ndi.label(page < 100, structure=EIGHT)
    assert count > 50
    assert np.array_equal(labels, expected)


def test_coins_bright_objects_min_area(tmp_path: Path) -> None:
    coins = skimage.data.coins()
    path = tmp_path / "coins.tif"
    tifffile.imwrite(path, coins, compression="zlib")
    labels = label_file(path, tmp_path / "out", "--threshold", "110", "--min-area", "200")
    raw, _ = ndi.label(coins > 110, structure=EIGHT)
    expected = filter_min_area(raw, 200)
    assert np.array_equal(labels, expected)
    rows = stats_rows(tmp_path / "out", "coins")
    assert len(rows) == expected.max() >= 10
    for row in rows:
        pixels = coins[expected == int(row["label"])]
        assert int(row["area"]) == pixels.size
        assert int(row["min"]) == pixels.min()
        assert int(row["max"]) == pixels.max()


def test_horse_one_bit_png(tmp_path: Path) -> None:
    horse = skimage.data.horse()
    path = tmp_path / "horse.png"
    Image.fromarray(horse).convert("1").save(path)
    labels = label_file(path, tmp_path / "out", "--connectivity", "4")
    expected, _ = ndi.label(horse)
    assert np.array_equal(labels, expected)
    inverted = label_file(path, tmp_path / "inv", "--invert", "--connectivity", "4")
    assert np.array_equal(inverted, ndi.label(~horse)[0])


def test_text_grayscale_tau_against_bfs(tmp_path: Path) -> None:
    text = skimage.data.text()[40:110, 100:260]
    path = tmp_path / "text.png"
    Image.fromarray(text).save(path)
    labels = label_file(path, tmp_path / "out", "--tau", "6", "--background", "none")
    expected = bfs_labels(text, LabelParams(tau=6, background=None))
    assert np.array_equal(labels, expected)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_motorcycle_disparity_with_inf_and_tau(tmp_path: Path, connectivity: int) -> None:
    _, _, disparity = skimage.data.stereo_motorcycle()
    crop = np.ascontiguousarray(disparity[200:290, 300:420])
    assert np.isinf(crop).any()
    path = tmp_path / "disp.tif"
    tifffile.imwrite(path, crop)
    options = ("--tau", "0.5", "--background", "none", "--min-area", "10")
    labels = label_file(path, tmp_path / "out", *options, "--connectivity", str(connectivity))
    params = LabelParams(tau=0.5, background=None, connectivity=connectivity)
    expected = filter_min_area(bfs_labels(crop, params), 10)
    assert np.array_equal(labels, expected)
    rows = stats_rows(tmp_path / "out", "disp")
    infinite = [row for row in rows if row["max"] == "inf"]
    assert infinite, "the inf region is a component of its own"
    assert all(row["mean"] == "inf" and row["min"] == "inf" for row in infinite)
