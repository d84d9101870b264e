"""CPU backend statistics against skimage's regionprops_table and exact Python arithmetic."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from conftest import pixel_values
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import bfs_labels, component_stats, filter_min_area, rule_float_mean
from skimage.measure import regionprops_table

import ccl_cli
from ccl_cli.backends.cpu import backend as cpu
from ccl_cli.backends.cpu.labels import label_image
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams
from ccl_cli.contract.stats import FLOAT_SUM_BITS, StatsTable, float_sum_shift
from ccl_cli.io.csv_text import stats_csv

PROPERTIES = ("area", "bbox", "centroid", "intensity_mean", "intensity_min", "intensity_max")


def assert_matches_regionprops(labels: np.ndarray, table: StatsTable, values: np.ndarray) -> None:
    """Compare every column with skimage (exact where skimage is exact)."""
    props = regionprops_table(labels.astype(np.int64), values, properties=PROPERTIES)
    assert props["area"].tolist() == table.area.tolist()
    # skimage's bbox is (min_row, min_col, max_row + 1, max_col + 1).
    assert props["bbox-1"].tolist() == table.x.tolist()
    assert props["bbox-0"].tolist() == table.y.tolist()
    assert (props["bbox-3"] - props["bbox-1"]).tolist() == table.width.tolist()
    assert (props["bbox-2"] - props["bbox-0"]).tolist() == table.height.tolist()
    np.testing.assert_allclose(table.centroid_x, props["centroid-1"], rtol=1e-13)
    np.testing.assert_allclose(table.centroid_y, props["centroid-0"], rtol=1e-13)
    assert table.min.tolist() == props["intensity_min"].astype(np.float64).tolist()
    assert table.max.tolist() == props["intensity_max"].astype(np.float64).tolist()
    # skimage averages float32 in float32; the exact mean is checked elsewhere.
    rtol = 1e-5 if values.dtype == np.float32 else 1e-12
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(table.mean, props["intensity_mean"], rtol=rtol)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("tau", [None, 3])
def test_random_images_match_regionprops(dtype: np.dtype, tau: float | None) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{dtype}{tau}".encode()))
    if dtype.kind == "b":
        values = rng.random((61, 47)) < 0.35
    else:
        values = rng.integers(0, 12, (61, 47)).astype(dtype)
        values[rng.random(values.shape) < 0.65] = 0
        if dtype.kind in "if":
            values[rng.random(values.shape) < 0.2] *= -1
        if dtype.kind == "f":
            values[rng.random(values.shape) < 0.05] = np.nan
            values = values * 0.37
    labels, table, _ = label_image(values, LabelParams(tau=tau))
    assert len(table) > 20
    assert table.integer_values == (dtype.kind != "f")
    assert_matches_regionprops(labels, table, values)


def float_mean_tolerance(pixels: list[float]) -> float:
    """Bound of the float-mean rule's error: 2**-s from truncation plus rounding."""
    finite = [abs(v) for v in pixels if math.isfinite(v)]
    area_bits = (len(pixels) - 1).bit_length()
    return max(finite, default=0.0) * 2.0 ** (area_bits - 61) + 4e-16 * abs(
        math.fsum(finite) / len(pixels)
    )


@st.composite
def stats_cases(draw: st.DrawFn) -> tuple[np.ndarray, LabelParams]:
    dtype = draw(st.sampled_from(SUPPORTED_DTYPES))
    values = pixel_values(draw, dtype, (draw(st.integers(1, 16)), draw(st.integers(1, 16))))
    if dtype.kind == "f":
        with np.errstate(over="ignore"):  # 1e30 * 3e20 is inf in float32: fine
            values = values * draw(st.sampled_from([1.0, 0.1, 1e-30, 3e20]))
    params = LabelParams(
        background=draw(st.sampled_from([0, None])),
        tau=draw(st.sampled_from([None, 0, 1, 2.5])),
        connectivity=draw(st.sampled_from([4, 8])),
    )
    return values, params


@pytest.mark.slow
@settings(max_examples=200)
@given(stats_cases())
def test_stats_match_exact_arithmetic(case: tuple[np.ndarray, LabelParams]) -> None:
    values, params = case
    expected_labels = bfs_labels(values, params)
    labels, table, _ = label_image(values, params)
    np.testing.assert_array_equal(labels, expected_labels)
    expected = component_stats(expected_labels, values)
    assert len(table) == len(expected)
    for i, row in enumerate(expected):
        pixels = [float(v) for v in values[expected_labels == i + 1]]
        got = (table.area[i], table.x[i], table.y[i], table.width[i], table.height[i])
        assert got == (row.area, row.x, row.y, row.width, row.height)
        assert (table.centroid_x[i], table.centroid_y[i]) == (row.centroid_x, row.centroid_y)
        assert (table.min[i], table.max[i]) == (row.min, row.max)
        if values.dtype.kind != "f":
            # float64(exact integer sum) / area: the sums here are far below 2**53.
            assert table.mean[i] == row.exact_mean
            continue
        rule = rule_float_mean(pixels)
        assert np.array_equal(table.mean[i], rule, equal_nan=True)
        if math.isfinite(row.exact_mean):
            assert abs(table.mean[i] - row.exact_mean) <= float_mean_tolerance(pixels)


def test_float_mean_infinities() -> None:
    values = np.array([[np.inf, 1, 0, -np.inf, 2, 0, np.inf, -np.inf, 0, 5]], np.float32)
    table = label_image(values, LabelParams(background=0))[1]
    assert table.mean[0] == np.inf and table.mean[1] == -np.inf
    assert np.isnan(table.mean[2]) and table.mean[3] == 5
    assert table.min.tolist()[:3] == [1, -np.inf, -np.inf]
    assert table.max.tolist()[:3] == [np.inf, 2, np.inf]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("nan", [np.nan, -np.nan], ids=["+nan", "-nan"])
