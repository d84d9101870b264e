"""Morphology and smoothing on the GPU vs the CPU, bit for bit: the kernels alone
(backends/cuda/stages.py vs backends/cpu/stages.py) and whole labelings (CudaBackend vs
CpuBackend)."""

from __future__ import annotations

import zlib
from fractions import Fraction

import numpy as np
import pytest
from conftest import pixel_values
from cuda_helpers import assert_same, backends, gpu, to_host
from hypothesis import given, settings
from hypothesis import strategies as st
from stage_oracles import opencv_mask

from ccl_cli.backends.cpu.stages import morph_numpy, smooth_numpy
from ccl_cli.backends.cuda import arrays as cuda_arrays
from ccl_cli.backends.cuda.stages import morph_launch, smooth_launch
from ccl_cli.contract.params import SUPPORTED_DTYPES, LabelParams, foreground_mask
from ccl_cli.contract.stages import fill_added, smooth_weights

pytestmark = gpu

DTYPES = [np.dtype(d) for d in SUPPORTED_DTYPES]
# Around the strips of morphology.cu (512 x 16 per warp, 16 columns per lane) and
# smooth.cu (128 x 16 per warp, 4 columns per lane; 32 x 32 tiles for R > 3), with
# widths that allow each access width: % 16 == 0, % 4 == 0 only, neither.
SHAPES = [
    (1, 1),
    (1, 130),
    (67, 1),
    (15, 127),
    (16, 128),
    (17, 129),
    (33, 31),
    (95, 257),
    (9, 36),
    (5, 516),
    (40, 1040),
    (3, 1030),
]
# And around the strips of morphology.cu's multi-step kernels (480 columns written
# per warp, up to 8 steps of halo): one and two strips wide, every access width.
MORPH_SHAPES = [*SHAPES, (6, 481), (20, 960), (18, 964), (9, 1441)]
# One launch does up to 8 iterations: 9 and 17 take several, ending with one step.
ITERATIONS = (1, 2, 3, 5, 8, 9, 17)


def stages():
    from ccl_cli.backends.cuda.stages import CudaStages

    return CudaStages()


def batch_of(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, int], n: int = 3):
    """n images of values with nodata (0 / NaN) holes, extremes and runs of close values."""
    images = []
    for _ in range(n):
        seed = int(rng.integers(0, 2**32))
        images.append(_values(np.random.default_rng(seed), dtype, shape))
    return np.stack(images)


