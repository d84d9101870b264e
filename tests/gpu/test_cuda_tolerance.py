"""A tolerance that grows with the values (tau + relative * m + quadratic * m^2): the CUDA
backend against the CPU backend bit for bit, and both against the contract's rounding."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import pixel_values
from cuda_helpers import assert_same, backends, gpu, to_host
from hypothesis import given
from hypothesis import strategies as st
from shapes import rounding_pairs

from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams

pytestmark = gpu

#: (relative, quadratic): each term alone and both.
GROWING = [(0.01, 0.0), (0.0, 3.5e-6), (0.002, 1e-5), (0.5, 0.0), (0.0, 0.05)]
#: The width of a pixel kernel's tile (geometry.cuh's GCCL_PX_TILE_W): pairs placed across
#: it are joined by the border kernel, pairs inside it by the local one.
TILE_W = 32


def depth_like(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Surfaces at 500..8000 quantized as a depth camera does (a step that grows with the
    square of the range), with holes of 0."""
    height, width = shape
    yy, xx = np.mgrid[0:height, 0:width]
    z = 500 + 7500 * (0.5 + 0.5 * np.sin(xx / 37.0) * np.cos(yy / 23.0))
    step = np.maximum(1, np.round(2.85e-6 * z * z))
    depth = np.round(z / step) * step
    depth[rng.random(shape) < 0.03] = 0
    return depth.astype(np.uint16)


@pytest.mark.parametrize(("relative", "quadratic"), GROWING)
@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("shape", [(1, 1), (1, 53), (47, 1), (71, 93), (200, 301)])
def test_depth_like_surfaces(shape, connectivity, relative, quadratic):
    rng = np.random.default_rng(3)
    batch = np.stack([depth_like(rng, shape) for _ in range(2)])
    for tau in (0, 5):
        params = LabelParams(
            tau=tau,
            tau_relative=relative,
            tau_quadratic=quadratic,
            connectivity=connectivity,
            min_area=2,
        )
        assert_same(batch, params)
        assert_same(batch.astype(np.float32), params)


@pytest.mark.parametrize(("relative", "quadratic"), GROWING)
@pytest.mark.parametrize("dtype", [np.dtype(d) for d in SUPPORTED_DTYPES], ids=str)
def test_every_dtype(dtype, relative, quadratic):
    rng = np.random.default_rng(9)
    shape = (3, 95, 177)
    if dtype.kind == "b":
        values = rng.random(shape) < 0.6
    elif dtype.kind == "f":
        values = (np.cumsum(rng.normal(size=shape), axis=2) * 30).astype(dtype)
    else:
        info = np.iinfo(dtype)
        values = rng.integers(int(info.min), int(info.max), shape, endpoint=True).astype(dtype)
        values[0] = np.cumsum(rng.integers(0, 4, shape[1:]), axis=1).astype(dtype)
    for connectivity in (4, 8):
        params = LabelParams(
            tau=1, tau_relative=relative, tau_quadratic=quadratic, connectivity=connectivity
        )
        assert_same(values, params)


@pytest.mark.parametrize(("relative", "quadratic"), GROWING)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_holes_infinities_and_huge_values(dtype, relative, quadratic):
    rng = np.random.default_rng(11)
    values = rng.normal(scale=2.0, size=(3, 151, 203))
    values[0, 20:60, 30:90] = np.nan
    values[1][rng.random((151, 203)) < 0.1] = np.nan
    values[1][rng.random((151, 203)) < 0.05] = np.inf
    values[2][rng.random((151, 203)) < 0.05] = -np.inf
    values[2, 40:50, 40:50] = np.inf
    values[0, 100:140, 10:150] = 1e-310
    values[1, 5:9, 5:200] = 3e38  # m * m overflows to infinity
    params = LabelParams(tau=0.5, tau_relative=relative, tau_quadratic=quadratic)
    assert_same(values.astype(dtype), params)


@pytest.mark.parametrize("across_tiles", [False, True])
@pytest.mark.parametrize(
    ("dtype", "integers"),
    [(np.float64, False), (np.float64, True), (np.uint32, True), (np.int32, True)],
)
def test_the_tolerance_is_rounded_as_the_contract_orders_it(dtype, integers, across_tiles):
    """Pairs (0, x) whose join depends on the order of the products and sums (and on no
    fused multiply-add): the CUDA kernels decide each as the contract does."""
    cuda, _ = backends()
    left = TILE_W - 1 if across_tiles else 3
    for x, tau, relative, quadratic, expected in rounding_pairs(integers=integers):
        image = np.zeros((1, 2, 2 * TILE_W), dtype)
        image[0, 0, left], image[0, 0, left + 1] = 0, x
        params = LabelParams(
            tau=tau, tau_relative=relative, tau_quadratic=quadratic, background=None
        )
        labels = to_host(cuda.label(image, params).labels)
        assert (labels[0, 0, left] == labels[0, 0, left + 1]) == expected, (x, quadratic)
        assert_same(image, params)


@given(
    dtype=st.sampled_from([np.dtype(d) for d in SUPPORTED_DTYPES]),
    shape=st.tuples(st.integers(1, 70), st.integers(1, 70)),
    connectivity=st.sampled_from([4, 8]),
    tau=st.sampled_from([0, 1, 2.5]),
    growing=st.sampled_from(GROWING),
    min_area=st.integers(0, 4),
    data=st.data(),
)
def test_property_matches_cpu(dtype, shape, connectivity, tau, growing, min_area, data):
    batch = pixel_values(data.draw, dtype, (2, *shape))
    relative, quadratic = growing
    params = LabelParams(
        tau=tau,
        tau_relative=relative,
        tau_quadratic=quadratic,
        connectivity=connectivity,
        min_area=min_area,
        background=data.draw(st.sampled_from([0, None])),
    )
    assert_same(batch, params)


def test_with_morphology_and_smoothing():
    """The staged path (a float64 image, NaN off the mask) with a growing tolerance."""
    rng = np.random.default_rng(5)
    batch = np.stack([depth_like(rng, (120, 170)) for _ in range(2)])
    for smooth in (None, ("binomial", 2)):
        params = LabelParams(
            tau=5,
            tau_quadratic=3.5e-6,
            morphology=(("close", 1),),
            smooth=smooth,
            min_area=10,
        )
        assert_same(batch, params)
