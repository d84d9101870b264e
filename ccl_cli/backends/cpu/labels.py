"""The CPU reference backend: cc3d labels, numpy statistics, raster-order numbering.

cc3d does the union-find. Binary images go to it directly. In tau mode integer
images use cc3d's own `delta` when it is provably our rule (values shifted to
unsigned, so differences are exact; background mapped to cc3d's 0; 8-connectivity
as 26-connectivity on a (1, H, W) view, since cc3d's 2-D 8-connected delta
labeling merges wrongly); everything else (floats, or foreground pixels whose
value maps to 0) goes through a pixel connectivity graph whose edges
`params.tau_joins` decides. cc3d's ids are usually in raster order already;
that is checked on the horizontal runs of the label image, and ids are
renumbered where they are not. Statistics are gathered per run, not per pixel,
where they can be. Images of a batch are labeled in parallel threads (numpy
releases the GIL in most of its loops; cc3d does not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, cast

import cc3d
import numpy as np

from ...contract.params import LabelParams, canonical_bools, foreground_mask, tau_joins
from ...contract.stages import label_input
from ...contract.stats import StatsTable, empty_table, float_mean, float_sum_shift
from .stages import NumpyStages

#: Average run length from which value extremes are reduced per run, not per pixel.
REDUCEAT_MIN_RUN_LENGTH = 8

# cc3d's 2-D connectivity-graph bits: x is axis 0 (rows), y is axis 1 (columns).
_PLUS_X, _MINUS_X, _PLUS_Y, _MINUS_Y = 1, 2, 4, 8
_PLUS_X_PLUS_Y, _MINUS_X_PLUS_Y, _PLUS_X_MINUS_Y, _MINUS_X_MINUS_Y = 16, 32, 64, 128


def label_image(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, StatsTable, int]:
    """Label one (H, W) image: (labels uint32, stats of kept components, K before min-area).

    Morphology and smoothing (ccl_cli.contract.stages) decide the labels; statistics
    read the original values (in tau mode with pixels filled by morphology, contract.stages).
    """
    values = canonical_bools(values)
    image, label_params, values = label_input(values, params, np, NumpyStages())
    labels, runs, components = _components(
        image, foreground_mask(image, label_params), label_params
    )
    table = _stats(labels, runs, values, components)
    keep = table.area >= params.min_area
    if keep.all():
        return labels, table, components
    lookup = np.zeros(components + 1, np.uint32)
    lookup[1:][keep] = np.arange(1, int(keep.sum()) + 1, dtype=np.uint32)
    return lookup[labels], table.take(np.flatnonzero(keep)), components


def raster_components(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, int]:
    """Dense labels 1..K of one image in raster order, and K (no statistics, no min-area)."""
    values = canonical_bools(values)
    labels, _, count = _components(values, foreground_mask(values, params), params)
    return labels, count


def _components(
    values: np.ndarray, foreground: np.ndarray, params: LabelParams
) -> tuple[np.ndarray, _Runs, int]:
    """Dense raster-order labels, their runs, and K."""
    raw = _raw_components(values, foreground, params)
    runs = _Runs.of(raw, foreground)
    labels, components = _raster_labels(raw, runs)
    return labels, runs, components


def _raw_components(values: np.ndarray, foreground: np.ndarray, params: LabelParams) -> np.ndarray:
    """cc3d component ids (any order, not necessarily dense), 0 off the foreground."""
    if params.tau is None:
        # uint8, not bool: cc3d 4.1 labels background pixels of some bool inputs
        # (tests/backends/test_cpu_labels.py keeps the case).
        return _cc3d(foreground.view(np.uint8), params.connectivity)
    shifted = _delta_input(values, foreground)
    if shifted is not None:
        delta = _delta(params.tau)
        if delta < np.iinfo(shifted.dtype).max:
            return _cc3d(shifted, params.connectivity, delta)
        # Every pair joins; cc3d mislabels (or fails) with delta == dtype max.
        return _cc3d(foreground.view(np.uint8), params.connectivity)
    graph = _tau_graph(values, foreground, params.tau, params.connectivity)
    connectivity = cast(Literal[4, 8], params.connectivity)
    raw = np.asarray(cc3d.color_connectivity_graph(graph, connectivity=connectivity))
    raw = raw.astype(np.uint32, copy=False)
    raw[~foreground] = 0
    return raw


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
    """The image cc3d's delta labeling needs, or None where it cannot be ours.

    Integers are shifted to unsigned (v - dtype min: differences unchanged, and
    cc3d reads every value as unsigned); background becomes 0. Floats (whose
    differences we take in float64) and images where a foreground pixel would
    map to 0 return None.
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
        joined = foreground[a] & foreground[b] & tau_joins(values[a], values[b], tau)
        graph[a] |= joined.view(np.uint8) * np.uint8(bit_a)
        graph[b] |= joined.view(np.uint8) * np.uint8(bit_b)

    all_, head, tail = slice(None), slice(None, -1), slice(1, None)
    link((head, all_), (tail, all_), _PLUS_X, _MINUS_X)
    link((all_, head), (all_, tail), _PLUS_Y, _MINUS_Y)
    if connectivity == 8:
        link((head, head), (tail, tail), _PLUS_X_PLUS_Y, _MINUS_X_MINUS_Y)
        link((head, tail), (tail, head), _PLUS_X_MINUS_Y, _MINUS_X_PLUS_Y)
    return graph