def _values(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, int]) -> np.ndarray:
    if dtype.kind == "b":
        return rng.random(shape) < 0.6
    if dtype.kind == "f":
        values = rng.integers(-20, 20, shape) * 0.75
        odd = rng.random(shape) < 0.1
        values[odd] = rng.choice([np.nan, np.inf, -np.inf, 1e30, 0.0], int(odd.sum()))
        return values.astype(dtype)
    info = np.iinfo(dtype)
    base = int(rng.choice([int(info.min), 0, int(info.max) - 40]))
    values = base + rng.integers(0, 41, shape)
    values[rng.random(shape) < 0.05] = int(info.min)
    values[rng.random(shape) < 0.05] = int(info.max)
    values[rng.random(shape) < 0.2] = 0  # nodata holes
    return values.astype(dtype)


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("op", ["erode", "dilate"])
@pytest.mark.parametrize("shape", MORPH_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_morphology_kernel_matches_numpy(connectivity, op, shape):
    import cupy

    rng = np.random.default_rng(zlib.crc32(repr((connectivity, op, shape)).encode()))
    # Sparse and dense masks keep shapes through many dilations and erosions.
    for density in (0.0, 0.002, 0.5, 0.9, 0.995, 1.0):
        mask = rng.random((3, *shape)) < density
        for iterations in ITERATIONS:
            got = stages().morph(cupy.asarray(mask), op, iterations, connectivity).get()
            want = np.stack([morph_numpy(m, op, iterations, connectivity) for m in mask])
            np.testing.assert_array_equal(got, want)
            # A view that starts at an odd byte offset of its buffer.
            view = stages().morph(cupy.asarray(mask)[1:], op, iterations, connectivity).get()
            np.testing.assert_array_equal(view, want[1:])


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("op", ["erode", "dilate", "close", "open"])
@pytest.mark.parametrize("shape", MORPH_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_morphology_border_is_opencvs(connectivity, op, shape):
    # Masks touching every side of the image: the outside never changes the result,
    # as with OpenCV's default border, through the one-step and multi-step kernels.
    import cupy

    rng = np.random.default_rng(zlib.crc32(repr((connectivity, op, shape)).encode()))
    cuda, _ = backends()
    for n in (1, 3, 9):
        for mask in (np.ones(shape, bool), rng.random(shape) < 0.97):
            steps = [(op, n)]
            want = opencv_mask(mask, steps, connectivity)
            if op in ("erode", "dilate"):
                got = stages().morph(cupy.asarray(mask[None]), op, n, connectivity).get()[0]
                np.testing.assert_array_equal(got, want)
            params = LabelParams(connectivity=connectivity, morphology=tuple(steps))
            labels = cuda.label(mask[None], params).labels
            np.testing.assert_array_equal(to_host(labels)[0] > 0, want)
            assert_same(mask[None], params)


def test_morphology_shapes_cover_every_kernel():
    import cupy

    names = set()
    for shape in MORPH_SHAPES:
        batch = cupy.zeros((3, *shape), cupy.uint8)
        for source in (batch, batch[1:]):
            for steps in (1, 2):
                names.add(morph_launch(source, cupy.empty_like(source), "erode", 8, steps)[0])
    widths = ("b16", "b4", "b1")
    assert names == {f"gccl_erode_8{kind}_{width}" for kind in ("", "_n") for width in widths}


@pytest.mark.parametrize("steps", [0, 9])
def test_one_morphology_launch_does_one_to_eight_steps(steps):
    import cupy

    source = cupy.zeros((1, 4, 4), cupy.uint8)
    with pytest.raises(ValueError, match="1 to 8"):
        morph_launch(source, cupy.empty_like(source), "dilate", 4, steps)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("radius", [1, 3])
def test_smoothing_kernel_on_unaligned_views(dtype, radius):
    """Values and mask one element past an aligned address: the strip kernels' scalar path."""
    import cupy

    rng = np.random.default_rng(zlib.crc32(repr((dtype.str, radius)).encode()))
    values = batch_of(rng, dtype, (21, 132))
    numbers = values.view(np.uint8) if dtype.kind == "b" else values
    mask = (numbers != 0) & ~np.isnan(numbers.astype(np.float64))
    weights = smooth_weights("binomial", radius)
    flat_values = cupy.zeros(numbers.size + 1, numbers.dtype)
    flat_values[1:] = cupy.asarray(numbers.ravel())
    flat_mask = cupy.zeros(mask.size + 1, cupy.bool_)
    flat_mask[1:] = cupy.asarray(mask.ravel())
    gpu_values = flat_values[1:].reshape(numbers.shape)
    gpu_mask = flat_mask[1:].reshape(mask.shape)
    out = cupy.empty(numbers.shape, cupy.float64)
    launch = smooth_launch(gpu_values, gpu_mask.view(cupy.uint8), out, weights)
    assert launch[3][-1] == 0  # no vector loads
    aligned = smooth_launch(
        cupy.asarray(numbers), cupy.asarray(mask).view(cupy.uint8), out, weights
    )
    assert aligned[3][-1] == 1
    got = stages().smooth(gpu_values, gpu_mask, weights).get()
    want = smooth_numpy(numbers, mask, weights)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint64), want[~nan].view(np.uint64))


