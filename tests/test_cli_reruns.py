"""`gccl label` run again and again over the same folders, as cron jobs do: a pattern that
matches nothing, a run with nothing new, collisions and the hint that applies, gccl's own
outputs in a folder scanned later, the summary of skipped inputs, .npy label files and
--dry-run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from PIL import Image
from typer.testing import CliRunner

from ccl_cli.cli import app

EIGHT = np.ones((3, 3), bool)


def label(*args: str, quiet: bool = True):
    """`gccl label ARGS --device cpu` in this process (with --quiet unless told)."""
    extra = ["--quiet"] if quiet else []
    return CliRunner().invoke(app, ["label", *args, "--device", "cpu", *extra])


def mask_png(path: Path, seed: int, size: int = 16) -> np.ndarray:
    path.parent.mkdir(parents=True, exist_ok=True)
    mask = np.random.default_rng(seed).random((size, size)) < 0.4
    Image.fromarray((mask * 255).astype(np.uint8)).save(path)
    return mask


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "summary.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_pattern_that_matches_nothing_is_nothing_to_label_quietly(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    for spec in (str(tmp_path / "in" / "*.png"), str(tmp_path / "in")):  # same case, same answer
        result = label(spec, "-o", str(tmp_path / "o"))
        assert result.exit_code == 3, (spec, result.output)
        assert result.stderr == "", spec
    result = label(str(tmp_path / "in" / "*.png"), "-o", str(tmp_path / "o"), quiet=False)
    assert result.exit_code == 3 and "error" not in result.stderr
    assert "no images found in the inputs" in result.stderr
    assert "1 without images (folders or patterns)" in result.stderr
    assert rows(tmp_path / "o")[0]["status"] == "no-images"


def test_a_run_with_nothing_new_says_so_not_a_speed(tmp_path: Path) -> None:
    for n in range(3):
        mask_png(tmp_path / "in" / f"m{n}.png", n)
    out = str(tmp_path / "o")
    assert label(str(tmp_path / "in"), "-o", out).exit_code == 0
    again = label(str(tmp_path / "in"), "-o", out, "--skip-existing", quiet=False)
    assert again.exit_code == 0, again.output
    assert "nothing new: 3 skipped in" in again.stderr
    assert "img/s" not in again.stderr and "labeled 0 of" not in again.stderr


def test_skipped_rows_carry_the_numbers_of_the_outputs_they_keep(tmp_path: Path) -> None:
    masks = {n: mask_png(tmp_path / "in" / f"m{n}.png", n, size=20 + n) for n in range(3)}
    out = tmp_path / "o"
    assert label(str(tmp_path / "in"), "-o", str(out), "--min-area", "2").exit_code == 0
    first = {Path(row["path"]).name: row for row in rows(out)}
    mask_png(tmp_path / "in" / "m3.png", 3)  # a new input: the second run labels only it
    result = label(str(tmp_path / "in"), "-o", str(out), "--min-area", "2", "--skip-existing")
    assert result.exit_code == 0, result.output
    second = {Path(row["path"]).name: row for row in rows(out)}
    assert [second[f"m{n}.png"]["status"] for n in range(4)] == ["skipped"] * 3 + ["ok"]
    for n, mask in masks.items():
        row = second[f"m{n}.png"]
        _, components = ndi.label(mask, EIGHT)
        kept = sum(int(area >= 2) for area in np.bincount(ndi.label(mask, EIGHT)[0].ravel())[1:])
        assert (row["components"], row["kept"]) == (str(components), str(kept)), row
        assert (row["width"], row["height"], row["dtype"]) == (str(20 + n), str(20 + n), "uint8")
        for column in ("width", "height", "dtype", "components", "kept"):
            assert row[column] == first[f"m{n}.png"][column]
    third = label(str(tmp_path / "in"), "-o", str(out), "--min-area", "2", "--skip-existing")
    assert third.exit_code == 0
    assert all(row["kept"] and row["components"] for row in rows(out))  # carried again


def test_two_files_of_one_stem_in_one_folder_get_the_hint_that_applies(tmp_path: Path) -> None:
    mask_png(tmp_path / "same" / "frame.png", 1)
    Image.open(tmp_path / "same" / "frame.png").save(tmp_path / "same" / "frame.tif")
    result = label(str(tmp_path / "same"), "-o", str(tmp_path / "o"))
    assert result.exit_code == 1
    assert "overwrite those of" in result.stderr and "frame.png" in result.stderr
    assert "outputs are named after the file without its last suffix" in result.stderr
    assert "--relative-to" not in result.stderr


def test_a_file_gccl_cannot_read_says_so_not_that_it_collides(tmp_path: Path) -> None:
    mask_png(tmp_path / "scan.png", 1)
    (tmp_path / "scan.gif").write_bytes(b"GIF89a" + bytes(40))
    result = label(
        str(tmp_path / "scan.png"), str(tmp_path / "scan.gif"), "-o", str(tmp_path / "o")
    )
    assert result.exit_code == 1
    assert "scan.gif: not a PNG, TIFF, JPEG, BMP, WebP or NPY image" in result.stderr
    assert "overwrite" not in result.stderr


def test_gccl_outputs_in_a_folder_are_not_inputs_of_a_later_scan(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    mask_png(folder / "f.png", 1)
    mask_png(folder / "sub" / "g.png", 2)
    # outputs written into the input folder (allowed when the files are named), with a preview
    written = label(str(folder / "f.png"), "-o", str(folder), "--preview")
    assert written.exit_code == 0, written.output
    assert (folder / "f.labels.png").exists() and (folder / "f.preview.png").exists()
    (folder / "mine.labels.png").write_bytes((folder / "f.png").read_bytes())  # by name only
    later = label(str(folder), "-r", "-o", str(tmp_path / "o"), quiet=False)
    assert later.exit_code == 0, later.output
    labeled = sorted(Path(row["path"]).name for row in rows(tmp_path / "o"))
    assert labeled == ["f.png", "g.png"]
    assert "3 image(s) gccl wrote in an earlier run's --out (outputs are not inputs)" in (
        later.stderr
    )
    # a folder that is no --out of gccl's: a .labels.png there is an image like any other
    other = tmp_path / "plain"
    mask_png(other / "x.labels.png", 3)
    plain = label(str(other), "-o", str(tmp_path / "o2"))
    assert plain.exit_code == 0 and [row["status"] for row in rows(tmp_path / "o2")] == ["ok"]


@pytest.mark.parametrize(("side", "dtype"), [(40, np.uint16), (600, np.uint32)])
def test_npy_label_files_take_the_png_tiff_rule(tmp_path: Path, side: int, dtype: type) -> None:
    mask = np.zeros((side, side), bool)
    mask[::2, ::2] = True  # (side / 2)**2 components: 400, or 90000 (past 16 bits)
    np.save(tmp_path / "m.npy", mask)
    out = tmp_path / "o"
    result = label(str(tmp_path / "m.npy"), "-o", str(out), "--label-format", "npy")
    assert result.exit_code == 0, result.output
    saved = np.load(out / "m.labels.npy")
    assert saved.dtype == dtype
    np.testing.assert_array_equal(saved, ndi.label(mask, EIGHT)[0])
    assert not (out / "m.labels.png").exists() and not (out / "m.labels.tif").exists()
    again = label(str(tmp_path / "m.npy"), "-o", str(out))  # auto: a PNG or TIFF replaces it
    assert again.exit_code == 0
    assert not (out / "m.labels.npy").exists()


def test_dry_run_lists_what_would_happen_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    mask_png(folder / "a.png", 1)
    mask_png(folder / "sub" / "b.png", 2)
    mask_png(folder / "c.png", 3)
    (folder / "c.tif").write_bytes((folder / "c.png").read_bytes())  # same stem
    out = tmp_path / "o"
    result = label(str(folder), "-r", "-o", str(out), "--dry-run", "--preview")
    assert result.exit_code == 1  # c.tif would fail
    lines = result.stdout.splitlines()
    outputs = ", ".join(
        str(out / name) for name in ("a.labels.png", "a.stats.csv", "a.preview.png")
    )
    assert lines[0] == f"label {folder / 'a.png'} -> {outputs}"
    assert lines[2].startswith(f"fail  {folder / 'c.tif'}: its outputs would overwrite")
    assert lines[3].startswith(
        f"label {folder / 'sub' / 'b.png'} -> {out / 'sub' / 'b.labels.png'}"
    )
    assert not out.exists()
    (folder / "c.tif").unlink()
    assert label(str(folder), "-r", "-o", str(out)).exit_code == 0
    before = sorted(p.name for p in out.rglob("*"))
    (folder / "a.png").touch()  # changed since: labeled again
    listed = label(str(folder), "-r", "-o", str(out), "--dry-run", "--skip-existing", "--json")
    assert listed.exit_code == 0
    actions = {
        Path(line["path"]).name: line for line in map(json.loads, listed.stdout.splitlines())
    }
    assert actions["a.png"]["action"] == "label" and actions["a.png"]["outputs"]
    assert actions["b.png"]["action"] == "skip"
    assert actions["b.png"]["message"] == "outputs are current (--skip-existing)"
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing written, nothing moved
    nothing = label(str(folder / "*.jpg"), "-o", str(tmp_path / "o2"), "--dry-run")
    assert nothing.exit_code == 3 and not (tmp_path / "o2").exists()
    bad = label(str(folder), "-o", str(out), "--dry-run", "--min-area", "-1")
    assert bad.exit_code == 2
