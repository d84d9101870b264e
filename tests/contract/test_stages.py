"""Morphology and smoothing before labeling (ccl_cli.contract.stages), against
independent references: scipy.ndimage for the morphology, a per-pixel brute-force
oracle (exact fractions for integers, the documented float64 evaluation order for
floats) for the smoothing, and the BFS oracle of tests/oracles.py for the labels and
statistics that follow."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import pixel_values
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import bfs_labels, component_stats, filter_min_area, is_foreground
from stage_oracles import opencv_mask, oracle_fill, oracle_smooth, scipy_mask

from ccl_cli.backends.cpu.labels import label_image
from ccl_cli.backends.cpu.stages import NumpyStages
from ccl_cli.backends.cuda.stages import strip_rows
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams
from ccl_cli.contract.stages import label_input, smooth_weights

MORPHOLOGY_OPS = ["close", "dilate", "erode", "open"]


def staged_mask(mask: np.ndarray, steps: list[tuple[str, int]], connectivity: int) -> np.ndarray:
    """The final mask gccl labels in binary mode (label_input's uint8 image)."""
    params = LabelParams(connectivity=connectivity, morphology=tuple(steps))
    image, plain, _ = label_input(mask.view(np.uint8), params, np, NumpyStages())
    assert image.dtype == np.uint8 and plain == LabelParams(connectivity=connectivity)
    return image.astype(bool)


def nasty_masks() -> list[np.ndarray]:
    checker = (np.indices((7, 9)).sum(axis=0) % 2).astype(bool)
    ring = np.ones((6, 6), bool)
    ring[2:4, 2:4] = False
    return [
        np.ones((1, 1), bool),
        np.zeros((1, 1), bool),
        np.ones((1, 7), bool),
        np.ones((7, 1), bool),
        np.array([[True, False, True, True, False]]),
        np.array([[True], [True], [False], [True]]),
        np.ones((5, 8), bool),
        np.zeros((5, 8), bool),
        checker,
        ~checker,
        ring,
        np.pad(np.ones((3, 3), bool), 2),
    ]


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("op", MORPHOLOGY_OPS)
@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_morphology_matches_scipy_and_opencv_on_nasty_masks(
    connectivity: int, op: str, n: int
) -> None:
    for mask in nasty_masks():
        got = staged_mask(mask, [(op, n)], connectivity)
        np.testing.assert_array_equal(got, scipy_mask(mask, [(op, n)], connectivity))
        np.testing.assert_array_equal(got, opencv_mask(mask, [(op, n)], connectivity))


def test_the_border_never_changes_the_result() -> None:
    # Written out by hand: outside the image is foreground to an erosion, so a full
    # 3x4 stays full and so does its closing; it is background to a dilation.
    full = np.ones((3, 4), bool)
    for op in ("erode", "close", "open"):
        assert staged_mask(full, [(op, 2)], 8).all()
    dot = np.zeros((3, 3), bool)
    dot[1, 1] = True
    assert staged_mask(dot, [("dilate", 1)], 4).astype(int).tolist() == [
        [0, 1, 0],
        [1, 1, 1],
        [0, 1, 0],
    ]
    edge = np.zeros((4, 5), bool)
    edge[:, :2] = True  # two columns at the left border: the outside keeps the first
    eroded = staged_mask(edge, [("erode", 1)], 4)
    assert eroded.astype(int).tolist() == [[1, 0, 0, 0, 0]] * 4


def test_closing_keeps_the_image_border() -> None:
    # A depth frame's first row, every reading valid: a closing only adds pixels.
    values = np.zeros((6, 9), np.uint16)
    values[0] = 1500
    values[3:, 2:7] = 2000
    params = LabelParams(tau=20, morphology=(("close", 1),))
    image, _, _ = label_input(values, params, np, NumpyStages())
    assert not np.isnan(image[0]).any() and (image[0] == 1500).all()


@pytest.mark.slow
@settings(max_examples=150)
@given(
    st.integers(1, 24),
    st.integers(1, 24),
    st.floats(0, 1),
    st.integers(0, 2**32 - 1),
    st.lists(st.tuples(st.sampled_from(MORPHOLOGY_OPS), st.integers(0, 3)), max_size=4),
    st.sampled_from([4, 8]),
)
def test_morphology_matches_scipy_and_opencv_on_random_masks(
    height: int,
    width: int,
    density: float,
    seed: int,
    steps: list[tuple[str, int]],
    connectivity: int,
) -> None:
    mask = np.random.default_rng(seed).random((height, width)) < density
    got = staged_mask(mask, steps, connectivity)
    np.testing.assert_array_equal(got, scipy_mask(mask, steps, connectivity))
    np.testing.assert_array_equal(got, opencv_mask(mask, steps, connectivity))


@settings(max_examples=100)
@given(
    st.integers(1, 20),
    st.integers(1, 20),
    st.floats(0, 1),
    st.integers(0, 2**32 - 1),
    st.integers(1, 4),
    st.sampled_from([4, 8]),
)
def test_closing_only_adds_and_opening_only_removes(
    height: int, width: int, density: float, seed: int, n: int, connectivity: int
) -> None:
    mask = np.random.default_rng(seed).random((height, width)) < density
    closed = staged_mask(mask, [("close", n)], connectivity)
    opened = staged_mask(mask, [("open", n)], connectivity)
    assert not (mask & ~closed).any()
    assert not (opened & ~mask).any()


def test_nan_is_never_foreground_even_after_dilation() -> None:
    values = np.array([[1.0, np.nan, 0.0], [0.0, 0.0, 0.0]], np.float32)
    params = LabelParams(morphology=(("dilate", 1),))
    image, plain, _ = label_input(values, params, np, NumpyStages())
    assert image.tolist() == [[1, 0, 0], [1, 1, 0]]
    assert plain.background == 0 and plain.tau is None


# --- smoothing -------------------------------------------------------------------------


def staged_values(values: np.ndarray, params: LabelParams) -> list[list]:
    """V' per pixel (None off the final mask) from label_input's tau-mode image."""
    image, plain, _ = label_input(values, params, np, NumpyStages())
    assert image.dtype == np.float64 and plain.background is None and plain.tau == params.tau
    return [[None if math.isnan(v) else v for v in row] for row in image.tolist()]


def assert_smooth_matches_oracle(values: np.ndarray, params: LabelParams) -> None:
    assert params.smooth is not None
    mask = np.array(
        [[is_foreground(v, values.dtype, params) for v in row] for row in values], bool
    ).reshape(values.shape)
    want = oracle_smooth(values, mask, *params.smooth)
    got = staged_values(values, params)
    # A float window holding +inf and -inf gives NaN: not foreground (None) either way.
    want = [[None if v is not None and math.isnan(v) else v for v in row] for row in want]
    assert got == want


@pytest.mark.slow
@settings(max_examples=150)
@given(st.data())
def test_smoothing_matches_the_oracle(data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from(SUPPORTED_DTYPES))
    shape = (data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12)))
    values = pixel_values(data.draw, dtype, shape)
    if dtype.kind not in "bf":
        holes = np.random.default_rng(data.draw(st.integers(0, 99))).random(shape) < 0.2
        values[holes] = 0  # nodata holes (background 0)
    params = LabelParams(
        tau=1,
        background=data.draw(st.sampled_from([0, None])),
        connectivity=data.draw(st.sampled_from([4, 8])),
        smooth=(data.draw(st.sampled_from(["box", "binomial"])), data.draw(st.integers(1, 3))),
    )
    assert_smooth_matches_oracle(values, params)