@dataclass
class _Runs:
    """Horizontal runs of one foreground label within a row, in raster order."""

    start: np.ndarray  # flat index of the first pixel
    end: np.ndarray  # flat index one past the last pixel
    label: np.ndarray

    @classmethod
    def of(cls, labels: np.ndarray, foreground: np.ndarray) -> _Runs:
        """The runs of a 2-D label image that is nonzero exactly on `foreground`."""
        flat = labels.ravel()
        width = labels.shape[1]
        change = flat[1:] != flat[:-1]
        first = np.empty(flat.size, bool)
        first[0] = True
        first[1:] = change
        first[::width] = True
        first &= foreground.ravel()
        last = np.empty(flat.size, bool)
        last[-1] = True
        last[:-1] = change
        last[width - 1 :: width] = True
        last &= foreground.ravel()
        start = np.flatnonzero(first)
        return cls(start, np.flatnonzero(last) + 1, flat[start])

    def reduce(self, ufunc: np.ufunc, pixels: np.ndarray) -> np.ndarray:
        """ufunc-reduce the flat `pixels` over each run (reduceat on start, end pairs)."""
        bounds = np.empty(2 * len(self.start), np.int64)
        bounds[0::2] = self.start
        bounds[1::2] = self.end
        if bounds[-1] == pixels.size:  # the last run ends the image
            bounds = bounds[:-1]
        return ufunc.reduceat(pixels, bounds)[0::2]


def _raster_labels(raw: np.ndarray, runs: _Runs) -> tuple[np.ndarray, int]:
    """Dense labels 1..K in raster order of each component's first pixel, and K.

    `runs.label` is renumbered along. cc3d's ids usually are that order already:
    then every run's id is at most one more than the largest id before it.
    """
    ids = runs.label
    if ids.size == 0:
        return raw, 0
    seen = np.maximum.accumulate(ids)
    if ids[0] == 1 and np.all(ids[1:] <= seen[:-1] + 1):
        return raw, int(seen[-1])
    unique_ids, first = np.unique(ids, return_index=True)
    order = unique_ids[np.argsort(first, kind="stable")]
    lookup = np.zeros(int(unique_ids[-1]) + 1, np.uint32)
    lookup[order] = np.arange(1, len(order) + 1, dtype=np.uint32)
    runs.label = lookup[ids]
    return lookup[raw], len(order)


