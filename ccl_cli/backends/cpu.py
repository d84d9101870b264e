"""The CPU reference backend: cc3d labels, numpy statistics, raster-order numbering.

cc3d does the union-find (binary images directly; tau mode through a pixel
connectivity graph whose edges `params.tau_joins` decides, so the join rule is
ours to the bit, not cc3d's). Its label order is not raster order, so labels
are renumbered here: a component's first pixel in raster order has no
backward neighbour with its label, which narrows the search to few pixels.
Images of a batch are labeled in parallel threads (cc3d and numpy release the
GIL in their inner loops).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import cc3d
import numpy as np

from ..params import LabelParams, foreground_mask, tau_joins
from ..stats import StatsTable, empty_table, float_mean, float_sum_shift
from .base import BatchResult

# cc3d's 2-D connectivity-graph bits: x is axis 0 (rows), y is axis 1 (columns).
_PLUS_X, _MINUS_X, _PLUS_Y, _MINUS_Y = 1, 2, 4, 8
_PLUS_X_PLUS_Y, _MINUS_X_PLUS_Y, _PLUS_X_MINUS_Y, _MINUS_X_MINUS_Y = 16, 32, 64, 128


class CpuBackend:
    """Labels batches on the CPU; the reference every other backend must match."""

    name = "cpu"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = max(1, threads or os.cpu_count() or 1)

    def label(self, batch: np.ndarray, params: LabelParams) -> BatchResult:
        """Label each image of the (N, H, W) numpy batch; see backends.base."""
        batch = np.asarray(batch)
        if batch.ndim != 3:
            raise ValueError(f"a batch is (N, H, W), got shape {batch.shape}")
        labels = np.empty(batch.shape, np.uint32)

        def one(i: int) -> tuple[StatsTable, int]:
            labels[i], table, components = label_image(batch[i], params)
            return table, components

        if self.threads > 1 and len(batch) > 1:
            with ThreadPoolExecutor(min(self.threads, len(batch))) as pool:
                results = list(pool.map(one, range(len(batch))))
        else:
            results = [one(i) for i in range(len(batch))]
        return BatchResult(
            labels=labels,
            tables=[table for table, _ in results],
            components=[components for _, components in results],
        )

    def batch_budget_bytes(self) -> int:
        """Input bytes per batch: enough images to keep every core busy, few enough to stream."""
        return 32 << 20


def label_image(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, StatsTable, int]:
    """Label one (H, W) image: (labels uint32, stats of kept components, K before min-area)."""
    foreground = foreground_mask(values, params)
    raw = _raw_components(values, foreground, params)
    order = _raster_order(raw, params.connectivity)
    components = len(order)
    table = _raw_stats(raw, values, foreground).take(order)
    keep = table.area >= params.min_area
    kept_raw = order[keep]
    lookup = np.zeros(int(raw.max(initial=0)) + 1, np.uint32)
    lookup[kept_raw] = np.arange(1, len(kept_raw) + 1, dtype=np.uint32)
    return lookup[raw], table.take(np.flatnonzero(keep)), components


def _raw_components(values: np.ndarray, foreground: np.ndarray, params: LabelParams) -> np.ndarray:
    """cc3d component ids (any order, not necessarily dense), 0 off the foreground."""
    if params.tau is None:
        return np.asarray(
            cc3d.connected_components(
                # uint8, not bool: cc3d 4.1 labels background pixels of some bool
                # inputs (tests/test_cpu_labels.py keeps the case).
                foreground.view(np.uint8),
                connectivity=params.connectivity,
                out_dtype=np.uint32,
            )
        )
    graph = _tau_graph(values, foreground, params.tau, params.connectivity)
    raw = np.asarray(cc3d.color_connectivity_graph(graph, connectivity=params.connectivity))
    raw = raw.astype(np.uint32, copy=False)
    raw[~foreground] = 0
    return raw


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


def _raster_order(raw: np.ndarray, connectivity: int) -> np.ndarray:
    """Raw component ids sorted by the raster index of each component's first pixel.

    Only pixels with no backward neighbour (W, N; and NW, NE for 8) of the same
    id can be first pixels, so the search runs over those alone.
    """
    has_earlier = np.zeros(raw.shape, bool)
    has_earlier[:, 1:] |= raw[:, 1:] == raw[:, :-1]
    has_earlier[1:, :] |= raw[1:, :] == raw[:-1, :]
    if connectivity == 8:
        has_earlier[1:, 1:] |= raw[1:, 1:] == raw[:-1, :-1]
        has_earlier[1:, :-1] |= raw[1:, :-1] == raw[:-1, 1:]
    starts = np.flatnonzero((raw != 0) & ~has_earlier)
    ids = raw.ravel()[starts]
    unique_ids, first = np.unique(ids, return_index=True)
    return unique_ids[np.argsort(first, kind="stable")].astype(np.int64)


def _raw_stats(raw: np.ndarray, values: np.ndarray, foreground: np.ndarray) -> StatsTable:
    """Statistics indexed by raw id (row r = id r; unused ids hold garbage)."""
    height, width = raw.shape
    size = int(raw.max(initial=0)) + 1
    pixels = np.flatnonzero(foreground)
    ids = raw.ravel()[pixels]
    if len(pixels) == 0:
        return empty_table(values.dtype.kind != "f")
    ys, xs = np.divmod(pixels, width)
    area = np.bincount(ids, minlength=size)
    x_min = _reduce_at(np.minimum, ids, xs, size, width)
    x_max = _reduce_at(np.maximum, ids, xs, size, -1)
    y_min = _reduce_at(np.minimum, ids, ys, size, height)
    y_max = _reduce_at(np.maximum, ids, ys, size, -1)
    safe_area = np.maximum(area, 1).astype(np.float64)
    centroid_x = _exact_sum(ids, xs, size).astype(np.float64) / safe_area
    centroid_y = _exact_sum(ids, ys, size).astype(np.float64) / safe_area

    pixel_values = values.ravel()[pixels]
    integer = values.dtype.kind != "f"
    as_float = pixel_values.astype(np.float64)
    v_min = _reduce_at(np.minimum, ids, as_float, size, np.inf)
    v_max = _reduce_at(np.maximum, ids, as_float, size, -np.inf)
    if integer:
        mean = _exact_sum(ids, pixel_values.astype(np.int64), size).astype(np.float64) / safe_area
    else:
        mean = _float_mean(ids, as_float, area, size)
    return StatsTable(
        area=area.astype(np.int64),
        x=x_min.astype(np.int64),
        y=y_min.astype(np.int64),
        width=(x_max - x_min + 1).astype(np.int64),
        height=(y_max - y_min + 1).astype(np.int64),
        centroid_x=centroid_x,
        centroid_y=centroid_y,
        mean=mean,
        min=v_min,
        max=v_max,
        integer_values=integer,
    )


def _reduce_at(
    ufunc: np.ufunc, ids: np.ndarray, data: np.ndarray, size: int, start: float
) -> np.ndarray:
    """ufunc-reduce `data` into `size` slots by id, slots starting at `start`."""
    out = np.full(size, start, dtype=data.dtype)
    ufunc.at(out, ids, data)
    return out


def _exact_sum(ids: np.ndarray, data: np.ndarray, size: int) -> np.ndarray:
    """Exact int64 sums of integer `data` by id.

    bincount sums in float64, exact below 2**53: the data is split into 16-bit
    halves so that each partial sum stays far below that.
    """
    data = data.astype(np.int64, copy=False)
    low = np.bincount(ids, weights=data & 0xFFFF, minlength=size)
    high = np.bincount(ids, weights=data >> 16, minlength=size)
    return high.astype(np.int64) * 65536 + low.astype(np.int64)


def _float_mean(ids: np.ndarray, data: np.ndarray, area: np.ndarray, size: int) -> np.ndarray:
    """Order-independent float means (the rule in ccl_cli.stats)."""
    finite = np.isfinite(data)
    absmax = _reduce_at(np.maximum, ids[finite], np.abs(data[finite]), size, 0.0)
    shift = float_sum_shift(absmax, area)
    terms = np.zeros(len(data), np.int64)
    terms[finite] = np.trunc(np.ldexp(data[finite], shift[ids[finite]])).astype(np.int64)
    scaled_sum = np.zeros(size, np.int64)
    np.add.at(scaled_sum, ids, terms)
    pos_inf = np.bincount(ids, weights=data == np.inf, minlength=size) > 0
    neg_inf = np.bincount(ids, weights=data == -np.inf, minlength=size) > 0
    return float_mean(scaled_sum, shift, area, pos_inf, neg_inf)