@pytest.mark.parametrize("rows", [1, 5, 8, 16, 32, 64])
@pytest.mark.parametrize("dtype", [np.dtype(np.uint16), np.dtype(np.float32)], ids=str)
def test_smoothing_strips_of_any_height(dtype, rows):
    """The strip kernels' rows per warp (a launch argument) do not change the result."""
    import cupy

    from ccl_cli.backends.cuda import loader

    rng = np.random.default_rng(zlib.crc32(repr((dtype.str, rows)).encode()))
    for shape, radius in [((70, 244), 3), ((9, 36), 1), ((33, 131), 2)]:
        values = batch_of(rng, dtype, shape)
        mask = (values != 0) & ~np.isnan(values.astype(np.float64))
        weights = smooth_weights("binomial", radius)
        out = cupy.empty(values.shape, cupy.float64)
        launch = smooth_launch(
            cupy.asarray(values), cupy.asarray(mask).view(cupy.uint8), out, weights, rows
        )
        loader.device_kernels(0).launch(*launch)
        want = smooth_numpy(values, mask, weights)
        got = out.get()
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.uint64), want[~nan].view(np.uint64))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["box", "binomial"])
@pytest.mark.parametrize("radius", [1, 2, 3, 7])
def test_smoothing_kernel_matches_numpy(dtype, kind, radius):
    import cupy

    rng = np.random.default_rng(zlib.crc32(repr((dtype.str, kind, radius)).encode()))
    for shape in SHAPES:
        values = batch_of(rng, dtype, shape)
        numbers = values.view(np.uint8) if dtype.kind == "b" else values
        mask = (numbers != 0) & ~np.isnan(numbers.astype(np.float64))
        weights = smooth_weights(kind, radius)
        got = stages().smooth(cupy.asarray(numbers), cupy.asarray(mask), weights).get()
        want = smooth_numpy(numbers, mask, weights)
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.uint64), want[~nan].view(np.uint64))


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)], ids=str)
@pytest.mark.parametrize("kind", ["box", "binomial"])
@pytest.mark.parametrize("radius", [1, 2, 3, 7])
def test_smoothing_kernel_rounds_like_numpy(dtype, kind, radius):
    """Full mantissas over many magnitudes (every float64 sum rounds), subnormals, -0.0
    and infinities in a mask drawn apart from the values: the kernels' arithmetic (FMA
    where it is exact) gives numpy's bits."""
    import cupy

    rng = np.random.default_rng(zlib.crc32(repr((dtype.str, kind, radius)).encode()))
    weights = smooth_weights(kind, radius)
    for shape in [(3, 45, 257), (2, 37, 256)]:  # the strip kernels' scalar and vector paths
        values = rng.standard_normal(shape) * 10.0 ** rng.integers(-6, 7, shape)
        special = rng.choice([-0.0, 1e-42, -np.inf, np.inf], shape)
        values = np.where(rng.random(shape) < 0.006, special, values).astype(dtype)
        mask = rng.random(shape) < 0.85
        got = stages().smooth(cupy.asarray(values), cupy.asarray(mask), weights).get()
        want = smooth_numpy(values, mask, weights)
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.uint64), want[~nan].view(np.uint64))


def _near_midpoints(rng: np.random.Generator, count: int, width: int) -> list[float]:
    """`count` doubles s with s / width as close to a midpoint between doubles as a
    double s can be: s = RN(m * width) for random midpoints m of every magnitude."""
    sums = []
    for _ in range(count):
        q = float(rng.uniform(1, 2) * 2.0 ** int(rng.integers(-140, 120)))
        midpoint = Fraction(q) + Fraction(np.spacing(q)) / 2
        sums.append(float(midpoint * width) * float(rng.choice([-1, 1])))
    return sums


