"""CudaBackend vs CpuBackend, bit for bit, over modes x connectivity x dtypes x shapes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import pixel_values
from cuda_helpers import assert_same, gpu
from hypothesis import given
from hypothesis import strategies as st

from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams

pytestmark = gpu

SHAPES = [(1, 1), (1, 37), (41, 1), (2, 2), (33, 65), (64, 64), (97, 131), (130, 33)]
DTYPES = [np.dtype(d) for d in SUPPORTED_DTYPES]


def random_values(rng: np.random.Generator, dtype: np.dtype, shape: tuple, density: float):
    """Foreground (non-zero) with probability `density`, varied values incl. extremes."""
    fg = rng.random(shape) < density
    if dtype.kind == "b":
        return fg
    if dtype.kind == "f":
        values = rng.normal(scale=50.0, size=shape)
    else:
        info = np.iinfo(dtype)
        values = rng.integers(int(info.min), int(info.max), shape, endpoint=True)
        values[rng.random(shape) < 0.5] = rng.integers(1, 6)  # small values too
    values = np.where(fg, values, 0).astype(dtype)
    values[fg & (values == 0)] = 1
    return values


def spiral(size: int) -> np.ndarray:
    """One 1-pixel-wide square spiral path with 1-pixel gaps: a single giant component."""
    img = np.zeros((size, size), np.uint8)
    y, x, dy, dx = 0, 0, 0, 1
    img[0, 0] = 1
    while True:
        for _ in range(2):
            ny, nx, ay, ax = y + dy, x + dx, y + 2 * dy, x + 2 * dx
            ahead_free = not (0 <= ay < size and 0 <= ax < size and img[ay, ax])
            if 0 <= ny < size and 0 <= nx < size and not img[ny, nx] and ahead_free:
                y, x = ny, nx
                img[y, x] = 1
                break
            dy, dx = dx, -dy
        else:
            return img


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_binary_shapes_and_dtypes(connectivity, dtype, shape):
    rng = np.random.default_rng(hash((connectivity, dtype.str, shape)) % 2**32)
    batch = np.stack([random_values(rng, dtype, shape, d) for d in (0.3, 0.5, 0.8)])
    assert_same(batch, LabelParams(connectivity=connectivity))


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (1, 53), (47, 1), (71, 93), (200, 301)])
def test_tau_shapes_and_dtypes(connectivity, dtype, shape):
    rng = np.random.default_rng(7 + connectivity)
    if dtype.kind == "b":
        values = rng.random((2, *shape)) < 0.6
    elif dtype.kind == "f":
        values = (np.cumsum(rng.normal(size=(2, *shape)), axis=2) * 3).astype(dtype)
    else:
        info = np.iinfo(dtype)
        lo = max(int(info.min), -40)
        values = rng.integers(lo, min(int(info.max), 60), (2, *shape)).astype(dtype)
    tau = 0 if dtype.kind == "b" else 3
    assert_same(values, LabelParams(tau=tau, connectivity=connectivity))


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("density", [0.05, 0.25, 0.45, 0.5, 0.6, 0.75, 0.95])
def test_densities(connectivity, density):
    rng = np.random.default_rng(int(density * 100))
    batch = (rng.random((2, 517, 389)) < density).astype(np.uint8)
    assert_same(batch, LabelParams(connectivity=connectivity, min_area=2))


@pytest.mark.parametrize("tau", [None, 2])
@pytest.mark.parametrize("connectivity", [4, 8])
def test_batch_mixing_empty_full_random(connectivity, tau):
    rng = np.random.default_rng(3)
    shape = (123, 157)
    batch = np.stack(
        [
            np.zeros(shape, np.uint16),
            np.full(shape, 9, np.uint16),
            rng.integers(0, 8, shape).astype(np.uint16),
            np.zeros(shape, np.uint16),
            (rng.random(shape) < 0.5).astype(np.uint16) * 1000,
            np.full(shape, 65535, np.uint16),
        ]
    )
    assert_same(batch, LabelParams(connectivity=connectivity, tau=tau))


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("size", [257, 1025])
def test_giant_spiral(connectivity, size):
    img = spiral(size)
    batch = np.stack([img, img[::-1].copy(), img.T.copy()])
    assert_same(batch, LabelParams(connectivity=connectivity))
    assert_same(batch * 7, LabelParams(connectivity=connectivity, tau=0))


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.int32, np.float32])
def test_tau_ramps_and_plateaus(connectivity, dtype):
    h, w = 301, 411
    yy, xx = np.mgrid[0:h, 0:w]
    ramp = (xx + yy) % 200 + 1  # slow ramp: one chain per wrap
    plateaus = (xx // 37 + 5 * (yy // 29)) % 50 + 1  # flat regions, steps between
    steep = (xx * 3 + yy * 5) % 120 + 1
    batch = np.stack([ramp, plateaus, steep]).astype(dtype)
    for tau in (0, 1, 2, 4.5):
        params = LabelParams(tau=tau, connectivity=connectivity, min_area=3)
        assert_same(batch, params)


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("tau", [None, 0.0, 0.5, 2.0])
def test_float_nan_holes_and_infinities(connectivity, dtype, tau):
    rng = np.random.default_rng(11)
    values = rng.normal(scale=2.0, size=(3, 151, 203))
    values[0, 20:60, 30:90] = np.nan
    values[1][rng.random((151, 203)) < 0.1] = np.nan
    values[1][rng.random((151, 203)) < 0.05] = np.inf
    values[2][rng.random((151, 203)) < 0.05] = -np.inf
    values[2, 40:50, 40:50] = np.inf
    values[2, 50:60, 40:50] = -np.inf
    values[0, 100:140, 10:150] = 1e-310  # subnormals
    values[1, 5:9, 5:200] = 3e38
    params = LabelParams(connectivity=connectivity, tau=tau)
    assert_same(values.astype(dtype), params)


OPTIONS = [
    LabelParams(background=None),
    LabelParams(background=None, tau=1),
    LabelParams(invert=True),
    LabelParams(invert=True, tau=2, connectivity=4),
    LabelParams(threshold=10),
    LabelParams(threshold=10.5, invert=True, connectivity=4),
    LabelParams(threshold=-3, tau=4),
    LabelParams(background=5),
    LabelParams(background=2.5, min_area=4),
    LabelParams(min_area=1),
    LabelParams(min_area=7, connectivity=4),
    LabelParams(min_area=10**9),
    LabelParams(tau=3, min_area=20),
    LabelParams(max_area=30),
    LabelParams(min_area=2, max_area=50, largest=3),
    LabelParams(largest=1, connectivity=4),
    LabelParams(fill_holes=True),
    LabelParams(tau=2, fill_holes=True, min_area=3),
    LabelParams(fill_holes=True, largest=2, connectivity=4, invert=True),
]


@pytest.mark.parametrize("params", OPTIONS, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_options(params, dtype):
    rng = np.random.default_rng(5)
    shape = (3, 95, 177)
    if dtype.kind == "b":
        values = rng.random(shape) < 0.5
    elif dtype.kind == "f":
        values = np.round(rng.normal(scale=8, size=shape), 1).astype(dtype)
    else:
        info = np.iinfo(dtype)
        values = rng.integers(max(int(info.min), -20), 20, shape).astype(dtype)
        values[0, :3] = info.max  # inverted to 0: background under invert
        values[1, -3:] = info.min
    assert_same(values, params)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int16])
def test_extreme_values_need_64bit_sums(dtype):
    info = np.iinfo(dtype)
    values = np.full((2, 300, 500), info.max, dtype)
    values[1] = info.min
    values[1, ::7] = 0
    assert_same(values, LabelParams(background=None))
    assert_same(values, LabelParams(tau=0))


@given(
    dtype=st.sampled_from(DTYPES),
    shape=st.tuples(st.integers(1, 70), st.integers(1, 70)),
    n=st.integers(1, 3),
    connectivity=st.sampled_from([4, 8]),
    tau=st.sampled_from([None, 0, 1, 2.5]),
    background=st.sampled_from([0, None, 1]),
    invert=st.booleans(),
    min_area=st.integers(0, 4),
    max_area=st.sampled_from([None, 4, 40]),
    largest=st.sampled_from([None, 1, 3]),
    fill_holes=st.booleans(),
    data=st.data(),
)
def test_property_matches_cpu(
    dtype,
    shape,
    n,
    connectivity,
    tau,
    background,
    invert,
    min_area,
    max_area,
    largest,
    fill_holes,
    data,
):
    batch = pixel_values(data.draw, dtype, (n, *shape))
    params = LabelParams(
        background=background,
        invert=invert,
        tau=tau,
        connectivity=connectivity,
        min_area=min_area,
        max_area=max_area,
        largest=largest,
        fill_holes=fill_holes,
    )
    assert_same(batch, params)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_signed_zero_extremes(dtype):
    rng = np.random.default_rng(11)
    values = rng.choice(np.array([-0.0, 0.0, 1.0, -1.0], dtype), size=(3, 29, 31))
    assert_same(values, LabelParams(background=None, tau=1.0, connectivity=8))
    assert_same(values, LabelParams(background=None))


def test_bool_arrays_holding_255():
    rng = np.random.default_rng(12)
    odd = ((rng.random((2, 40, 50)) < 0.5).astype(np.uint8) * 255).view(np.bool_)
    assert_same(odd, LabelParams(tau=0, background=None))
    assert_same(odd, LabelParams(invert=True, connectivity=4))