def test_a_component_holding_a_nan_has_nan_mean_min_and_max(nan, dtype) -> None:
    # A ring of 2s (and a lone 5) around a NaN pixel: --fill-holes brings the NaN into
    # the ring's component, whose values then have no mean, min or max.
    values = np.zeros((2, 9, 9), dtype)
    values[:, 1:6, 1:6] = 2
    values[:, 3, 3] = nan
    values[1, 3, 3] = 2  # the second image: no NaN, plain statistics
    values[:, 7, 7] = 5
    labels, tables = ccl_cli.label(values, background=0, fill_holes=True)
    first, second = tables
    assert labels[0, 3, 3] == 1 and first.area[0] == 25
    assert np.isnan(first.mean[0]) and np.isnan(first.min[0]) and np.isnan(first.max[0])
    assert not np.signbit(first.mean[0]) and not np.signbit(first.min[0])
    assert (first.mean[1], first.min[1], first.max[1]) == (5, 5, 5)
    assert (second.mean[0], second.min[0], second.max[0]) == (2, 2, 2)


def test_float_mean_keeps_small_values_next_to_large_ones() -> None:
    values = np.array([[1e15, 1.0, 3.0, -1e15]], np.float64)
    mean = label_image(values, LabelParams(background=None))[1].mean[0]
    assert mean == rule_float_mean([1e15, 1.0, 3.0, -1e15])
    assert abs(mean - 1.0) <= 1e15 * 2.0**-59


def test_integer_sums_are_exact_beyond_float64() -> None:
    # 2**21 pixels near 2**32: a float64 running sum would round; the int64 sum cannot.
    rng = np.random.default_rng(3)
    values = (np.uint32(2**32 - 1) - rng.integers(0, 2**20, (1024, 2048))).astype(np.uint32)
    table = label_image(values, LabelParams(background=None))[1]
    exact = int(values.sum(dtype=np.uint64))
    assert table.area[0] == values.size
    assert table.mean[0] == float(exact) / values.size
    assert table.centroid_x[0] == 1023.5 and table.centroid_y[0] == 511.5


@pytest.mark.parametrize("tau", [None, 1])
@pytest.mark.parametrize("min_area", [1, 2, 4, 10, 10**6])
def test_min_area_removes_and_renumbers(tau: float | None, min_area: int) -> None:
    rng = np.random.default_rng(min_area)
    values = rng.integers(0, 4, (40, 30)).astype(np.uint8)
    all_labels, all_table, count = label_image(values, LabelParams(tau=tau))
    labels, table, components = label_image(values, LabelParams(tau=tau, min_area=min_area))
    assert components == count  # K is counted before filtering
    np.testing.assert_array_equal(labels, filter_min_area(all_labels, min_area))
    survivors = np.flatnonzero(all_table.area >= min_area)
    assert table.equals(all_table.take(survivors))
    assert len(table) == int(labels.max(initial=0)) == len(survivors)


def test_csv_round_trips_every_value() -> None:
    values = np.array([[0.1, 0.2, 0, 1 / 3]], np.float64)
    table = label_image(values, LabelParams())[1]
    lines = b"".join(stats_csv(table)).decode().splitlines()
    assert lines[0] == "label,area,x,y,width,height,centroid_x,centroid_y,mean,min,max"
    row = lines[1].split(",")
    assert row[:6] == ["1", "2", "0", "0", "2", "1"]
    parsed = [float(v) for v in row[6:]]
    assert parsed == [0.5, 0.0, table.mean[0], 0.1, 0.2]
    assert lines[2].split(",")[8:] == [repr(1 / 3)] * 3


@pytest.mark.parametrize("row", [[0.0, -0.0, 1.0], [-0.0, 0.0, 1.0], [0.0, -0.0], [-0.0, 0.0]])
def test_signed_zero_extremes_do_not_depend_on_pixel_order(row: list[float]) -> None:
    values = np.array([row], np.float32)
    _, table, _ = label_image(values, LabelParams(background=None))
    assert table.min[0] == 0 and np.signbit(table.min[0])
    assert table.max[0] == max(row)
    assert not np.signbit(table.max[0])


def test_equals_tells_signed_zeros_apart() -> None:
    values = np.array([[-0.0, 2.0]], np.float64)
    _, table, _ = label_image(values, LabelParams(background=None))
    flipped = table.take(np.arange(len(table)))
    flipped.min = np.abs(flipped.min)
    assert table.equals(table.take(np.arange(len(table))))
    assert not table.equals(flipped)


def test_float_sum_shift_uses_ceil_log2_of_the_area() -> None:
    """The shift's a = ceil(log2(area)) (module doc), around every power of two."""
    powers = 2 ** np.arange(0, 41, dtype=np.int64)
    area = np.unique(np.concatenate([np.arange(1, 1000), powers - 1, powers, powers + 1]))
    area = area[area >= 1]
    absmax = np.full(len(area), 3.0)  # frexp exponent 2
    expected = [FLOAT_SUM_BITS - math.ceil(math.log2(int(a))) - 2 for a in area]
    assert float_sum_shift(absmax, area).tolist() == expected


def test_a_copied_table_owns_its_columns() -> None:
    table = (
        cpu.CpuBackend(threads=1)
        .label(np.eye(5, dtype=np.uint8)[None], LabelParams(connectivity=4))
        .tables[0]
    )
    copy = table.copy()
    assert copy.equals(table)
    copy.area[:] = 0
    assert copy.area.sum() == 0 and table.area.sum() == 5
