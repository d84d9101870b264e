"""Brute-force references for the labeling contract (README.md, "What the labels mean"),
written from the text.

Plain Python loops over pixels, importing nothing from ccl_cli: the foreground test,
the tau join rule, BFS labeling in raster order, min-area renumbering and
per-component statistics. Slow; for small images only.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol

import numpy as np


class Params(Protocol):
    """The labeling options the oracles read (gccl's LabelParams has them)."""

    background: float | None
    invert: bool
    threshold: float | None
    tau: float | None
    connectivity: int


NEIGHBOURS = {
    4: ((-1, 0), (1, 0), (0, -1), (0, 1)),
    8: ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1)),
}


def is_foreground(value: object, dtype: np.dtype, params: Params) -> bool:
    """The README's foreground rule for one pixel value of an image of `dtype`."""
    v = float(value)  # exact for every supported dtype
    if math.isnan(v):
        return False
    if params.threshold is not None:
        if dtype.kind == "b":  # a threshold sees a 1-bit pixel as 0 (black) or 255 (white)
            v *= 255
        return v < params.threshold if params.invert else v > params.threshold
    if params.background is None:
        return True
    if params.invert:
        if dtype.kind == "b":
            v = float(not value)
        elif dtype.kind == "f":
            v = -v
        else:
            v = float(np.iinfo(dtype).max - int(value))
    return v != params.background


def tolerance(m: float, tau: float, relative: float = 0.0, quadratic: float = 0.0) -> float:
    """The README's tolerance tau + relative * m + quadratic * m^2, in float64 in this
    order (Python rounds each product and sum on its own); a zero coefficient adds
    nothing."""
    limit = tau
    if relative > 0:
        limit = limit + relative * m
    if quadratic > 0:
        limit = limit + quadratic * (m * m)
    return limit


def joins(a: object, b: object, tau: float, relative: float = 0.0, quadratic: float = 0.0) -> bool:
    """The tau rule: equal values join, else |a - b| <= the tolerance of
    m = max(|a|, |b|), in float64."""
    fa, fb = float(a), float(b)
    if fa == fb:
        return True
    return abs(fa - fb) <= tolerance(max(abs(fa), abs(fb)), tau, relative, quadratic)


def bfs_labels(values: np.ndarray, params: Params) -> np.ndarray:
    """Labels 1..K in raster order of first pixels (before min-area), int64."""
    height, width = values.shape
    fg = [
        [is_foreground(values[y, x], values.dtype, params) for x in range(width)]
        for y in range(height)
    ]
    labels = np.zeros((height, width), np.int64)
    count = 0
    for y0 in range(height):
        for x0 in range(width):
            if not fg[y0][x0] or labels[y0, x0]:
                continue
            count += 1
            labels[y0, x0] = count
            queue = deque([(y0, x0)])
            while queue:
                y, x = queue.popleft()
                for dy, dx in NEIGHBOURS[params.connectivity]:
                    ny, nx = y + dy, x + dx
                    if not (0 <= ny < height and 0 <= nx < width):
                        continue
                    if not fg[ny][nx] or labels[ny, nx]:
                        continue
                    if params.tau is not None and not joins(
                        values[y, x],
                        values[ny, nx],
                        params.tau,
                        params.tau_relative,
                        params.tau_quadratic,
                    ):
                        continue
                    labels[ny, nx] = count
                    queue.append((ny, nx))
    return labels


def filter_min_area(labels: np.ndarray, min_area: int) -> np.ndarray:
    """Remove components smaller than min_area and renumber the rest in order."""
    areas = np.bincount(labels.ravel())
    lookup = np.zeros(len(areas), np.int64)
    new = 0
    for old in range(1, len(areas)):
        if areas[old] >= min_area:
            new += 1
            lookup[old] = new
    return lookup[labels]


@dataclass
class ComponentStats:
    """Exact statistics of one component, from plain Python arithmetic."""

    area: int
    x: int
    y: int
    width: int
    height: int
    centroid_x: float
    centroid_y: float
    exact_mean: float
    min: float
    max: float


def component_stats(labels: np.ndarray, values: np.ndarray) -> list[ComponentStats]:
    """Statistics of components 1..labels.max() (mean by math.fsum, not the float rule)."""
    rows = []
    for label in range(1, int(labels.max(initial=0)) + 1):
        ys, xs = np.nonzero(labels == label)
        pixels = [float(v) for v in values[ys, xs]]
        area = len(pixels)
        rows.append(
            ComponentStats(
                area=area,
                x=int(xs.min()),
                y=int(ys.min()),
                width=int(xs.max() - xs.min() + 1),
                height=int(ys.max() - ys.min() + 1),
                centroid_x=sum(int(x) for x in xs) / area,
                centroid_y=sum(int(y) for y in ys) / area,
                # fsum refuses infinities; a plain sum gives their inf/-inf/nan.
                exact_mean=(math.fsum(pixels) if all(map(math.isfinite, pixels)) else sum(pixels))
                / area,
                min=math.nan if any(map(math.isnan, pixels)) else min(pixels),
                max=math.nan if any(map(math.isnan, pixels)) else max(pixels),
            )
        )
    return rows


def rule_float_mean(pixels: list[float]) -> float:
    """The README's float-mean rule ("What the labels mean"), one component, in Python ints."""
    finite = [v for v in pixels if math.isfinite(v)]
    pos_inf, neg_inf = math.inf in pixels, -math.inf in pixels
    if (pos_inf and neg_inf) or any(map(math.isnan, pixels)):
        return math.nan
    if pos_inf or neg_inf:
        return math.inf if pos_inf else -math.inf
    exponent = math.frexp(max((abs(v) for v in finite), default=0.0))[1]
    area_bits = (len(pixels) - 1).bit_length()  # ceil(log2(area))
    shift = 62 - area_bits - exponent
    total = sum(int(math.ldexp(v, shift)) for v in finite)  # int() truncates
    return math.ldexp(float(total), -shift) / len(pixels)