def test_float32_smoothing_division_is_correctly_rounded():
    """smooth.cu's division of float32 sums (quotient_of_float_sums) against its proof:
    the refined reciprocal is within 2^-45 of 1 / W for every W up to 2^16 (the strip
    kernels meet W <= 4096), and the quotient is numpy's correctly rounded s / W for
    sums of every magnitude, next to midpoints, zero, infinite and NaN (not -0.0, which
    no sum is: smooth.cu's vertical_term)."""
    rng = np.random.default_rng(45)
    widths = np.arange(1, 2**16 + 1)
    sums = np.zeros(len(widths))
    reciprocals = _division_kernel(sums, widths)[0]
    for width, reciprocal in zip(widths.tolist(), reciprocals.tolist(), strict=True):
        numerator, denominator = reciprocal.as_integer_ratio()
        assert abs(numerator * width - denominator) * 2**45 <= denominator, width

    cases_sums, cases_widths = [], []
    for width in range(1, 4097):
        drawn = rng.standard_normal(12) * 2.0 ** rng.integers(-149, 141, 12)
        floats = rng.standard_normal(6) * 2.0 ** rng.integers(-126, 127, 6)
        tiny = rng.integers(-(2**20), 2**20, 4) * 2.0**-149
        special = [0.0, 2.0**-149, -(2.0**140), np.inf, -np.inf, np.nan, float(width) * 3]
        batch = [*drawn, *floats.astype(np.float32).astype(np.float64), *tiny, *special]
        batch += _near_midpoints(rng, 6, width)
        cases_sums += batch
        cases_widths += [width] * len(batch)
    sums, widths = np.array(cases_sums), np.array(cases_widths)
    got = _division_kernel(sums, widths)[1]
    want = sums / widths
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint64), want[~nan].view(np.uint64))


#: A kernel of this test's own around smooth.cu's device functions, compiled with NVRTC.
_DIVISION_SOURCE = r"""
#include "smooth.cu"
extern "C" __global__ void division_under_test(const double* sums, const int* counts,
                                               double* reciprocals, double* quotients, u32 n) {
  const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    reciprocals[i] = refined_reciprocal(counts[i]);
    quotients[i] = quotient_of_float_sums(sums[i], counts[i]);
  }
}
"""


def _division_kernel(sums: np.ndarray, widths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """smooth.cu's (refined_reciprocal(W), quotient_of_float_sums(s, W)) per pair."""
    import cupy

    from ccl_cli.backends.cuda.loader import CUDA_DIR

    module = cupy.RawModule(code=_DIVISION_SOURCE, options=("-std=c++17", f"-I{CUDA_DIR}"))
    kernel = module.get_function("division_under_test")
    n = len(sums)
    reciprocals, quotients = cupy.empty(n, cupy.float64), cupy.empty(n, cupy.float64)
    args = (cupy.asarray(sums), cupy.asarray(widths, cupy.int32), reciprocals, quotients)
    kernel((-(-n // 256),), (256,), (*args, np.uint32(n)))
    return reciprocals.get(), quotients.get()


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "stage",
    [
        {"morphology": (("erode", 1),)},
        {"morphology": (("dilate", 2),)},
        {"morphology": (("open", 1), ("close", 2))},
        {"morphology": (("close", 1), ("erode", 1), ("dilate", 3)), "min_area": 3},
    ],
    ids=["erode1", "dilate2", "open1-close2", "close-erode-dilate-minarea"],
)
@pytest.mark.parametrize("tau", [None, 2])
def test_morphology_labels_match_cpu(connectivity, dtype, stage, tau):
    rng = np.random.default_rng(
        zlib.crc32(repr((connectivity, dtype.str, str(stage), tau)).encode())
    )
    for shape in [(1, 1), (17, 129), (95, 257)]:
        batch = batch_of(rng, dtype, shape)
        assert_same(batch, LabelParams(connectivity=connectivity, tau=tau, **stage))


@pytest.mark.parametrize("connectivity", [4, 8])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("smooth", [("box", 1), ("box", 3), ("binomial", 2), ("binomial", 7)])
def test_smoothing_labels_match_cpu(connectivity, dtype, smooth):
    rng = np.random.default_rng(zlib.crc32(repr((connectivity, dtype.str, smooth)).encode()))
    for shape in [(1, 130), (33, 31), (95, 257)]:
        batch = batch_of(rng, dtype, shape)
        for tau, morphology in [(0, ()), (3, (("open", 1),))]:
            params = LabelParams(
                connectivity=connectivity, tau=tau, smooth=smooth, morphology=morphology
            )
            assert_same(batch, params)


@settings(max_examples=60)
@given(st.data())
def test_random_staged_batches_match_cpu(data):
    dtype = data.draw(st.sampled_from(DTYPES))
    shape = (data.draw(st.integers(1, 40)), data.draw(st.integers(1, 140)))
    batch = np.stack([pixel_values(data.draw, dtype, shape) for _ in range(2)])
    tau = data.draw(st.sampled_from([None, 0, 1.5]))
    params = LabelParams(
        background=data.draw(st.sampled_from([0, None])),
        invert=data.draw(st.booleans()),
        tau=tau,
        connectivity=data.draw(st.sampled_from([4, 8])),
        morphology=tuple(
            data.draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(["open", "close", "erode", "dilate"]), st.integers(0, 10)
                    ),
                    max_size=3,
                )
            )
        ),
        smooth=None
        if tau is None
        else data.draw(st.sampled_from([None, ("box", 2), ("binomial", 3)])),
    )
    assert_same(batch, params)


