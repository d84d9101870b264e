"""Multi-page TIFFs (faxes, scanned documents): each page labeled as an image of its own."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
import tifffile
from label_files import read_label_image
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.errors import InputError
from ccl_cli.io.decode import image_pages, read_image

EIGHT = np.ones((3, 3), bool)


def label(*args: str):
    return CliRunner().invoke(app, ["label", *args, "--device", "cpu", "--quiet"])


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def pages(count: int, shape: tuple[int, int] = (30, 41)) -> list[np.ndarray]:
    rng = np.random.default_rng(count)
    return [(rng.random(shape) < 0.4).astype(np.uint8) * 255 for _ in range(count)]


def test_each_page_is_an_image_with_its_own_outputs_and_row(tmp_path: Path) -> None:
    scan = pages(3)
    with tifffile.TiffWriter(tmp_path / "fax.tif") as tiff:
        for page in scan:
            tiff.write(page, photometric="minisblack", compression="zlib")
    out = tmp_path / "out"
    result = label(str(tmp_path / "fax.tif"), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert [(row["path"], row["page"], row["status"]) for row in rows(out)] == [
        (str(tmp_path / "fax.tif"), str(n), "ok") for n in (1, 2, 3)
    ]
    for n, page in enumerate(scan, start=1):
        expected, count = ndi.label(page != 0, EIGHT)
        np.testing.assert_array_equal(read_label_image(out / f"fax.p{n:04d}.labels.png"), expected)
        with open(out / f"fax.p{n:04d}.stats.csv", newline="") as handle:
            assert len(list(csv.DictReader(handle))) == count
    assert not (out / "fax.labels.png").exists()


def test_pages_of_different_sizes_and_a_folder_scan(tmp_path: Path) -> None:
    first, second = pages(1, (12, 9))[0], pages(1, (20, 33))[0]
    (tmp_path / "in").mkdir()
    with tifffile.TiffWriter(tmp_path / "in" / "two.tif") as tiff:
        tiff.write(first, photometric="minisblack")
        tiff.write(second, photometric="minisblack")
    out = tmp_path / "out"
    assert label(str(tmp_path / "in"), "--out", str(out)).exit_code == 0
    assert [(r["page"], r["width"], r["height"]) for r in rows(out)] == [
        ("1", "9", "12"),
        ("2", "33", "20"),
    ]
    assert read_label_image(out / "two.p0002.labels.png").shape == (20, 33)


def test_a_single_page_tiff_and_its_thumbnail_stay_one_image(tmp_path: Path) -> None:
    image = pages(1)[0]
    with tifffile.TiffWriter(tmp_path / "one.tif") as tiff:
        tiff.write(image, photometric="minisblack")
        tiff.write(image[::4, ::4], photometric="minisblack", subfiletype=1)  # reduced
    assert image_pages(tmp_path / "one.tif") == 1
    out = tmp_path / "out"
    assert label(str(tmp_path / "one.tif"), "--out", str(out)).exit_code == 0
    assert [row["page"] for row in rows(out)] == [""]
    assert (out / "one.labels.png").is_file()


def test_read_image_reads_one_page_and_refuses_a_whole_multi_page_file(tmp_path: Path) -> None:
    scan = pages(2)
    tifffile.imwrite(tmp_path / "s.tif", np.stack(scan), photometric="minisblack")
    assert image_pages(tmp_path / "s.tif") == 2
    np.testing.assert_array_equal(read_image(tmp_path / "s.tif", page=1), scan[1])
    with pytest.raises(InputError, match="2 pages; gccl label labels each page"):
        read_image(tmp_path / "s.tif")
    with pytest.raises(InputError, match="no page 3"):
        read_image(tmp_path / "s.tif", page=2)


def test_a_4d_npy_is_refused_with_what_to_do(tmp_path: Path) -> None:
    np.save(tmp_path / "series.npy", np.zeros((2, 4, 5, 6), np.uint8))
    out = tmp_path / "out"
    assert label(str(tmp_path / "series.npy"), "--out", str(out)).exit_code == 1
    (row,) = rows(out)
    assert row["status"] == "failed"
    assert "(2, 4, 5, 6)" in row["message"] and "\n" not in row["message"]


def test_pages_mirror_below_relative_to(tmp_path: Path) -> None:
    (tmp_path / "scans" / "a").mkdir(parents=True)
    tifffile.imwrite(
        tmp_path / "scans" / "a" / "f.tif", np.stack(pages(2)), photometric="minisblack"
    )
    out = tmp_path / "out"
    result = label(
        str(tmp_path / "scans" / "a" / "f.tif"), "--relative-to", str(tmp_path / "scans"),
        "--out", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "a").glob("*.labels.png")) == [
        "f.p0001.labels.png",
        "f.p0002.labels.png",
    ]
