"""`gccl label` with --erode/--dilate/--open/--close/--smooth, driven as a user would."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage as ndi
from label_files import read_label_image
from oracles import bfs_labels
from stage_oracles import oracle_smooth, scipy_mask
from typer.testing import CliRunner

from ccl_cli.cli import app
from ccl_cli.config import resolve
from ccl_cli.contract.params import LabelParams
from ccl_cli.errors import UsageError

EIGHT = np.ones((3, 3), bool)


def gccl(*args: str):
    return CliRunner().invoke(app, ["label", *args, "--quiet", "--device", "cpu"])


@pytest.fixture
def mask_image(tmp_path: Path) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(11)
    mask = rng.random((40, 57)) < 0.55
    path = tmp_path / "m.npy"
    np.save(path, mask.astype(np.uint8) * 200)
    return path, mask


def test_options_apply_in_the_documented_order(tmp_path: Path, mask_image) -> None:
    path, mask = mask_image
    out = tmp_path / "out"
    # Given in another order on purpose: they apply as open, close, erode, dilate.
    result = gccl(str(path), "-o", str(out), "--dilate", "1", "--erode", "2", "--close", "1",
                  "--open", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    order = [("open", 1), ("close", 1), ("erode", 2), ("dilate", 1)]
    expected, _ = ndi.label(scipy_mask(mask, order, 8), EIGHT)
    np.testing.assert_array_equal(read_label_image(out / "m.labels.png"), expected)
    given_order, _ = ndi.label(scipy_mask(mask, order[::-1], 8), EIGHT)
    assert not np.array_equal(expected, given_order)  # the order is visible in this image


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("op", ["erode", "dilate", "open", "close"])
def test_each_option_matches_scipy(tmp_path: Path, mask_image, connectivity: int, op: str) -> None:
    path, mask = mask_image
    out = tmp_path / "out"
    result = gccl(str(path), "-o", str(out), f"--{op}", "2", "--connectivity", str(connectivity))
    assert result.exit_code == 0, result.output
    structure = ndi.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    expected, _ = ndi.label(scipy_mask(mask, [(op, 2)], connectivity), structure)
    np.testing.assert_array_equal(read_label_image(out / "m.labels.png"), expected)


def test_threshold_mode_morphology_and_original_statistics(tmp_path: Path) -> None:
    values = np.array([[10, 10, 10, 0], [10, 90, 10, 0], [10, 10, 10, 0]], np.uint8)
    np.save(tmp_path / "t.npy", values)
    out = tmp_path / "out"
    result = gccl(str(tmp_path / "t.npy"), "-o", str(out), "--threshold", "50", "--dilate", "1")
    assert result.exit_code == 0, result.output
    # By hand: the one pixel above 50 dilates to the 3x3 block; its mean is (8*10 + 90) / 9.
    labels = read_label_image(out / "t.labels.png")
    assert labels.tolist() == [[1, 1, 1, 0]] * 3
    with open(out / "t.stats.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["area"], row["min"], row["max"]) == ("9", "10", "90")
    assert float(row["mean"]) == (8 * 10 + 90) / 9


def test_smoothing_from_a_config_file_equals_the_flags(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    values = (1000 + rng.integers(-6, 7, (23, 31)) + np.arange(31) * 4).astype(np.uint16)
    values[rng.random(values.shape) < 0.15] = 0  # nodata
    np.save(tmp_path / "d.npy", values)
    config = tmp_path / "stages.yaml"
    config.write_text("tau: 3\nsmooth: binomial:2\nopen: 1\nconnectivity: 4\n")
    by_file = gccl(str(tmp_path / "d.npy"), "-o", str(tmp_path / "a"), "--config", str(config))
    flags = ["--tau", "3", "--smooth", "binomial:2", "--open", "1", "--connectivity", "4"]
    by_flags = gccl(str(tmp_path / "d.npy"), "-o", str(tmp_path / "b"), *flags)
    assert by_file.exit_code == 0 and by_flags.exit_code == 0, by_file.output + by_flags.output
    labels = read_label_image(tmp_path / "a" / "d.labels.png")
    np.testing.assert_array_equal(labels, read_label_image(tmp_path / "b" / "d.labels.png"))
    mask = scipy_mask(values != 0, [("open", 1)], 4)
    smoothed = oracle_smooth(values, mask, "binomial", 2)
    image = np.array([[np.nan if v is None else v for v in row] for row in smoothed])
    expected = bfs_labels(image, LabelParams(background=None, tau=3, connectivity=4))
    np.testing.assert_array_equal(labels, expected)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--smooth", "box:1"], "'smooth' needs 'tau'"),
        (["--tau", "1", "--smooth", "box:0"], "'smooth' must be box:R or binomial:R"),
        (["--tau", "1", "--smooth", "box:8"], "'smooth' must be box:R or binomial:R"),
        (["--tau", "1", "--smooth", "gauss:1"], "'smooth' must be box:R or binomial:R"),
        (["--tau", "1", "--smooth", "box"], "'smooth' must be box:R or binomial:R"),
        (["--erode", "-1"], "'erode' must be a whole number >= 0"),
        (["--open", "-3"], "'open' must be a whole number >= 0"),
    ],
)
def test_bad_stage_options_are_usage_errors(tmp_path: Path, mask_image, args, needle) -> None:
    path, _ = mask_image
    result = gccl(str(path), "-o", str(tmp_path / "out"), *args)
    assert result.exit_code == 2
    assert needle in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_bad_stage_keys_in_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("close: many\n")
    with pytest.raises(UsageError, match=r"c\.yaml: 'close' must be a whole number"):
        resolve([config], {})


def test_settings_fill_the_label_params() -> None:
    settings = resolve([], {"dilate": 1, "erode": 2, "close": 0, "open": 4, "smooth": "Box:3",
                            "tau": "2"})  # fmt: skip
    params = settings.params
    assert params.morphology == (("open", 4), ("erode", 2), ("dilate", 1))
    assert params.smooth == ("box", 3)
    assert resolve([], {}).params.morphology == ()
    assert resolve([], {"smooth": "none"}).params.smooth is None


def test_show_round_trips_the_stage_keys(tmp_path: Path) -> None:
    settings = resolve([], {"tau": "1", "smooth": "binomial:3", "close": 2})
    config = tmp_path / "s.yaml"
    config.write_text(settings.as_yaml())
    assert resolve([config], {}) == settings


@pytest.mark.parametrize("smooth", [[], ["--smooth", "binomial:2"]], ids=["plain", "smooth"])
def test_depth_recipe_with_closing_makes_no_components_at_0_mm(tmp_path: Path, smooth) -> None:
    # Two surfaces with scattered holes (0 = no reading), as a depth camera gives them.
    rng = np.random.default_rng(5)
    depth = np.where(np.arange(60)[None, :] < 30, 800, 1500).repeat(40, axis=0)
    depth = (depth + rng.integers(0, 5, depth.shape)).astype(np.uint16)
    depth[rng.random(depth.shape) < 0.15] = 0
    path = tmp_path / "frame.depth.npy"
    np.save(path, depth)
    for close in ("1", "2", "3"):
        out = tmp_path / f"out{close}"
        result = gccl(str(path), "-o", str(out), "--tau", "20", "--close", close,
                      "--min-area", "5", *smooth)  # fmt: skip
        assert result.exit_code == 0, result.output
        with open(out / "frame.depth.stats.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows and all(int(row["min"]) >= 800 for row in rows), rows
        means = sorted(float(row["mean"]) for row in rows if int(row["area"]) > 100)
        assert len(means) == 2 and 800 <= means[0] <= 805 and 1500 <= means[1] <= 1505