def _bits(array: np.ndarray) -> np.ndarray:
    """The array's bytes as unsigned integers: NaN payloads and the sign of 0 compared too."""
    return array.view(f"u{array.dtype.itemsize}") if array.dtype.kind == "f" else array


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("radius", [1, 2, 5])
def test_tau_fill_of_added_pixels_matches_numpy(dtype, radius):
    import cupy

    rng = np.random.default_rng(zlib.crc32(repr(("fill", dtype.str, radius)).encode()))
    for shape in [(1, 1), (1, 130), (17, 129), (40, 1040)]:
        batch = batch_of(rng, dtype, shape)
        values = batch.view(np.uint8) if dtype.kind == "b" else batch
        readings = foreground_mask(batch, LabelParams())
        mask = morph_numpy(readings, "dilate", radius, 8)
        want = fill_added(values, readings, mask & ~readings, radius, 2, np)
        device = [cupy.asarray(np.ascontiguousarray(a)) for a in (values, readings, mask)]
        got = cuda_arrays.fill_added(*device, radius).get()  # the kernel the stages run
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(_bits(got), _bits(want))


def _depth_frames(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, int]) -> np.ndarray:
    """Frames of a few flat, noisy surfaces with holes (0 = no reading), as depth cameras give."""
    frames = []
    for _ in range(3):
        columns = np.sort(rng.integers(0, shape[1], 3))
        depth = 500 + 400 * np.searchsorted(columns, np.arange(shape[1]))[None, :]
        depth = depth + rng.integers(0, 6, shape)
        depth = np.where(rng.random(shape) < 0.15, 0, depth)
        frames.append(depth / 1000 if dtype.kind == "f" else depth)
    return np.stack(frames).astype(dtype)


@pytest.mark.parametrize("dtype", [np.dtype(np.uint16), np.dtype(np.float32)], ids=str)
@pytest.mark.parametrize("close", [1, 2, 3])
@pytest.mark.parametrize("smooth", [None, ("binomial", 2)])
def test_depth_closing_in_tau_mode_matches_cpu(dtype, close, smooth):
    rng = np.random.default_rng(zlib.crc32(repr(("depth", dtype.str, close, smooth)).encode()))
    tau = 0.02 if dtype.kind == "f" else 20
    for shape in [(48, 64), (95, 257), (240, 320)]:
        batch = _depth_frames(rng, dtype, shape)
        params = LabelParams(tau=tau, morphology=(("close", close),), smooth=smooth, min_area=10)
        assert_same(batch, params)
        _, cpu = backends()
        assert all(len(t) == 0 or t.min.min() > 0 for t in cpu.label(batch, params).tables)
