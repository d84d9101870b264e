"""ccl_cli.contract.params: the foreground test pixel by pixel, and the tau join rule as the
CPU backend labels it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import pixel_values
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import is_foreground, joins
from shapes import rounding_pairs

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import (
    SUPPORTED_DTYPES,
    LabelParams,
    dtype_max,
    foreground_mask,
    foreground_problem,
    tau_joins,
    threshold_side,
)

INTEGER_DTYPES = [d for d in SUPPORTED_DTYPES if d.kind in "iu"]


def display_values(values: np.ndarray, params: LabelParams) -> np.ndarray:
    """The values the background test sees, computed wide (the slow, obvious way):
    the originals, inverted when asked. Integers and 1-bit widened to int64 (so
    dtype max - v cannot wrap), floats to float64."""
    if values.dtype.kind == "f":
        wide = values.astype(np.float64)
        return -wide if params.invert else wide
    wide = values.astype(np.int64)
    return dtype_max(values.dtype) - wide if params.invert else wide


def labeled_joins(
    a: np.ndarray, b: np.ndarray, tau: float, relative: float = 0.0, quadratic: float = 0.0
) -> list[bool]:
    """Whether the CPU backend labels each pair a[i], b[i] (a 1x2 image, every value but NaN
    foreground) as one component: the tau rule as the product applies it."""
    batch = np.stack([a, b], axis=-1).reshape(len(a), 1, 2)
    params = LabelParams(background=None, tau=tau, tau_relative=relative, tau_quadratic=quadratic)
    labels = np.asarray(CpuBackend(1).label(batch, params).labels)
    return [bool(row[0, 0] != 0 and row[0, 0] == row[0, 1]) for row in labels]


def test_mode_follows_tau() -> None:
    assert LabelParams().mode == "binary"
    assert LabelParams(tau=0).mode == "tau"
    assert LabelParams(tau=2.5).mode == "tau"


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_dtype_max_of_integers(dtype: np.dtype) -> None:
    assert dtype_max(dtype) == np.iinfo(dtype).max


def test_dtype_max_of_bool_is_one() -> None:
    assert dtype_max(np.dtype(bool)) == 1


@pytest.mark.parametrize("dtype", INTEGER_DTYPES, ids=str)
def test_invert_does_not_wrap(dtype: np.dtype) -> None:
    info = np.iinfo(dtype)
    values = np.array([info.min, -1 if info.min else 1, info.max], dtype)
    inverted = display_values(values, LabelParams(invert=True))
    expected = [info.max - int(v) for v in values]
    assert inverted.tolist() == expected


def test_invert_of_bool_and_float() -> None:
    flipped = display_values(np.array([True, False]), LabelParams(invert=True))
    assert flipped.tolist() == [0, 1]
    negated = display_values(np.array([1.5, -np.inf], np.float32), LabelParams(invert=True))
    assert negated.tolist() == [-1.5, np.inf]


@st.composite
def images_and_params(draw: st.DrawFn) -> tuple[np.ndarray, LabelParams]:
    dtype = draw(st.sampled_from(SUPPORTED_DTYPES))
    values = pixel_values(draw, dtype, (draw(st.integers(1, 6)), draw(st.integers(1, 6))))
    invert = draw(st.booleans())
    extreme = -7.0 if dtype.kind == "f" else float(dtype_max(dtype))
    background = draw(st.sampled_from([0, None, 1, 7, -1, 2.5, -2.5, extreme]))
    threshold = draw(st.sampled_from([None, None, 0, 1.5, -1, 6.5, 127, 254.5, 255, 255.5]))
    return values, LabelParams(background=background, invert=invert, threshold=threshold)


@pytest.mark.slow
@settings(max_examples=300)
@given(images_and_params())
def test_foreground_mask_matches_the_contract(case: tuple[np.ndarray, LabelParams]) -> None:
    values, params = case
    mask = foreground_mask(values, params)
    expected = [[is_foreground(v, values.dtype, params) for v in row] for row in values]
    assert mask.dtype == bool
    assert mask.tolist() == expected


@pytest.mark.slow
@settings(max_examples=200)
@given(images_and_params())
def test_foreground_mask_is_the_display_value_test(case: tuple[np.ndarray, LabelParams]) -> None:
    values, params = case
    if params.threshold is not None or params.background is None:
        return
    expected = display_values(values, params) != params.background
    if values.dtype.kind == "f":
        expected &= ~np.isnan(values)
    np.testing.assert_array_equal(foreground_mask(values, params), expected)


def test_threshold_uses_original_values_even_when_inverted() -> None:
    values = np.array([[10, 100, 200, 255]], np.uint8)
    assert foreground_mask(values, LabelParams(threshold=100)).tolist() == [
        [False, False, True, True]
    ]
    # With invert: v < T on the original values, not on 255 - v.
    assert foreground_mask(values, LabelParams(threshold=100, invert=True)).tolist() == [
        [True, False, False, False]
    ]


def test_nan_is_never_foreground() -> None:
    values = np.array([np.nan, 1.0], np.float32)
    for params in (
        LabelParams(background=None),
        LabelParams(background=5),
        LabelParams(threshold=0, invert=True),
        LabelParams(threshold=0),
        LabelParams(invert=True),
    ):
        assert foreground_mask(values, params).tolist()[0] is False


def test_background_is_compared_after_invert() -> None:
    values = np.array([0, 5, 255], np.uint8)
    assert foreground_mask(values, LabelParams(invert=True)).tolist() == [True, True, False]
    assert foreground_mask(values, LabelParams(invert=True, background=250)).tolist() == [
        True,
        False,
        True,
    ]
    signed = np.array([-1, 0, 32767], np.int16)  # inverted: 32768, 32767, 0
    assert foreground_mask(signed, LabelParams(invert=True, background=32768)).tolist() == [
        False,
        True,
        True,
    ]


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int8, np.uint16], ids=str)
def test_integer_differences_are_exact_at_the_extremes(dtype: type) -> None:
    info = np.iinfo(dtype)
    a, b = np.array([info.min], dtype), np.array([info.max], dtype)
    span = int(info.max) - int(info.min)
    assert labeled_joins(a, b, float(span)) == [True]
    assert labeled_joins(a, b, float(span - 1)) == [False]
    assert labeled_joins(b, a, span - 0.5) == [False]


def test_float32_differences_are_taken_in_float64() -> None:
    a, b = np.array([0.1], np.float32), np.array([1e8], np.float32)
    exact = float(b[0]) - float(a[0])  # differs from float32's own difference
    assert exact != float(b[0] - a[0])
    assert labeled_joins(a, b, exact) == [True]
    assert labeled_joins(a, b, float(np.nextafter(exact, 0))) == [False]


def test_equal_values_always_join_and_nan_never() -> None:
    inf = np.array([np.inf, -np.inf, np.nan, 3.0])
    assert labeled_joins(inf, inf, 0) == [True, True, False, True]
    assert labeled_joins(inf, inf, -1) == [True, True, False, True]
    assert labeled_joins(inf, -inf, np.inf) == [True, True, False, True]
    assert labeled_joins(inf, -inf, 1e308) == [False, False, False, True]
    ints = np.array([4, -4], np.int16)
    assert labeled_joins(ints, ints, -1) == [True, True]


@pytest.mark.slow
@settings(max_examples=200)
@given(st.data())
def test_tau_joins_matches_the_contract(data: st.DataObject) -> None:
    dtype = data.draw(st.sampled_from(SUPPORTED_DTYPES))
    a = pixel_values(data.draw, dtype, (16,))
    b = pixel_values(data.draw, dtype, (16,))
    tau = data.draw(st.sampled_from([0, 0.5, 1, 1.5, 6, 2**31, np.inf, -1]))
    expected = [joins(x, y, tau) for x, y in zip(a, b, strict=True)]
    assert labeled_joins(a, b, tau) == expected
    relative = data.draw(st.sampled_from([0.0, 1e-9, 0.01, 0.5, 2.0]))
    quadratic = data.draw(st.sampled_from([0.0, 1e-12, 3.5e-6, 0.05, 1.0]))
    tau = max(tau, 0)
    expected = [joins(x, y, tau, relative, quadratic) for x, y in zip(a, b, strict=True)]
    assert labeled_joins(a, b, tau, relative, quadratic) == expected
    # the rule the seams of chunked volumes apply (chunked/seams.py), elementwise
    assert tau_joins(a, b, tau, np, relative, quadratic).tolist() == expected


def test_the_tolerance_is_rounded_in_the_contracts_order() -> None:
    for x, tau, relative, quadratic, expected in rounding_pairs():
        pair = np.array([0.0]), np.array([x])
        assert labeled_joins(*pair, tau, relative, quadratic) == [expected]


def test_a_threshold_sees_a_1_bit_pixel_as_0_or_255() -> None:
    """So that --threshold 127 --invert finds the ink of a G4 TIFF as of a JPEG scan,
    instead of every pixel (0 and 1 are both below 127)."""
    ink_on_paper = np.array([[False, True]])  # black ink, white paper
    cases = {
        (127, True): [True, False],
        (127, False): [False, True],
        (0, False): [False, True],
        (0, True): [False, False],
        (-1, False): [True, True],
        (254.5, False): [False, True],
        (255, False): [False, False],
        (255, True): [True, False],
        (255.5, True): [True, True],
    }
    for (threshold, invert), expected in cases.items():
        params = LabelParams(threshold=threshold, invert=invert)
        assert foreground_mask(ink_on_paper, params).tolist() == [expected], (threshold, invert)


@pytest.mark.parametrize(
    ("dtype", "threshold", "invert", "problem"),
    [
        (np.uint8, -1, False, "--threshold -1 is below every uint8 value"),
        (np.uint8, 256, True, "--threshold 256 with --invert is above every uint8 value"),
        (np.bool_, 300, True, "--threshold 300 with --invert is above a 1-bit image's 0 and 255"),
        (np.int16, -40000, False, "--threshold -40000 is below every int16 value"),
        (np.uint8, 0, False, None),  # 0 is not foreground: the test can tell
        (np.uint8, 255, True, None),
        (np.uint8, 300, False, None),  # no pixel foreground: said of each image, not refused
        (np.bool_, 127, True, None),
        (np.float32, -1e30, False, None),  # floats have no range to be outside of
    ],
)
def test_a_threshold_every_value_passes_is_refused_as_a_flood(dtype, threshold, invert, problem):
    params = LabelParams(threshold=threshold, invert=invert)
    said = foreground_problem(np.dtype(dtype), params)
    if problem is None:
        assert said is None
    else:
        assert said is not None and said.startswith(problem)
        assert said.endswith("every pixel would be foreground")
        python = foreground_problem(np.dtype(dtype), params, python=True)
        assert python is not None and "--" not in python and f"threshold={threshold}" in python


def test_an_image_on_one_side_of_the_threshold_is_named_with_what_that_means() -> None:
    white = np.full((2, 3), 250, np.uint8)
    assert threshold_side(white, LabelParams(threshold=127)) == (
        "every value is above --threshold 127: every pixel is foreground"
    )
    assert threshold_side(white, LabelParams(threshold=127, invert=True)) == (
        "no value is below --threshold 127 with --invert: no pixel is foreground"
    )
    blank_page = np.ones((2, 3), bool)
    assert threshold_side(blank_page, LabelParams(threshold=127, invert=True)).startswith(
        "no value is below --threshold 127 with --invert (1-bit: 0 and 255 to a threshold)"
    )
    mixed = np.array([[0, 200]], np.uint8)
    assert threshold_side(mixed, LabelParams(threshold=127)) == ""
    assert threshold_side(mixed, LabelParams()) == ""  # no threshold, nothing to say
    at_the_threshold = np.array([[127, 127]], np.uint16)  # v > 127 nowhere
    assert threshold_side(at_the_threshold, LabelParams(threshold=127)).startswith("no value")
    floats = np.array([[np.nan, 3.0]], np.float32)
    assert threshold_side(floats, LabelParams(threshold=1)).startswith("every value")
    assert threshold_side(np.full((1, 2), np.nan), LabelParams(threshold=1)) == ""
