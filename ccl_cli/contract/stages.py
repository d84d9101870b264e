"""Before labeling: morphology on the foreground mask and nodata-aware smoothing.

The order is fixed (README, "Morphology and smoothing"): foreground mask ->
morphology steps (open, close, erode, dilate, as LabelParams.morphology lists
them) -> NaN pixels removed -> smoothing (tau mode only) -> labeling. Both
backends call `label_input`, which composes the stages with array-generic code
and hands the heavy steps to the backend's `StageOps` (numpy in backends/cpu/stages.py, CUDA
kernels in backends/cuda/stages.py), so the composition cannot drift apart.

The labeling kernels are not touched: `label_input` returns an image and
LabelParams whose plain labeling is the staged labeling (see its docstring).

In tau mode a pixel that morphology adds to the mask is not a reading (its
value is the background, nodata, or one the threshold dropped): it takes the
rounded mean of the original readings within D pixels, D the number of
dilation steps (`fill_added`), and both the labeling and the statistics read
that value, so a hole closed by `--close` never joins on, or reports, 0.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from .params import LabelParams

#: The order in which combined morphology options apply.
MORPHOLOGY_ORDER = ("open", "close", "erode", "dilate")
SMOOTH_KINDS = ("box", "binomial")
#: Most steps of one morphology option (--erode N etc.): every step is a pass over the
#: image, and 1000 already erode or dilate across a 2000-pixel image.
MAX_MORPHOLOGY_STEPS = 1000
#: Largest smoothing radius: binomial weights then sum to 4**14 = 2**28, so an
#: integer weighted sum (|v| < 2**32) stays below 2**60 and fits int64.
MAX_SMOOTH_RADIUS = 7
#: Largest binomial radius for volumes: their weights sum to 4**(3R), 2**24 at R = 4, so
#: 2S + W stays below 2**58 for 32-bit values; at R = 5 it would reach 2**63 and wrap.
MAX_VOLUME_BINOMIAL_RADIUS = 4


class StageOps(Protocol):
    """The heavy steps of one backend, on arrays whose last two axes are (H, W), or
    whose last three are (D, H, W) where `rank` (or the connectivity) says 3."""

    def morph(self, mask: Any, op: str, iterations: int, connectivity: int) -> Any:
        """`mask` (bool) eroded or dilated (`op`) `iterations` times; pixels
        outside the image count as foreground for erosion and background for dilation."""
        ...

    def smooth(self, values: Any, mask: Any, weights: tuple[int, ...], rank: int) -> Any:
        """float64 image: the normalized convolution of `values` over `mask` (see
        `smooth_numpy`) on the mask, NaN off it."""
        ...

    def foreground(self, values: Any, params: LabelParams) -> Any:
        """The bool foreground mask of `values` (params.foreground_mask)."""
        ...

    def clear_nan(self, mask: Any, values: Any) -> Any:
        """`mask` without the NaN pixels of the float `values` (in place)."""
        ...

    def masked_float64(self, numbers: Any, mask: Any) -> Any:
        """float64 image: `numbers` on `mask`, NaN off it."""
        ...

    def fill_added(self, values: Any, readings: Any, mask: Any, radius: int, rank: int) -> Any:
        """`values` with the pixels of `mask` that are not `readings` filled (fill_added)."""
        ...


def has_stages(params: LabelParams) -> bool:
    """Whether `params` asks for any stage before labeling."""
    return bool(params.morphology) or (params.smooth is not None and params.tau is not None)


def primitive_steps(morphology: tuple[tuple[str, int], ...]) -> list[tuple[str, int]]:
    """Morphology steps as erosions and dilations: open N = erode N, dilate N; close N =
    dilate N, erode N. Steps with N = 0 are dropped."""
    expand = {
        "open": ("erode", "dilate"),
        "close": ("dilate", "erode"),
        "erode": ("erode",),
        "dilate": ("dilate",),
    }
    return [(op, n) for name, n in morphology if n > 0 for op in expand[name]]


def smooth_weights(kind: str, radius: int) -> tuple[int, ...]:
    """The 1-D integer weights of offsets -R..R; the 2-D weight is w[i] * w[j], the
    3-D one w[k] * w[i] * w[j].

    box: all 1; binomial: C(2R, R + i).
    """
    if kind not in SMOOTH_KINDS or not 1 <= radius <= MAX_SMOOTH_RADIUS:
        raise ValueError(f"no smoothing {kind}:{radius}")
    if kind == "box":
        return (1,) * (2 * radius + 1)
    return tuple(math.comb(2 * radius, k) for k in range(2 * radius + 1))


def smooth_problem(smooth: tuple[str, int] | None, rank: int) -> str | None:
    """Why `smooth` cannot smooth data of `rank` (2 images, 3 volumes), or None."""
    if smooth is None or rank != 3:
        return None
    kind, radius = smooth
    if kind == "binomial" and radius > MAX_VOLUME_BINOMIAL_RADIUS:
        return (
            f"smooth binomial:{radius} is too wide for volumes (binomial:R with R <= "
            f"{MAX_VOLUME_BINOMIAL_RADIUS}, or box:R with R <= {MAX_SMOOTH_RADIUS})"
        )
    return None


def dilation_steps(morphology: tuple[tuple[str, int], ...]) -> int:
    """How many dilations the morphology makes: every pixel (voxel) it adds is at most
    this many pixels (Chebyshev distance) from an original foreground pixel."""
    return sum(n for op, n in primitive_steps(morphology) if op == "dilate")


def fill_added(values: Any, readings: Any, added: Any, radius: int, rank: int, xp: Any) -> Any:
    """`values` with each `added` pixel replaced by the mean of the `readings` pixels in
    its window of side 2 radius + 1 over the last `rank` axes, in the dtype of `values`.

    The mean is the box smoothing's (README, "Before labeling"): integers
    floor((2S + W) / (2W)) from exact sums, floats S / W from float64 sums in
    the fixed separable order, rounded to the input float type. Array-generic
    (numpy or CuPy), so both backends get the same bits. Every added pixel
    has a reading within `radius` (dilation_steps), so W > 0 there.
    """
    dtype = np.dtype(values.dtype)
    if dtype.kind == "f":
        masked = xp.where(readings, values.astype(xp.float64), 0.0)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            total = _box_sum(masked, radius, rank, xp)
            count = _box_sum(readings.astype(xp.float64), radius, rank, xp)
            mean = (total / count).astype(dtype)
    else:
        # Shifted to non-negative (v - dtype min), so the division truncates as floor does;
        # |v| < 2**32 and W <= (2 radius + 1)**3 keep 2S + W far below 2**63.
        low = 0 if dtype.kind in "bu" else int(np.iinfo(dtype).min)
        masked = xp.where(readings, values.astype(xp.int64) - low, 0)
        total = _box_sum(masked, radius, rank, xp)
        count = _box_sum(readings.astype(xp.int64), radius, rank, xp)
        mean = ((2 * total + count) // xp.maximum(2 * count, 1) + low).astype(dtype)
    return xp.where(added, mean, values)


def _box_sum(image: Any, radius: int, rank: int, xp: Any) -> Any:
    """The sum over the window of side 2 radius + 1 on the last `rank` axes, zero outside:
    along x first, then y, then z (each add rounded on its own for floats)."""
    for axis in range(image.ndim - 1, image.ndim - rank - 1, -1):
        length = image.shape[axis]
        pad = [(0, 0)] * image.ndim
        pad[axis] = (radius, radius)
        padded = xp.pad(image, pad)
        out = xp.zeros_like(image)
        index: list[Any] = [slice(None)] * image.ndim
        for k in range(2 * radius + 1):
            index[axis] = slice(k, k + length)
            out = out + padded[tuple(index)]
        image = out
    return image


def label_input(
    values: Any, params: LabelParams, xp: Any, ops: StageOps
) -> tuple[Any, LabelParams, Any]:
    """The image and parameters whose plain labeling is the staged labeling of `values`,
    and the values the statistics read.

    Without stages: (values, params, values) unchanged. Binary mode: the final mask M
    as uint8 with background 0. Tau mode: a float64 image equal to the
    (smoothed) values on M and NaN off M, with background None (so foreground
    is exactly M minus NaN results), no invert or threshold, the same tolerance.
    That labels like the rule on the original dtype: the tau rule takes integer
    differences in float64 too, where every value of a supported integer
    dtype and every difference of two of them (< 2**33) is exact, and for
    floats it widens to float64 first; equal values join in both forms, and
    invert never changes differences. The statistics read the original
    `values`, except in tau mode where morphology added pixels: there they
    read `values` with those pixels filled (fill_added; the module doc).
    `values` has bools stored 0/1.
    """
    if not has_stages(params):
        return values, params, values
    dtype = np.dtype(values.dtype)
    foreground = ops.foreground(values, params)
    mask = foreground
    for op, iterations in primitive_steps(params.morphology):
        mask = ops.morph(mask, op, iterations, params.connectivity)
    if dtype.kind == "f":
        mask = ops.clear_nan(mask, values)  # dilation never makes NaN foreground
    plain = LabelParams(
        connectivity=params.connectivity,
        min_area=params.min_area,
        max_area=params.max_area,
        largest=params.largest,
        fill_holes=params.fill_holes,
    )
    if params.tau is None:
        return xp.ascontiguousarray(mask.view(xp.uint8)), plain, values
    numbers = values.view(xp.uint8) if dtype.kind == "b" else values
    radius = dilation_steps(params.morphology)
    if radius:
        numbers = ops.fill_added(numbers, foreground, mask, radius, params.rank)
    if params.smooth is None:
        image = ops.masked_float64(numbers, mask)
    else:
        image = ops.smooth(numbers, mask, smooth_weights(*params.smooth), params.rank)
    read = numbers.view(xp.bool_) if dtype.kind == "b" else numbers
    tolerance = replace(
        plain,
        background=None,
        tau=params.tau,
        tau_relative=params.tau_relative,
        tau_quadratic=params.tau_quadratic,
    )
    return xp.ascontiguousarray(image), tolerance, read