@pytest.mark.parametrize(
    ("dtype", "extreme"),
    [
        (np.uint8, 255),
        (np.uint16, 65535),
        (np.int16, -32768),
        (np.int16, 32767),
        (np.uint32, 2**32 - 1),
        (np.int32, -(2**31)),
        (np.int32, 2**31 - 1),
        (np.int8, -128),
    ],
)
@pytest.mark.parametrize("smooth", [("box", 1), ("binomial", 7), ("box", 7)])
def test_smoothing_at_dtype_extremes(dtype: type, extreme: int, smooth: tuple[str, int]) -> None:
    rng = np.random.default_rng(extreme & 0xFFFF)
    info = np.iinfo(dtype)
    values = np.full((9, 17), extreme, dtype)
    values[rng.random(values.shape) < 0.3] = info.max if extreme < 0 else info.min
    values[rng.random(values.shape) < 0.1] = 0
    assert_smooth_matches_oracle(values, LabelParams(tau=0, smooth=smooth))


def test_smoothing_rounds_exact_halves_up() -> None:
    # By hand: two masked pixels average to a half; halves go toward +infinity.
    params = LabelParams(tau=0, smooth=("box", 1))
    assert staged_values(np.array([[1, 2]], np.int16), params) == [[2.0, 2.0]]
    assert staged_values(np.array([[-1, -2]], np.int16), params) == [[-1.0, -1.0]]
    assert staged_values(np.array([[-3, 0, 4]], np.int16), params) == [[-3.0, None, 4.0]]
    # binomial:1 (weights 1, 2, 1) on one row: (2*1 + 1*2) / 3 -> 1, (1*1 + 2*2) / 3 -> 2.
    binomial = LabelParams(tau=0, smooth=("binomial", 1))
    assert staged_values(np.array([[1, 2, 0]], np.uint8), binomial) == [[1.0, 2.0, None]]


