"""The CPU's StageOps: morphology and nodata-aware smoothing with numpy (contract/stages.py
composes the stages)."""

from __future__ import annotations

import numpy as np

from ...contract.params import LabelParams, foreground_mask
from ...contract.stages import fill_added


class NumpyStages:
    """The CPU's StageOps: numpy (morphology on shifted slices)."""

    def morph(self, mask: np.ndarray, op: str, iterations: int, connectivity: int) -> np.ndarray:
        return morph_numpy(mask, op, iterations, connectivity)

    def smooth(self, values: np.ndarray, mask: np.ndarray, weights: tuple[int, ...]) -> np.ndarray:
        return smooth_numpy(values, mask, weights)

    def foreground(self, values: np.ndarray, params: LabelParams) -> np.ndarray:
        return foreground_mask(values, params)

    def clear_nan(self, mask: np.ndarray, values: np.ndarray) -> np.ndarray:
        mask &= ~np.isnan(values)
        return mask

    def masked_float64(self, numbers: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.where(mask, numbers.astype(np.float64), np.nan)

    def fill_added(
        self, values: np.ndarray, readings: np.ndarray, mask: np.ndarray, radius: int
    ) -> np.ndarray:
        return fill_added(values, readings, mask & ~readings, radius, np)


def morph_numpy(mask: np.ndarray, op: str, iterations: int, connectivity: int) -> np.ndarray:
    """Binary erosion or dilation over the last two axes with the 3x3 cross (4) or
    square (8). Pixels outside the image never change the result (OpenCV's default
    border): they count as foreground for erosion and background for dilation."""
    erode = op == "erode"
    combine = np.logical_and if erode else np.logical_or
    pad = [(0, 0)] * (mask.ndim - 2) + [(1, 1), (1, 1)]
    for _ in range(iterations):
        p = np.pad(mask, pad, constant_values=erode)
        if connectivity == 8:  # the square is separable: rows of 3, then columns of 3
            rows = combine(combine(p[..., :-2], p[..., 1:-1]), p[..., 2:])
            mask = combine(combine(rows[..., :-2, :], rows[..., 1:-1, :]), rows[..., 2:, :])
        else:
            centre = combine(p[..., 1:-1, 1:-1], p[..., :-2, 1:-1])
            centre = combine(combine(centre, p[..., 2:, 1:-1]), p[..., 1:-1, :-2])
            mask = combine(centre, p[..., 1:-1, 2:])
    return mask


def smooth_numpy(values: np.ndarray, mask: np.ndarray, weights: tuple[int, ...]) -> np.ndarray:
    """Normalized convolution over `mask`, as float64 with NaN off the mask.

    For p in the mask, S = sum w(q) v(q) and W = sum w(q) over the window
    pixels q that are in the mask (w = weights[i] * weights[j]).
    Integers: exact int64 sums, V' = floor((2S + W) / (2W)) (halves round up,
    toward +infinity). Floats: float64, a horizontal pass (j = -R..R) then a
    vertical one (i = -R..R), each term a rounded multiply then a rounded add
    onto an accumulator that starts at +0.0; then S / W rounded to the input
    float dtype. The CUDA kernel (cuda/smooth.cu) does the same operations.
    """
    if np.dtype(values.dtype).kind == "f":
        masked = np.where(mask, values.astype(np.float64), 0.0)
        # inf - inf is NaN (not foreground); off the mask count is 0 (result dropped)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            total = _separable(masked, weights)
            count = _separable(mask.astype(np.float64), weights)
            smoothed = (total / count).astype(values.dtype).astype(np.float64)
    else:
        masked = np.where(mask, values.astype(np.int64), 0)
        total = _separable(masked, weights)
        count = _separable(mask.astype(np.int64), weights)
        smoothed = ((2 * total + count) // np.maximum(2 * count, 1)).astype(np.float64)
    return np.where(mask, smoothed, np.nan)


def _separable(image: np.ndarray, weights: tuple[int, ...]) -> np.ndarray:
    """sum_i w[i] * (sum_j w[j] * image[y + i - R, x + j - R]), zero outside, in that order."""
    radius = len(weights) // 2
    height, width = image.shape[-2:]
    pad = [(0, 0)] * (image.ndim - 2)
    p = np.pad(image, [*pad, (0, 0), (radius, radius)])
    rows = np.zeros_like(image)
    for j, w in enumerate(weights):
        rows = rows + w * p[..., j : j + width]
    p = np.pad(rows, [*pad, (radius, radius), (0, 0)])
    out = np.zeros_like(image)
    for i, w in enumerate(weights):
        out = out + w * p[..., i : i + height, :]
    return out