def _stats(labels: np.ndarray, runs: _Runs, values: np.ndarray, count: int) -> StatsTable:
    """Statistics of components 1..count of dense `labels` (rows in label order).

    Geometry and integer sums come from the runs (exact int64 sums of run
    lengths, column sums and prefix sums of the values); float means from the
    pixels; value minima and maxima from the runs where runs are long (numpy's
    reduceat pays per run), else from the pixels.
    """
    integer = values.dtype.kind != "f"
    if count == 0:
        return empty_table(integer)
    height, width = labels.shape
    slots = count + 1  # slot 0 collects the background and is dropped
    start, end, label = runs.start, runs.end, runs.label
    row, x0 = np.divmod(start, width)
    length = end - start
    x1 = x0 + length - 1
    area = _reduce_by(np.add, label, length, slots, 0)
    pixel_values = values.ravel()
    if values.dtype == np.bool_:
        pixel_values = pixel_values.view(np.uint8)
    if integer:
        # Prefix sums along rows (runs never cross one), in int32 where a row cannot overflow it.
        largest = max(-_dtype_limit(values.dtype, -1), _dtype_limit(values.dtype, 1))
        accumulator = np.int32 if width * largest < 2**31 else np.int64
        prefix = np.cumsum(values.reshape(height, width), axis=1, dtype=accumulator).ravel()
        run_sum = prefix[end - 1].astype(np.int64) - prefix[start] + pixel_values[start]
        mean = _reduce_by(np.add, label, run_sum, slots, 0) / np.maximum(area, 1)
    else:
        mean = _float_mean(labels.ravel(), pixel_values, area)
    with np.errstate(invalid="ignore"):  # NaN is background: it never reaches a kept slot
        if len(start) * REDUCEAT_MIN_RUN_LENGTH <= pixel_values.size:
            ids, run_min, run_max = (
                label,
                runs.reduce(np.minimum, pixel_values),
                runs.reduce(np.maximum, pixel_values),
            )
        else:
            ids, run_min, run_max = labels.ravel(), pixel_values, pixel_values
        v_min = _reduce_by(np.minimum, ids, run_min, slots, _dtype_limit(values.dtype, 1))
        v_max = _reduce_by(np.maximum, ids, run_max, slots, _dtype_limit(values.dtype, -1))
    if not integer:
        _order_signed_zeros(v_min, v_max, labels.ravel(), pixel_values)
    x_min = _reduce_by(np.minimum, label, x0, slots, width)
    y_min = _reduce_by(np.minimum, label, row, slots, height)
    real = slice(1, None)
    safe_area = area[real].astype(np.float64)
    return StatsTable(
        area=area[real],
        x=x_min[real],
        y=y_min[real],
        width=(_reduce_by(np.maximum, label, x1, slots, -1) - x_min + 1)[real],
        height=(_reduce_by(np.maximum, label, row, slots, -1) - y_min + 1)[real],
        centroid_x=_reduce_by(np.add, label, length * (x0 + x1) // 2, slots, 0)[real] / safe_area,
        centroid_y=_reduce_by(np.add, label, length * row, slots, 0)[real] / safe_area,
        mean=mean[real],
        min=v_min[real].astype(np.float64),
        max=v_max[real].astype(np.float64),
        integer_values=integer,
    )


def _order_signed_zeros(
    v_min: np.ndarray, v_max: np.ndarray, flat: np.ndarray, pixel_values: np.ndarray
) -> None:
    """Make zero extremes follow the contract: -0.0 below +0.0.

    np.minimum and np.maximum treat the two zeros as equal and keep whichever
    came first, so the sign of a zero extreme would depend on pixel order.
    """
    zeros = pixel_values == 0
    if not zeros.any():
        return
    negative = zeros & np.signbit(pixel_values)
    has_negative = np.bincount(flat[negative], minlength=len(v_min)) > 0
    has_positive = np.bincount(flat[zeros & ~negative], minlength=len(v_max)) > 0
    zero_min, zero_max = v_min == 0, v_max == 0
    v_min[zero_min] = np.where(has_negative[zero_min], -0.0, 0.0)
    v_max[zero_max] = np.where(has_positive[zero_max], 0.0, -0.0)


def _dtype_limit(dtype: np.dtype, sign: int) -> float:
    """The largest (sign 1) or smallest (sign -1) value of `dtype`, as a reduction start."""
    if dtype.kind == "f":
        return sign * math.inf
    if dtype == np.bool_:
        return 1 if sign > 0 else 0
    info = np.iinfo(dtype)
    return int(info.max if sign > 0 else info.min)


def _reduce_by(
    ufunc: np.ufunc, ids: np.ndarray, data: np.ndarray, size: int, start: float
) -> np.ndarray:
    """ufunc-reduce `data` into `size` slots by id, slots starting at `start`.

    Integer data reduces in int64 (exact); the dtypes of `out` and `data` match
    so that numpy takes ufunc.at's fast path.
    """
    if data.dtype.kind in "iu" and ufunc is np.add:
        data = data.astype(np.int64, copy=False)
    out = np.full(size, start, dtype=data.dtype)
    ufunc.at(out, ids, data)
    return out


def _float_mean(flat: np.ndarray, data: np.ndarray, area: np.ndarray) -> np.ndarray:
    """Order-independent float means by label slot (the rule in ccl_cli.contract.stats)."""
    size = len(area)
    counted = (flat != 0) & np.isfinite(data)
    ids = flat[counted]
    finite = data[counted].astype(np.float64)
    absmax = _reduce_by(np.maximum, ids, np.abs(finite), size, 0.0)
    shift = float_sum_shift(absmax, area)
    terms = np.trunc(np.ldexp(finite, shift[ids])).astype(np.int64)
    scaled_sum = _reduce_by(np.add, ids, terms, size, 0)
    pos_inf = np.bincount(flat[data == np.inf], minlength=size) > 0
    neg_inf = np.bincount(flat[data == -np.inf], minlength=size) > 0
    return float_mean(scaled_sum, shift, np.maximum(area, 1), pos_inf, neg_inf)
