"""An independent labeling for the engine's tests, written from the README's contract ("What
the labels mean"): cc3d does the union-find, numpy the rest. Imports nothing from ccl_cli.

Binary images go to cc3d directly. In tau mode integer images use cc3d's own `delta` where
it is provably the README's rule (values shifted to unsigned, so differences are exact;
background mapped to cc3d's 0; 8-connectivity as 26-connectivity on a (1, H, W) view, since
cc3d's 2-D 8-connected delta labeling merges wrongly); everything else (floats, or
foreground pixels whose value maps to 0) goes through a pixel connectivity graph whose
edges the README's join rule decides. Labels are renumbered in raster order of each
component's first pixel; statistics are plain per-pixel reductions. For small images.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

import cc3d
import numpy as np

# cc3d's 2-D connectivity-graph bits: x is axis 0 (rows), y is axis 1 (columns).
_PLUS_X, _MINUS_X, _PLUS_Y, _MINUS_Y = 1, 2, 4, 8
_PLUS_X_PLUS_Y, _MINUS_X_PLUS_Y, _PLUS_X_MINUS_Y, _MINUS_X_MINUS_Y = 16, 32, 64, 128
#: The README's float-mean rule: values scaled to integers of this many bits at most.
FLOAT_SUM_BITS = 62
INTEGER_COLUMNS = ("area", "x", "y", "width", "height")
FLOAT_COLUMNS = ("centroid_x", "centroid_y", "mean", "min", "max")


class Params(Protocol):
    """The labeling options the reference reads (gccl's LabelParams has them)."""

    background: float | None
    invert: bool
    threshold: float | None
    tau: float | None
    connectivity: int
    min_area: int
    morphology: tuple[tuple[str, int], ...]
    smooth: tuple[str, int] | None


@dataclass
class Statistics:
    """The README's statistics of the kept components, row i = label i + 1."""

    area: np.ndarray
    x: np.ndarray
    y: np.ndarray
    width: np.ndarray
    height: np.ndarray
    centroid_x: np.ndarray
    centroid_y: np.ndarray
    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    integer_values: bool


def matches(table: object, want: Statistics) -> bool:
    """Whether a statistics table (anything with these columns) equals `want` bit for bit:
    every value, the sign of every zero, NaN where NaN."""
    if getattr(table, "integer_values") != want.integer_values:  # noqa: B009
        return False
    for name in (*INTEGER_COLUMNS, *FLOAT_COLUMNS):
        got, expected = np.asarray(getattr(table, name)), getattr(want, name)
        floating = expected.dtype.kind == "f"
        if got.dtype != expected.dtype or not np.array_equal(got, expected, equal_nan=floating):
            return False
        if floating and not np.array_equal(np.signbit(got), np.signbit(expected)):
            return False
    return True


def label_image(values: np.ndarray, params: Params) -> tuple[np.ndarray, Statistics, int]:
    """Label one (H, W) image: (labels uint32, statistics of the kept components, K before
    min-area). Stages (morphology, smoothing) are not part of this reference."""
    assert not params.morphology and params.smooth is None, "no stages in this reference"
    if values.dtype == np.bool_:
        values = values.view(np.uint8) != 0  # a bool is 0 or 1 whatever its byte holds
    labels, count = _raster_order(_cc3d_ids(values, foreground_mask(values, params), params))
    table = _statistics(labels, values, count)
    keep = table.area >= params.min_area
    lookup = np.zeros(count + 1, np.uint32)
    lookup[1:][keep] = np.arange(1, int(keep.sum()) + 1, dtype=np.uint32)
    rows = np.flatnonzero(keep)
    kept = Statistics(
        **{name: getattr(table, name)[rows] for name in (*INTEGER_COLUMNS, *FLOAT_COLUMNS)},
        integer_values=table.integer_values,
    )
    return lookup[labels], kept, count


def foreground_mask(values: np.ndarray, params: Params) -> np.ndarray:
    """The README's foreground: v != background after --invert (max - v for integers, 1 - v
    for 1-bit, -v for floats), or the threshold test on the original values (a 1-bit pixel
    0 or 255); NaN never.
    Every comparison in float64, exact for every supported dtype."""
    v = values.astype(np.float64)
    if params.threshold is not None:
        if values.dtype == np.bool_:  # a threshold sees a 1-bit pixel as 0 or 255
            v = v * 255
        with np.errstate(invalid="ignore"):
            mask = v < params.threshold if params.invert else v > params.threshold
    elif params.background is None:
        mask = np.ones(values.shape, bool)
    else:
        if params.invert:
            if values.dtype.kind == "f":
                v = -v
            else:
                v = (1.0 if values.dtype == np.bool_ else float(np.iinfo(values.dtype).max)) - v
        mask = v != params.background
    return mask & ~np.isnan(v)


def joins(a: np.ndarray, b: np.ndarray, tau: float) -> np.ndarray:
    """The README's tau rule, elementwise: equal values join, else |a - b| <= tau, the
    difference taken in float64."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore"):  # inf - inf: only equality joins them
        return (a64 == b64) | (np.abs(a64 - b64) <= tau)


def _cc3d_ids(values: np.ndarray, foreground: np.ndarray, params: Params) -> np.ndarray:
    """cc3d component ids (any order, not necessarily dense), 0 off the foreground."""
    if params.tau is None:
        # uint8, not bool: cc3d 4.1 labels background pixels of some bool inputs.
        return _cc3d(foreground.view(np.uint8), params.connectivity)
    shifted = _delta_input(values, foreground)
    if shifted is not None:
        delta = _delta(params.tau)
        if delta < np.iinfo(shifted.dtype).max:
            return _cc3d(shifted, params.connectivity, delta)
        # Every pair joins; cc3d mislabels (or fails) with delta == dtype max.
        return _cc3d(foreground.view(np.uint8), params.connectivity)
    graph = _tau_graph(values, foreground, params.tau, params.connectivity)
    connectivity: Literal[4, 8] = 8 if params.connectivity == 8 else 4
    ids = np.asarray(cc3d.color_connectivity_graph(graph, connectivity=connectivity))
    ids = ids.astype(np.uint32, copy=False)
    ids[~foreground] = 0
    return ids


def _cc3d(image: np.ndarray, connectivity: int, delta: int = 0) -> np.ndarray:
    """cc3d.connected_components of a 2-D unsigned image (0 = background), uint32 ids.

    8-connectivity runs as 26-connectivity on a (1, H, W) view: cc3d's 2-D
    8-connected path merges components that must stay apart when delta > 0.
    """
    volume = image[np.newaxis] if connectivity == 8 else image
    cc3d_connectivity: Literal[4, 26] = 26 if connectivity == 8 else 4
    labels = cc3d.connected_components(
        volume, connectivity=cc3d_connectivity, delta=delta, out_dtype=np.uint32
    )
    return np.asarray(labels).reshape(image.shape)


def _delta_input(values: np.ndarray, foreground: np.ndarray) -> np.ndarray | None:
    """The image cc3d's delta labeling needs, or None where it cannot be the README's rule.

    Integers are shifted to unsigned (v - dtype min: differences unchanged, and
    cc3d reads every value as unsigned); background becomes 0. Floats and images
    where a foreground pixel would map to 0 return None.
    """
    dtype = values.dtype
    if dtype.kind == "b":
        shifted = values.view(np.uint8)
    elif dtype.kind == "u":
        shifted = values
    elif dtype.kind == "i":
        unsigned = np.dtype(f"u{dtype.itemsize}")
        shifted = values.view(unsigned) ^ unsigned.type(1 << (8 * dtype.itemsize - 1))
    else:
        return None
    masked = shifted * foreground
    if np.count_nonzero(masked) != np.count_nonzero(foreground):
        return None
    return np.ascontiguousarray(masked)


def _delta(tau: float) -> int:
    """cc3d's delta for `tau` on integer values (|a - b| <= tau iff <= floor(tau)), below 2**32."""
    if not tau > 0:  # a negative (or NaN) tau still joins equal values
        return 0
    return math.floor(min(tau, 2**32))


def _tau_graph(
    values: np.ndarray, foreground: np.ndarray, tau: float, connectivity: int
) -> np.ndarray:
    """cc3d's pixel connectivity graph: a bit per direction where two neighbours join."""
    graph = np.zeros(values.shape, np.uint8)

    def link(a: tuple[slice, slice], b: tuple[slice, slice], bit_a: int, bit_b: int) -> None:
        joined = foreground[a] & foreground[b] & joins(values[a], values[b], tau)
        graph[a] |= joined.view(np.uint8) * np.uint8(bit_a)
        graph[b] |= joined.view(np.uint8) * np.uint8(bit_b)

    all_, head, tail = slice(None), slice(None, -1), slice(1, None)
    link((head, all_), (tail, all_), _PLUS_X, _MINUS_X)
    link((all_, head), (all_, tail), _PLUS_Y, _MINUS_Y)
    if connectivity == 8:
        link((head, head), (tail, tail), _PLUS_X_PLUS_Y, _MINUS_X_MINUS_Y)
        link((head, tail), (tail, head), _PLUS_X_MINUS_Y, _MINUS_X_PLUS_Y)
    return graph


def _raster_order(ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Labels 1..K in raster order of each component's first pixel, and K."""
    flat = ids.ravel()
    present, first = np.unique(flat, return_index=True)
    if present.size and present[0] == 0:
        present, first = present[1:], first[1:]
    lookup = np.zeros(int(flat.max(initial=0)) + 1, np.uint32)
    lookup[present[np.argsort(first, kind="stable")]] = np.arange(
        1, len(present) + 1, dtype=np.uint32
    )
    return lookup[ids], len(present)


def _statistics(labels: np.ndarray, values: np.ndarray, count: int) -> Statistics:
    """The README's statistics of components 1..count of `labels`, from every pixel."""
    integer = values.dtype.kind != "f"
    ys, xs = np.nonzero(labels)
    ids = labels[ys, xs].astype(np.int64) - 1
    pixels = values[ys, xs]
    v = pixels.astype(np.float64)  # exact for every supported dtype

    def reduce(ufunc: np.ufunc, data: np.ndarray, start: float, dtype: type) -> np.ndarray:
        out = np.full(count, start, dtype)
        ufunc.at(out, ids, data.astype(dtype))
        return out

    area = reduce(np.add, np.ones_like(ys), 0, np.int64)
    x = reduce(np.minimum, xs, np.iinfo(np.int64).max, np.int64)
    y = reduce(np.minimum, ys, np.iinfo(np.int64).max, np.int64)
    width = reduce(np.maximum, xs, -1, np.int64) - x + 1
    height = reduce(np.maximum, ys, -1, np.int64) - y + 1
    centroid_x = reduce(np.add, xs, 0, np.int64) / area
    centroid_y = reduce(np.add, ys, 0, np.int64) / area
    if integer:
        mean = reduce(np.add, pixels, 0, np.int64).astype(np.float64) / area
    else:
        mean = _float_mean(ids, v, area)
    low = reduce(np.minimum, v, math.inf, np.float64)
    high = reduce(np.maximum, v, -math.inf, np.float64)
    # -0.0 orders below +0.0: a zero extreme takes the sign the component's zeros allow.
    negative_zero = np.bincount(ids[(v == 0) & np.signbit(v)], minlength=count) > 0
    positive_zero = np.bincount(ids[(v == 0) & ~np.signbit(v)], minlength=count) > 0
    low = np.where(low == 0, np.where(negative_zero, -0.0, 0.0), low)
    high = np.where(high == 0, np.where(positive_zero, 0.0, -0.0), high)
    return Statistics(area, x, y, width, height, centroid_x, centroid_y, mean, low, high, integer)


def _float_mean(ids: np.ndarray, v: np.ndarray, area: np.ndarray) -> np.ndarray:
    """The README's float mean: each finite value scaled by 2**s to an integer (truncated),
    s = 62 - ceil(log2(area)) - e, with e the frexp exponent of the component's largest
    finite |v|; the integers summed exactly; mean = sum * 2**-s / area. A component
    holding +inf has mean inf, -inf gives -inf, both give nan."""
    count = len(area)
    finite = np.isfinite(v)
    largest = np.zeros(count)
    np.maximum.at(largest, ids[finite], np.abs(v[finite]))
    exponent = np.frexp(largest)[1].astype(np.int64)
    area_bits = np.array([(int(a) - 1).bit_length() for a in area], np.int64)
    shift = FLOAT_SUM_BITS - area_bits - exponent
    terms = np.trunc(np.ldexp(v[finite], shift[ids[finite]])).astype(np.int64)
    total = np.zeros(count, np.int64)
    np.add.at(total, ids[finite], terms)
    mean = np.ldexp(total.astype(np.float64), -shift) / area
    pos_inf = np.bincount(ids[v == np.inf], minlength=count) > 0
    neg_inf = np.bincount(ids[v == -np.inf], minlength=count) > 0
    mean = np.where(pos_inf, np.inf, mean)
    mean = np.where(neg_inf, -np.inf, mean)
    return np.where(pos_inf & neg_inf, np.nan, mean)
