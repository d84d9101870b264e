"""Morphology and smoothing of volumes before labeling (ccl_cli.contract.stages with the
numpy stages), against scipy.ndimage's binary_erosion/dilation and brute-force loops
written from the README (tests/stage_oracles.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import pixel_values
from hypothesis import given, settings
from hypothesis import strategies as st
from stage_oracles import brute_morph, oracle_fill, oracle_smooth, scipy_mask

import ccl_cli
from ccl_cli.backends.cpu.stages import NumpyStages
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams
from ccl_cli.contract.stages import label_input

VOLUME_CONNECTIVITIES = [6, 18, 26]
MORPHOLOGY_OPS = ["close", "dilate", "erode", "open"]


def staged_volume_mask(
    mask: np.ndarray, steps: list[tuple[str, int]], connectivity: int
) -> np.ndarray:
    """The final mask gccl labels in binary mode (label_input's uint8 volume)."""
    params = LabelParams(connectivity=connectivity, morphology=tuple(steps))
    image, plain, _ = label_input(mask.view(np.uint8), params, np, NumpyStages())
    assert image.dtype == np.uint8 and image.shape == mask.shape
    assert plain == LabelParams(connectivity=connectivity)
    return image.astype(bool)


def nasty_volumes() -> list[np.ndarray]:
    checker = (np.indices((5, 6, 7)).sum(axis=0) % 2).astype(bool)
    shell = np.ones((5, 5, 5), bool)
    shell[1:4, 1:4, 1:4] = False
    helix = np.zeros((12, 9, 9), bool)
    for z in range(12):
        angle = z * math.pi / 4
        helix[z, 4 + round(3 * math.sin(angle)), 4 + round(3 * math.cos(angle))] = True
    return [
        np.ones((1, 1, 1), bool),
        np.zeros((1, 1, 1), bool),
        np.ones((1, 7, 1), bool),
        np.ones((7, 1, 1), bool),
        np.array([[[True, False, True, True]]]),
        np.ones((3, 4, 5), bool),
        checker,
        ~checker,
        shell,
        helix,
        np.pad(np.ones((2, 2, 2), bool), 2),
    ]


@pytest.mark.parametrize("connectivity", VOLUME_CONNECTIVITIES)
@pytest.mark.parametrize("op", ["erode", "dilate"])
def test_one_step_matches_the_brute_force_element(connectivity: int, op: str) -> None:
    for mask in nasty_volumes():
        want = brute_morph(mask, op, connectivity)
        np.testing.assert_array_equal(staged_volume_mask(mask, [(op, 1)], connectivity), want)


@pytest.mark.parametrize("connectivity", VOLUME_CONNECTIVITIES)
@pytest.mark.parametrize("op", MORPHOLOGY_OPS)
@pytest.mark.parametrize("n", [1, 2, 3])
def test_volume_morphology_matches_scipy_on_nasty_volumes(
    connectivity: int, op: str, n: int
) -> None:
    for mask in nasty_volumes():
        want = scipy_mask(mask, [(op, n)], connectivity)
        np.testing.assert_array_equal(staged_volume_mask(mask, [(op, n)], connectivity), want)


def test_the_elements_written_out() -> None:
    # One voxel dilated: the 3-D cross (7 voxels), 18 (19) and the cube (27).
    dot = np.zeros((3, 3, 3), bool)
    dot[1, 1, 1] = True
    sizes = {c: int(staged_volume_mask(dot, [("dilate", 1)], c).sum()) for c in (6, 18, 26)}
    assert sizes == {6: 7, 18: 19, 26: 27}
    # Outside the volume never changes the result: a full volume stays full.
    full = np.ones((2, 3, 4), bool)
    for connectivity in VOLUME_CONNECTIVITIES:
        for op in ("erode", "open", "close"):
            assert staged_volume_mask(full, [(op, 2)], connectivity).all()


@settings(max_examples=60)
@given(
    st.tuples(st.integers(1, 7), st.integers(1, 7), st.integers(1, 7)),
    st.floats(0, 1),
    st.integers(0, 2**32 - 1),
    st.lists(st.tuples(st.sampled_from(MORPHOLOGY_OPS), st.integers(0, 2)), max_size=3),
    st.sampled_from(VOLUME_CONNECTIVITIES),
)
def test_volume_morphology_matches_scipy_on_random_volumes(
    shape: tuple[int, int, int],
    density: float,
    seed: int,
    steps: list[tuple[str, int]],
    connectivity: int,
) -> None:
    mask = np.random.default_rng(seed).random(shape) < density
    want = scipy_mask(mask, steps, connectivity)
    np.testing.assert_array_equal(staged_volume_mask(mask, steps, connectivity), want)
    closed = staged_volume_mask(mask, [("close", 1)], connectivity)
    opened = staged_volume_mask(mask, [("open", 1)], connectivity)
    assert not (mask & ~closed).any() and not (opened & ~mask).any()


def staged_volume_values(values: np.ndarray, params: LabelParams) -> list:
    """V' per voxel (None off the final mask) from label_input's tau-mode volume."""
    image, plain, _ = label_input(values, params, np, NumpyStages())
    assert image.dtype == np.float64 and plain.background is None and plain.tau == params.tau
    return [[[None if math.isnan(v) else v for v in row] for row in plane] for plane in image]


def without_nan(nested: list) -> list:
    """None where the oracle's value is NaN (a window of +inf and -inf: not foreground)."""
    if isinstance(nested, list):
        return [without_nan(item) for item in nested]
    return None if isinstance(nested, float) and math.isnan(nested) else nested


@pytest.mark.slow
@settings(max_examples=60)
@given(st.data())
def test_volume_smoothing_matches_the_oracle(data: st.DataObject) -> None:
    dtype = np.dtype(data.draw(st.sampled_from(SUPPORTED_DTYPES)))
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(3))
    values = pixel_values(data.draw, dtype, shape)
    if dtype.kind not in "bf":
        holes = np.random.default_rng(data.draw(st.integers(0, 99))).random(shape) < 0.2
        values[holes] = 0
    kind = data.draw(st.sampled_from(["box", "binomial"]))
    radius = data.draw(st.integers(1, 2))
    params = LabelParams(
        tau=1, connectivity=data.draw(st.sampled_from(VOLUME_CONNECTIVITIES)), smooth=(kind, radius)
    )
    numbers = values.view(np.uint8) if dtype.kind == "b" else values
    mask = (numbers != 0) & ~np.isnan(numbers.astype(np.float64))  # background 0, NaN never
    want = without_nan(oracle_smooth(numbers, mask, kind, radius))
    assert staged_volume_values(values, params) == want


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.float32])
@pytest.mark.parametrize("connectivity", VOLUME_CONNECTIVITIES)
def test_voxels_morphology_adds_take_the_mean_of_readings_near_them(dtype, connectivity) -> None:
    rng = np.random.default_rng(connectivity)
    values = rng.integers(-40, 40, (5, 6, 7)).astype(dtype)
    values[rng.random(values.shape) < 0.4] = 0  # nodata holes that a closing fills
    params = LabelParams(tau=3, connectivity=connectivity, morphology=(("close", 1),))
    image, _, read = label_input(values, params, np, NumpyStages())
    readings = values != 0
    final = scipy_mask(readings, [("close", 1)], connectivity)
    want = oracle_fill(values, readings, final, 1)
    np.testing.assert_array_equal(read, want)
    np.testing.assert_array_equal(np.isnan(image), ~final)
    np.testing.assert_array_equal(image[final], want[final].astype(np.float64))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_the_widest_binomial_of_volumes_is_exact_on_32_bit_extremes(dtype) -> None:
    info = np.iinfo(dtype)
    values = np.full((3, 4, 5), info.max, dtype)
    values[1, ::2, ::2] = info.min + 1 if info.min else 1  # the mask keeps every voxel but 0s
    params = LabelParams(tau=1, connectivity=26, smooth=("binomial", 4))
    mask = values != 0
    assert staged_volume_values(values, params) == oracle_smooth(values, mask, "binomial", 4)


def test_a_binomial_too_wide_for_volumes_is_refused_with_the_limits() -> None:
    volume = np.full((3, 4, 5), 2**32 - 1, np.uint32)
    with pytest.raises(ValueError, match=r"binomial:5 is too wide for volumes.*R <= 4.*box:R"):
        ccl_cli.label(volume, tau=1, connectivity=26, smooth="binomial:5")
    labels, tables = ccl_cli.label(volume, tau=1, connectivity=26, smooth="binomial:4")
    assert labels.max() == 1 and tables[0]["area"].tolist() == [60]
    images, _ = ccl_cli.label(volume, tau=1, connectivity=8, smooth="binomial:7")
    assert images.max() == 1  # images keep R up to 7
