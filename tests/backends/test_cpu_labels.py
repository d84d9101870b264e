"""CPU backend labels against scipy.ndimage.label (binary) and the BFS oracle (every mode)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import pixel_values
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import bfs_labels, filter_min_area, joins
from scipy import ndimage
from shapes import NASTY, checkerboard, rings, rounding_pairs, snake, spiral

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.cpu.labels import label_image
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams


def scipy_labels(mask: np.ndarray, connectivity: int) -> tuple[np.ndarray, int]:
    """scipy's labels (raster order) of a boolean mask."""
    structure = ndimage.generate_binary_structure(2, 1 if connectivity == 4 else 2)
    labels, count = ndimage.label(mask, structure=structure)
    return labels, int(count)


def assert_binary_matches_scipy(mask: np.ndarray, connectivity: int) -> None:
    """Label `mask` (as bool and as uint8) and compare with scipy exactly."""
    expected, count = scipy_labels(mask, connectivity)
    for image in (mask, mask.astype(np.uint8) * 200):
        labels, table, components = label_image(image, LabelParams(connectivity=connectivity))
        assert labels.dtype == np.uint32
        np.testing.assert_array_equal(labels, expected)
        assert components == count == len(table)


@st.composite
def masks(draw: st.DrawFn, max_side: int = 40) -> np.ndarray:
    height, width = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    density = draw(st.sampled_from([0.05, 0.3, 0.45, 0.55, 0.7, 0.95]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rng.random((height, width)) < density


@pytest.mark.slow
@pytest.mark.parametrize("connectivity", [4, 8])
@settings(max_examples=150)
@given(mask=masks())
def test_binary_random_matches_scipy(mask: np.ndarray, connectivity: int) -> None:
    assert_binary_matches_scipy(mask, connectivity)


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("name", NASTY)
def test_nasty_cases_match_scipy(name: str, connectivity: int) -> None:
    assert_binary_matches_scipy(NASTY[name], connectivity)


@pytest.mark.parametrize("connectivity", [4, 8])
def test_tiny_images_by_hand(connectivity: int) -> None:
    params = LabelParams(connectivity=connectivity)
    assert label_image(np.ones((1, 1), np.uint8), params)[0].tolist() == [[1]]
    assert label_image(np.zeros((1, 1), np.uint8), params)[0].tolist() == [[0]]
    row = np.array([[0, 3, 3, 0, 1, 0]], np.uint8)
    assert label_image(row, params)[0].tolist() == [[0, 1, 1, 0, 2, 0]]
    assert label_image(row.T, params)[0].T.tolist() == [[0, 1, 1, 0, 2, 0]]
    empty, table, components = label_image(np.zeros((5, 4), np.uint8), params)
    assert not empty.any() and components == 0 and len(table) == 0
    full, table, components = label_image(np.ones((5, 4), np.uint8), params)
    assert (full == 1).all() and components == 1 and table.area.tolist() == [20]


def test_checkerboard_by_hand() -> None:
    mask = checkerboard(9, 11)
    four = label_image(mask, LabelParams(connectivity=4))[0]
    # Every pixel alone, numbered in raster order.
    assert four[mask].tolist() == list(range(1, int(mask.sum()) + 1))
    assert not four[~mask].any()
    eight, _, components = label_image(mask, LabelParams(connectivity=8))
    assert components == 1 and (eight[mask] == 1).all()


@pytest.mark.parametrize("connectivity", [4, 8])
def test_giant_and_ring_components_by_hand(connectivity: int) -> None:
    for mask in (snake(200), spiral(101)):
        labels, _, components = label_image(mask, LabelParams(connectivity=connectivity))
        assert components == 1
        np.testing.assert_array_equal(labels, mask.astype(np.uint32))
    mask, count = rings(41)
    assert label_image(mask, LabelParams(connectivity=connectivity))[2] == count


# --- every mode against the BFS oracle -------------------------------------------------


#: (relative, quadratic) of the growing tolerances the property tests draw: each term
#: alone and both.
GROWING = [
    (relative, quadratic)
    for relative in (0.0, 1e-9, 0.01, 0.1, 0.5, 1.0, 3.0)
    for quadratic in (0.0, 1e-12, 3.5e-6, 1e-3, 0.05, 1.0)
    if relative or quadratic
]


@st.composite
def labeling_cases(
    draw: st.DrawFn,
    tau: bool,
    sides: tuple[int, int] = (1, 12),
    dtypes: tuple[np.dtype, ...] = SUPPORTED_DTYPES,
    growing: bool = False,
) -> tuple[np.ndarray, LabelParams]:
    """Images and parameters; with `growing`, a tolerance that grows with the values (at
    least one coefficient above 0)."""
    dtype = draw(st.sampled_from(dtypes))
    shape = (draw(st.integers(*sides)), draw(st.integers(*sides)))
    values = pixel_values(draw, dtype, shape)
    relative, quadratic = draw(st.sampled_from(GROWING)) if growing else (0.0, 0.0)
    params = LabelParams(
        background=draw(st.sampled_from([0, 0, None, 1, -1, 3, 1.5])),
        invert=draw(st.booleans()),
        threshold=draw(st.sampled_from([None, None, None, 0, 2.5, -1])),
        tau=draw(st.sampled_from([0, 0.5, 1, 1.5, 2, 3, 255, 2**32])) if tau else None,
        tau_relative=relative,
        tau_quadratic=quadratic,
        connectivity=draw(st.sampled_from([4, 8])),
        min_area=draw(st.sampled_from([0, 0, 1, 2, 3, 5])),
    )
    return values, params


def assert_matches_oracle(values: np.ndarray, params: LabelParams) -> None:
    expected = bfs_labels(values, params)
    labels, table, components = label_image(values, params)
    kept = filter_min_area(expected, params.min_area)
    np.testing.assert_array_equal(labels, kept)
    assert components == int(expected.max(initial=0))
    assert len(table) == int(kept.max(initial=0))


@pytest.mark.slow
@settings(max_examples=400)
@given(labeling_cases(tau=True))
def test_tau_mode_matches_oracle(case: tuple[np.ndarray, LabelParams]) -> None:
    assert_matches_oracle(*case)


@settings(max_examples=60)
@given(labeling_cases(tau=True, sides=(16, 40), dtypes=(np.dtype(np.uint8), np.dtype(np.int16))))
def test_tau_mode_larger_images_match_oracle(case: tuple[np.ndarray, LabelParams]) -> None:
    assert_matches_oracle(*case)


@pytest.mark.parametrize(
    ("dtype", "integers"),
    [(np.float64, False), (np.float64, True), (np.uint32, True), (np.int32, True)],
)
def test_a_growing_tolerance_is_rounded_as_the_contract_orders_it(
    dtype: type, integers: bool
) -> None:
    """Pairs (0, x) whose tolerance of x lands within a rounding of x: they join exactly
    when the contract's order of products and sums says so, where another order or a
    fused multiply-add would decide otherwise for half of them."""
    for x, tau, relative, quadratic, expected in rounding_pairs(integers=integers):
        assert joins(0.0, x, tau, relative, quadratic) == expected
        params = LabelParams(
            tau=tau, tau_relative=relative, tau_quadratic=quadratic, background=None
        )
        labels = label_image(np.array([[0, x]], dtype), params)[0]
        assert (labels[0, 0] == labels[0, 1]) == expected, (x, tau, relative, quadratic)


@pytest.mark.slow
@settings(max_examples=400)
@given(labeling_cases(tau=True, growing=True))
def test_a_growing_tolerance_matches_oracle(case: tuple[np.ndarray, LabelParams]) -> None:
    assert_matches_oracle(*case)


@pytest.mark.slow
@settings(max_examples=60)
@given(
    labeling_cases(
        tau=True,
        sides=(16, 40),
        dtypes=(np.dtype(np.uint16), np.dtype(np.int32), np.dtype(np.float32)),
        growing=True,
    )
)
def test_a_growing_tolerance_on_larger_images_matches_oracle(
    case: tuple[np.ndarray, LabelParams],
) -> None:
    assert_matches_oracle(*case)


@pytest.mark.slow
@settings(max_examples=200)
@given(labeling_cases(tau=False))
def test_binary_foreground_rules_match_oracle(case: tuple[np.ndarray, LabelParams]) -> None:
    assert_matches_oracle(*case)


TAU_CASES = {
    # name: (values, params)
    "uint8 raster ramp": (np.arange(60, dtype=np.uint8).reshape(6, 10), LabelParams(tau=1)),
    "uint16 ramp, tau 0": (np.arange(24, dtype=np.uint16).reshape(4, 6) * 300, LabelParams(tau=0)),
    "plateaus tau 0": (
        np.repeat(np.array([[5, 5, 9, 9, 5], [5, 9, 9, 5, 5]], np.uint8), 3, axis=0),
        LabelParams(tau=0, connectivity=4),
    ),
    "float tau on ints": (np.array([[0, 1, 3, 4, 6]], np.int32), LabelParams(tau=1.5)),
    "int16 negatives": (
        np.array([[-300, -299, -297, 0], [-1, 1, 2, -32768]], np.int16),
        LabelParams(tau=2, connectivity=4),
    ),
    "float32 NaN and inf": (
        np.array([[1, np.nan, 1.5, np.inf], [np.inf, np.inf, -np.inf, 2]], np.float32),
        LabelParams(tau=0.5, background=None, connectivity=8),
    ),
    "int32 extremes": (
        np.array([[-(2**31), 2**31 - 1, 0]], np.int32),
        LabelParams(tau=2**32 - 1, background=None),
    ),
    "int32 extremes, tau one short": (
        np.array([[-(2**31), 2**31 - 1], [2**31 - 1, -(2**31)]], np.int32),
        LabelParams(tau=2**32 - 1.5, background=None),
    ),
    "uint32 extremes, tau one short": (
        np.array([[0, 2**32 - 1], [2**32 - 1, 1]], np.uint32),
        LabelParams(tau=2**32 - 2.5, background=None, connectivity=4),
    ),
}


@pytest.mark.parametrize("name", TAU_CASES)
def test_fixed_tau_cases_match_oracle(name: str) -> None:
    assert_matches_oracle(*TAU_CASES[name])


def test_ramps_plateaus_and_float_tau_by_hand() -> None:
    ramp = np.add.outer(np.arange(6), np.arange(10)).astype(np.uint8) + 1  # 1 + x + y
    assert (label_image(ramp, LabelParams(tau=1, connectivity=4))[0] == 1).all()
    tau0 = label_image(ramp, LabelParams(tau=0, connectivity=4))[0]
    assert tau0.ravel().tolist() == list(range(1, 61))  # every pixel alone
    # 8-connected, tau 0: one component per anti-diagonal, first met in raster order.
    np.testing.assert_array_equal(label_image(ramp, LabelParams(tau=0))[0], ramp)
    plateaus = np.array([[5, 5, 9], [9, 9, 9]], np.uint8)
    assert label_image(plateaus, LabelParams(tau=0, connectivity=4))[0].tolist() == [
        [1, 1, 2],
        [2, 2, 2],
    ]
    steps = np.array([[1, 2, 4, 5, 7]], np.int32)
    assert label_image(steps, LabelParams(tau=1.5))[0].tolist() == [[1, 1, 2, 2, 3]]
    assert label_image(steps, LabelParams(tau=2.0))[0].tolist() == [[1, 1, 1, 1, 1]]


# --- regressions for cc3d's pitfalls ---------------------------------------------------


def test_cc3d_delta_8_connectivity_does_not_overmerge() -> None:
    values = np.array([[95, 95], [5, 5], [1, 1], [100, 100]], np.uint8)
    labels, _, components = label_image(values, LabelParams(tau=10, connectivity=8))
    # 95-5 and 1-100 are far apart; 5 and 1 join: three components, by hand.
    assert components == 3
    assert labels.tolist() == [[1, 1], [2, 2], [2, 2], [3, 3]]


@pytest.mark.parametrize("connectivity", [4, 8])
def test_signed_integers_are_not_read_as_unsigned(connectivity: int) -> None:
    params = LabelParams(tau=2, connectivity=connectivity, background=None)
    # As unsigned, -1 would be 65535, far from 1; signed they are 2 apart.
    assert label_image(np.array([[-1, 1]], np.int16), params)[0].tolist() == [[1, 1]]
    # As unsigned, -128 would be 128, next to 127; signed they are 255 apart.
    assert label_image(np.array([[-128, 127]], np.int8), params)[0].tolist() == [[1, 2]]
    assert label_image(np.array([[-(2**31), 2**31 - 1]], np.int32), params)[0].tolist() == [[1, 2]]


@pytest.mark.parametrize("connectivity", [4, 8])
def test_tau_at_the_dtype_maximum_joins_everything(connectivity: int) -> None:
    # cc3d 4.1 with delta == dtype max mislabels the first and raises on the second.
    params = LabelParams(tau=255, connectivity=connectivity)
    assert label_image(np.array([[1], [255], [255]], np.uint8), params)[0].ravel().tolist() == [
        1,
        1,
        1,
    ]
    assert label_image(np.array([[3], [2], [3]], np.uint8), params)[0].ravel().tolist() == [1] * 3
    huge = LabelParams(tau=2**40, connectivity=connectivity, background=None)
    extremes = np.array([[-(2**31)], [0], [2**31 - 1]], np.int32)
    assert label_image(extremes, huge)[0].ravel().tolist() == [1, 1, 1]


def test_cc3d_bool_input_does_not_label_background() -> None:
    # cc3d 4.1 labels background pixels of this bool image (8-connectivity).
    mask = np.zeros((18, 7), bool)
    mask[1, 1] = mask[16, 6] = True
    labels, _, components = label_image(mask, LabelParams(connectivity=8))
    assert components == 2
    assert labels[1, 1] == 1 and labels[16, 6] == 2
    assert not labels[~mask].any()


# --- batches ---------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize(
    "params", [LabelParams(min_area=3), LabelParams(tau=2, connectivity=4, min_area=2)], ids=str
)
def test_batch_equals_images_one_by_one(threads: int, params: LabelParams) -> None:
    rng = np.random.default_rng(5)
    batch = rng.integers(0, 6, (5, 23, 17)).astype(np.int16)
    batch[2] = 0  # an empty image in the middle
    result = CpuBackend(threads=threads).label(batch[:, ::1, ::-1], params)  # not C-contiguous
    assert result.labels.shape == batch.shape and result.labels.dtype == np.uint32
    for i, image in enumerate(batch[:, ::1, ::-1]):
        labels, table, components = label_image(np.ascontiguousarray(image), params)
        np.testing.assert_array_equal(result.labels[i], labels)
        assert result.tables[i].equals(table)
        assert result.components[i] == components == int(bfs_labels(image, params).max())
        assert result.kept[i] == len(table) == int(labels.max())
    assert result.components[2] == 0 and result.kept[2] == 0


def test_batch_rejects_wrong_rank() -> None:
    with pytest.raises(ValueError):
        CpuBackend().label(np.zeros((4, 4), np.uint8), LabelParams())


def test_bool_arrays_holding_255_read_as_true() -> None:
    """Pillow's 1-bit arrays store True as byte 255; they must label like real bools."""
    rng = np.random.default_rng(5)
    canonical = rng.random((23, 37)) < 0.5
    odd = (canonical.astype(np.uint8) * 255).view(np.bool_)
    for params in (LabelParams(), LabelParams(invert=True), LabelParams(tau=0, background=None)):
        expected, expected_table, _ = label_image(canonical, params)
        labels, table, _ = label_image(odd, params)
        assert np.array_equal(labels, expected)
        assert table.equals(expected_table)
        assert table.max.max(initial=0) <= 1
