"""Before labeling: morphology on the foreground mask and nodata-aware smoothing.

The order is fixed (README, "Morphology and smoothing"): foreground mask ->
morphology steps (open, close, erode, dilate, as LabelParams.morphology lists
them) -> NaN pixels removed -> smoothing (tau mode only) -> labeling. Both
backends call `label_input`, which composes the stages with array-generic code
and hands the heavy steps to the backend's `StageOps` (numpy in backends/cpu/stages.py, CUDA
kernels in backends/cuda/stages.py), so the composition cannot drift apart.

The labeling kernels are not touched: `label_input` returns an image and
LabelParams whose plain labeling is the staged labeling (see its docstring).
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
#: Largest smoothing radius: binomial weights then sum to 4**14 = 2**28, so an
#: integer weighted sum (|v| < 2**32) stays below 2**60 and fits int64.
MAX_SMOOTH_RADIUS = 7


class StageOps(Protocol):
    """The heavy steps of one backend, on arrays whose last two axes are (H, W)."""

    def morph(self, mask: Any, op: str, iterations: int, connectivity: int) -> Any:
        """`mask` (bool) eroded or dilated (`op`) `iterations` times; border is background."""
        ...

    def smooth(self, values: Any, mask: Any, weights: tuple[int, ...]) -> Any:
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
    """The 1-D integer weights of offsets -R..R; the 2-D weight is w[i] * w[j].

    box: all 1; binomial: C(2R, R + i).
    """
    if kind not in SMOOTH_KINDS or not 1 <= radius <= MAX_SMOOTH_RADIUS:
        raise ValueError(f"no smoothing {kind}:{radius}")
    if kind == "box":
        return (1,) * (2 * radius + 1)
    return tuple(math.comb(2 * radius, k) for k in range(2 * radius + 1))


def label_input(
    values: Any, params: LabelParams, xp: Any, ops: StageOps
) -> tuple[Any, LabelParams]:
    """The image and parameters whose plain labeling is the staged labeling of `values`.

    Without stages: (values, params) unchanged. Binary mode: the final mask M
    as uint8 with background 0. Tau mode: a float64 image equal to the
    (smoothed) values on M and NaN off M, with background None (so foreground
    is exactly M minus NaN results), no invert or threshold, the same tau.
    That labels like the rule on the original dtype: tau_joins takes integer
    differences in float64 too, where every value of a supported integer
    dtype and every difference of two of them (< 2**33) is exact, and for
    floats it widens to float64 first; equal values join in both forms, and
    invert never changes differences. Statistics must still be taken on the
    original `values` (the caller does that). `values` has bools stored 0/1.
    """
    if not has_stages(params):
        return values, params
    dtype = np.dtype(values.dtype)
    mask = ops.foreground(values, params)
    for op, iterations in primitive_steps(params.morphology):
        mask = ops.morph(mask, op, iterations, params.connectivity)
    if dtype.kind == "f":
        mask = ops.clear_nan(mask, values)  # dilation never makes NaN foreground
    plain = LabelParams(connectivity=params.connectivity, min_area=params.min_area)
    if params.tau is None:
        return xp.ascontiguousarray(mask.view(xp.uint8)), plain
    numbers = values.view(xp.uint8) if dtype.kind == "b" else values
    if params.smooth is None:
        image = ops.masked_float64(numbers, mask)
    else:
        image = ops.smooth(numbers, mask, smooth_weights(*params.smooth))
    return xp.ascontiguousarray(image), replace(plain, background=None, tau=params.tau)