def test_float64_division_rounds_like_the_exact_integer_rule() -> None:
    # cuda/smooth.cu's strip kernels (R <= 3) take floor((2S + W) / (2W)) as the
    # floor of a float64 quotient; its proof needs |2S + W| < 2**53. Checked here
    # for every weight total W up to 64**2 (binomial:3), S at the extremes of
    # 32-bit values (|S| <= W * 2**32) and S next to every rounding boundary.
    w = np.arange(1, 64**2 + 1, dtype=np.int64)[:, None]
    limit = w * 2**32
    q = np.array([-(2**32), -(2**31) - 7, -3, -1, 0, 1, 5, 2**31 + 11, 2**32 - 1])
    boundary = q * w + (w - w // 2)  # 2S + W next to a multiple of 2W
    s = np.concatenate(
        [boundary + d for d in (-2, -1, 0, 1, 2)] + [limit - 1, -limit, limit // 3], axis=1
    )
    s = np.clip(s, -limit, limit)
    n, d = 2 * s + w, 2 * w
    assert np.abs(n).max() < 2**53
    with np.errstate(all="raise"):
        np.testing.assert_array_equal(np.floor(n.astype(np.float64) / d), n // d)


def test_float_estimate_and_remainder_round_like_the_exact_integer_rule() -> None:
    # cuda/smooth.cu's floor_div_small: any estimate within 1 of n / d, floored, is
    # off by at most one, and the remainder n - q * d puts it right. Checked with
    # estimates pushed up to 0.99 either way, for the int32 sums' range of n and d.
    rng = np.random.default_rng(6)
    d = 2 * rng.integers(1, 64**2 + 1, 200_000)
    n = np.clip(
        d * rng.integers(-(2**16), 2**16, d.size) + rng.integers(-3, 4, d.size),
        -(2**31) + 1,
        2**31 - 1,
    )
    for push in (-0.99, -0.5, 0.0, 0.5, 0.99):
        q = np.floor(n / d + push).astype(np.int64)
        r = n - q * d
        np.testing.assert_array_equal(q + (r >= d) - (r < 0), n // d)


def test_strip_kernel_weights_allow_the_exact_shortcuts() -> None:
    # cuda/smooth.cu's strip kernels (R <= 3) skip the multiply of the outer two
    # vertical terms (weight 1) and fuse w * v + acc for float32 v, which is exact
    # only while w * v fits float64's 53 bits: 24-bit significands times w <= 20.
    for kind in ("box", "binomial"):
        for radius in (1, 2, 3):
            weights = smooth_weights(kind, radius)
            assert weights[0] == weights[-1] == 1 and max(weights) <= 20
    rng = np.random.default_rng(6)
    v = (rng.random(10_000) * 2.0 ** rng.integers(-149, 128, 10_000)).astype(np.float32)
    for w in range(1, 21):
        product = np.float64(w) * v.astype(np.float64)
        back = product / w  # exact products of w < 2**5 divide back without loss
        np.testing.assert_array_equal(back, v.astype(np.float64))


def test_strip_rows_fill_whole_waves() -> None:
    # 4000x3000 on an H200 at 7 blocks of 4 warps per SM (one wave: 3696 warps) in
    # 34 warp columns: 28 rows make 108 strips per column, 3672 warps, one wave
    # nearly full (27 rows would need a second wave, 32 would leave 14% idle).
    assert strip_rows(3000, 34, 7 * 132 * 4, 3) == 28
    assert strip_rows(40, 1, 3696, 3) == 1  # a small image: a warp per row
    assert 24 <= strip_rows(3000, 34 * 64, 3696, 3) <= 32  # many waves anyway: long strips


def test_smoothing_skips_nan_and_background_holes() -> None:
    values = np.array([[10.0, np.nan, 20.0], [0.0, 30.0, 0.0]], np.float64)
    got = staged_values(values, LabelParams(tau=1, smooth=("box", 1)))
    # The masked values are 10, 20, 30; by hand: 10 sees 10, 30; 20 sees 20, 30; 30 sees all.
    assert got == [[20.0, None, 25.0], [None, 20.0, None]]


def test_weights() -> None:
    assert smooth_weights("box", 2) == (1, 1, 1, 1, 1)
    assert smooth_weights("binomial", 2) == (1, 4, 6, 4, 1)
    assert sum(smooth_weights("binomial", 7)) == 2**14
    for bad in [("box", 0), ("binomial", 8), ("gauss", 1)]:
        with pytest.raises(ValueError):
            smooth_weights(*bad)


# --- labeling after the stages -----------------------------------------------------------


@st.composite
def staged_cases(draw: st.DrawFn) -> tuple[np.ndarray, LabelParams]:
    dtype = draw(st.sampled_from(SUPPORTED_DTYPES))
    values = pixel_values(draw, dtype, (draw(st.integers(1, 14)), draw(st.integers(1, 14))))
    tau = draw(st.sampled_from([None, 0, 1, 2.5]))
    morphology = tuple(
        draw(st.lists(st.tuples(st.sampled_from(MORPHOLOGY_OPS), st.integers(0, 2)), max_size=2))
    )
    smooth = None
    if tau is not None and draw(st.booleans()):
        smooth = (draw(st.sampled_from(["box", "binomial"])), draw(st.integers(1, 2)))
    params = LabelParams(
        background=draw(st.sampled_from([0, None])),
        threshold=draw(st.sampled_from([None, 0])),
        invert=draw(st.booleans()),
        tau=tau,
        connectivity=draw(st.sampled_from([4, 8])),
        min_area=draw(st.integers(0, 3)),
        morphology=morphology,
        smooth=smooth,
    )
    return values, params


@pytest.mark.slow
@settings(max_examples=200)
@given(staged_cases())
def test_staged_labeling_matches_the_oracles(case: tuple[np.ndarray, LabelParams]) -> None:
    values, params = case
    mask = np.array(
        [[is_foreground(v, values.dtype, params) for v in row] for row in values], bool
    ).reshape(values.shape)
    readings = mask
    mask = scipy_mask(mask, list(params.morphology), params.connectivity)
    if values.dtype.kind == "f":
        mask &= ~np.isnan(values)
    steps = sum(n for op, n in params.morphology if op in ("dilate", "open", "close"))
    read = values
    if params.tau is None:
        stage_image, stage_params = (
            mask.astype(np.uint8),
            LabelParams(connectivity=params.connectivity),
        )
    else:
        numbers = values.view(np.uint8) if values.dtype == bool else values
        if steps:  # pixels added by morphology take their readings' mean
            numbers = oracle_fill(numbers, readings, mask, steps)
            read = numbers.view(bool) if values.dtype == bool else numbers
        if params.smooth is None:
            smoothed = [[float(v) for v in row] for row in numbers.astype(np.float64)]
        else:
            smoothed = oracle_smooth(numbers, mask, *params.smooth)
        stage_image = np.array(
            [
                [smoothed[y][x] if mask[y, x] else math.nan for x in range(values.shape[1])]
                for y in range(values.shape[0])
            ],
            np.float64,
        ).reshape(values.shape)
        stage_params = LabelParams(
            background=None, tau=params.tau, connectivity=params.connectivity
        )
    expected = filter_min_area(bfs_labels(stage_image, stage_params), params.min_area)
    labels, table, _ = label_image(values, params)
    np.testing.assert_array_equal(labels, expected)
    rows = component_stats(expected, read)  # the original values, filled in tau mode
    assert len(table) == len(rows)
    for i, row in enumerate(rows):
        assert (table.area[i], table.x[i], table.y[i]) == (row.area, row.x, row.y)
        assert (table.width[i], table.height[i]) == (row.width, row.height)
        assert np.array_equal([table.min[i], table.max[i]], [row.min, row.max], equal_nan=True)
        if values.dtype.kind != "f":
            assert table.mean[i] == row.exact_mean


def test_statistics_read_the_original_values() -> None:
    # Dilation turns the 0s around a single 9 into foreground: mean over 9 pixels is 1.
    values = np.zeros((3, 3), np.uint8)
    values[1, 1] = 9
    labels, table, _ = label_image(values, LabelParams(morphology=(("dilate", 1),)))
    assert labels.tolist() == [[1, 1, 1], [1, 1, 1], [1, 1, 1]]
    assert (table.area[0], table.mean[0], table.min[0], table.max[0]) == (9, 1.0, 0.0, 9.0)


def depth_with_holes() -> np.ndarray:
    """Two flat surfaces 300 mm apart (1000 and 1300 mm), each with holes (0 = no reading)."""
    depth = np.full((20, 30), 1000, np.uint16)
    depth[:, 15:] = 1300
    depth[4:7, 3:6] = 0  # a 3x3 hole in the near surface
    depth[10, 20] = 0  # a one-pixel hole in the far one
    depth[12:14, 22:24] = 0
    return depth


@pytest.mark.parametrize("close", [1, 2, 3])
def test_tau_closing_fills_holes_from_the_readings_around_them(close: int) -> None:
    depth = depth_with_holes()
    params = LabelParams(tau=20, morphology=(("close", close),))
    image, _, read = label_input(depth, params, np, NumpyStages())
    holes = depth == 0
    closed = scipy_mask(~holes, [("close", close)], 8)
    filled = holes & closed
    # Every surface is flat: a filled pixel's readings all read that surface's depth.
    surface = np.where(np.arange(30) < 15, 1000, 1300)[None, :].repeat(20, axis=0)
    np.testing.assert_array_equal(read[filled], surface[filled])
    np.testing.assert_array_equal(image[filled], surface[filled].astype(np.float64))
    np.testing.assert_array_equal(read[~filled], depth[~filled])  # readings untouched
    labels, table, _ = label_image(depth, params)
    assert len(table) == 2 and table.min.min() == 1000 and table.max.max() == 1300
    assert set(np.unique(labels[filled])) <= {1, 2}


def test_a_filled_pixel_takes_the_rounded_mean_of_the_readings_within_the_dilations() -> None:
    values = np.array([[10, 0, 13], [0, 0, 0], [0, 0, 0]], np.int16)
    params = LabelParams(tau=100, morphology=(("dilate", 1),))
    _, _, read = label_input(values, params, np, NumpyStages())
    # (1, 1) sees 10 and 13: 11.5 rounds half up to 12; (0, 1) too; (2, 2) sees nothing
    # within one step but is not added; (1, 0) sees 10 alone.
    assert read.tolist() == [[10, 12, 13], [10, 12, 13], [0, 0, 0]]
    negative = np.array([[-3, 0, -4]], np.int32)
    _, _, read = label_input(negative, params, np, NumpyStages())
    assert read.tolist() == [[-3, -3, -4]]  # -3.5 rounds half up to -3


def test_binary_mode_statistics_still_read_the_added_pixels_original_values() -> None:
    values = np.zeros((3, 3), np.uint8)
    values[1, 1] = 9
    _, _, read = label_input(values, LabelParams(morphology=(("dilate", 1),)), np, NumpyStages())
    assert read is values
