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

    def smooth(
        self, values: np.ndarray, mask: np.ndarray, weights: tuple[int, ...], rank: int
    ) -> np.ndarray:
        return smooth_numpy(values, mask, weights, rank)

    def foreground(self, values: np.ndarray, params: LabelParams) -> np.ndarray:
        return foreground_mask(values, params)

    def clear_nan(self, mask: np.ndarray, values: np.ndarray) -> np.ndarray:
        mask &= ~np.isnan(values)
        return mask

    def masked_float64(self, numbers: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return np.where(mask, numbers.astype(np.float64), np.nan)

    def fill_added(
        self, values: np.ndarray, readings: np.ndarray, mask: np.ndarray, radius: int, rank: int
    ) -> np.ndarray:
        return fill_added(values, readings, mask & ~readings, radius, rank, np)


def morph_numpy(mask: np.ndarray, op: str, iterations: int, connectivity: int) -> np.ndarray:
    """Binary erosion or dilation over the last two axes (connectivity 4, 8) or three
    (6, 18, 26) with the element of the connectivity: the cross (4, 6), the square or
    cube (8, 26), and for 18 the voxels sharing a face or an edge. Voxels outside the
    array never change the result (OpenCV's default border): they count as foreground
    for erosion and background for dilation."""
    erode = op == "erode"
    rank = LabelParams(connectivity=connectivity).rank
    axes = tuple(range(mask.ndim - rank, mask.ndim))
    pad = [(0, 0)] * (mask.ndim - rank) + [(1, 1)] * rank
    combine = np.logical_and if erode else np.logical_or
    for _ in range(iterations):
        p = np.pad(mask, pad, constant_values=erode)
        if connectivity in (8, 26):  # the square and the cube are separable: 3 wide per axis
            for axis in axes:
                p = _window(p, axis, combine)
            mask = p
        elif connectivity in (4, 6):  # the centre and its two neighbours along each axis
            mask = _inner(p, axes)
            for axis in axes:
                for side in (slice(None, -2), slice(2, None)):
                    mask = combine(mask, _inner(p, axes, {axis: side}))
        else:  # 18: a square in each of the three planes through the voxel
            z, y, x = axes
            squares = [  # the square's two axes, then the third
                _inner(_window(_window(p, a, combine), b, combine), (other,))
                for a, b, other in ((y, x, z), (z, x, y), (z, y, x))
            ]
            mask = combine(combine(squares[0], squares[1]), squares[2])
    return mask


def _along(p: np.ndarray, axis: int, part: slice) -> np.ndarray:
    """p sliced by `part` along `axis`."""
    index = [slice(None)] * p.ndim
    index[axis] = part
    return p[tuple(index)]


def _window(p: np.ndarray, axis: int, combine: np.ufunc) -> np.ndarray:
    """Each element combined with its two neighbours along `axis` (2 shorter there)."""
    left, centre, right = (_along(p, axis, part) for part in _THREE)
    return combine(combine(left, centre), right)


#: The left neighbours, the centres and the right neighbours of a padded axis.
_THREE = (slice(None, -2), slice(1, -1), slice(2, None))


def _inner(
    p: np.ndarray, axes: tuple[int, ...], shifted: dict[int, slice] | None = None
) -> np.ndarray:
    """p without its outer layer along `axes` (slice 1:-1), or along an axis of
    `shifted` that axis's slice instead."""
    index = [slice(None)] * p.ndim
    for axis in axes:
        index[axis] = (shifted or {}).get(axis, slice(1, -1))
    return p[tuple(index)]


def smooth_numpy(
    values: np.ndarray, mask: np.ndarray, weights: tuple[int, ...], rank: int = 2
) -> np.ndarray:
    """Normalized convolution over `mask` on the last `rank` axes, as float64 with NaN
    off the mask.

    For p in the mask, S = sum w(q) v(q) and W = sum w(q) over the window
    pixels q that are in the mask (w = the product of weights[i] over the axes).
    Integers: exact int64 sums, V' = floor((2S + W) / (2W)) (halves round up,
    toward +infinity). Floats: float64, a pass along x (j = -R..R), then along y,
    then (volumes) along z, each term a rounded multiply then a rounded add onto an
    accumulator that starts at +0.0; then S / W rounded to the input float dtype.
    The CUDA kernel (cuda/smooth.cu) does the same operations for images.
    """
    if np.dtype(values.dtype).kind == "f":
        masked = np.where(mask, values.astype(np.float64), 0.0)
        # inf - inf is NaN (not foreground); off the mask count is 0 (result dropped)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            total = _separable(masked, weights, rank)
            count = _separable(mask.astype(np.float64), weights, rank)
            smoothed = (total / count).astype(values.dtype).astype(np.float64)
    else:
        masked = np.where(mask, values.astype(np.int64), 0)
        total = _separable(masked, weights, rank)
        count = _separable(mask.astype(np.int64), weights, rank)
        smoothed = ((2 * total + count) // np.maximum(2 * count, 1)).astype(np.float64)
    return np.where(mask, smoothed, np.nan)


def _separable(image: np.ndarray, weights: tuple[int, ...], rank: int) -> np.ndarray:
    """sum over the last `rank` axes, last axis innermost, of w[i] * image at offset
    i - R, zero outside: for images sum_i w[i] * (sum_j w[j] * image[y + i - R, x + j - R]),
    in that order."""
    radius = len(weights) // 2
    for axis in range(image.ndim - 1, image.ndim - rank - 1, -1):
        length = image.shape[axis]
        pad = [(0, 0)] * image.ndim
        pad[axis] = (radius, radius)
        p = np.pad(image, pad)
        out = np.zeros_like(image)
        for k, w in enumerate(weights):
            out = out + w * _along(p, axis, slice(k, k + length))
        image = out
    return image
