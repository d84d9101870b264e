"""Labeling a batch that is already on the device, on the current stream, for the Python API.

Labels only: every kernel is queued on the current stream and nothing waits, so
the caller goes on queuing work (label_counts). With min-area filtering the
areas are sized by the number of labels, so the host waits once for it. With
statistics (label_table) the host waits for the number of labels (it sizes the
table), and with min-area filtering once more, for the number of kept labels
(it sizes the columns); the table itself stays on the device.

Batches of volumes (volume_counts, volume_table) go the same way in one set of launches;
a volume too large for one piece (volumes.fits_one_piece), or one whose labeling does not
fit the device's free memory, is labeled in slabs of planes (slabs.py), which waits for
each slab's count.

Outputs are written into arrays the caller allocates (`empty`), so that they can
belong to another framework (ccl_cli/backends/cuda/frameworks.py); temporaries
come from CuPy's memory pool. No stream or event is made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from ...contract.cleaning import selects
from ...contract.params import LabelParams
from ...contract.stages import label_input
from ...contract.stats import StatsTable
from . import slabs, volumes
from .arrays import contiguous, contiguous_volumes
from .labels import (
    TABLE_COLUMNS,
    aggregate,
    check_batch,
    dense_labels,
    filled_on_host,
    filtered_table,
    label_offsets,
    remove_small,
    table_view,
)
from .loader import import_cupy
from .stages import CudaStages

#: The stage kernels label_input runs (stateless: one for every call).
_STAGES = CudaStages()
#: Pixels of one part of a batch labeled with statistics: label offsets are 32-bit.
MAX_PART_PIXELS = 2**32 - 1
#: (shape, CuPy dtype) -> (array for the caller, its CuPy view).
Allocator = Callable[[tuple[int, ...], Any], tuple[Any, Any]]


def cupy_empty(shape: tuple[int, ...], dtype: Any) -> tuple[Any, Any]:
    """An Allocator of CuPy arrays (from CuPy's memory pool)."""
    array = import_cupy().empty(shape, dtype)
    return array, array


@dataclass
class DeviceTable:
    """The statistics of a labeled batch on the device: row r describes one kept
    component, images one after the other, labels in order within an image.

    Columns as in StatsTable (area, x, y, width, height int64; centroid_x,
    centroid_y, mean, min, max float64), each a device array of all rows of
    the batch; `offsets`: image i's rows are offsets[i]:offsets[i + 1] (a device
    array of N + 1 int64); `starts`, the same offsets on the host. A batch of
    volumes' table also has z, depth (int64) and centroid_z (float64), and its rows
    describe volumes; an image batch's has None there.
    """

    area: Any
    x: Any
    y: Any
    width: Any
    height: Any
    centroid_x: Any
    centroid_y: Any
    mean: Any
    min: Any
    max: Any
    offsets: Any
    starts: tuple[int, ...]
    integer_values: bool
    words: Any  # the CuPy (columns, >= rows) words behind the columns
    z: Any = None
    depth: Any = None
    centroid_z: Any = None
    #: K per image (volume) before area filtering, on the host (the host waited for it).
    components: tuple[int, ...] = ()

    def __len__(self) -> int:
        return self.starts[-1]

    @property
    def images(self) -> int:
        """How many images the table describes."""
        return len(self.starts) - 1

    def rows(self, image: int) -> slice:
        """The rows of image `image`."""
        return slice(self.starts[image], self.starts[image + 1])

    @property
    def is_volume(self) -> bool:
        """Whether the table describes volumes (with z, depth and centroid_z)."""
        return self.z is not None

    def to_numpy(self) -> list[StatsTable]:
        """One host StatsTable per image or volume (one copy from the device)."""
        words = self.words.get()
        view = volumes.table_view if self.is_volume else table_view
        table = view(words, len(self), self.integer_values)
        return [table.take(self.rows(i)).copy() for i in range(self.images)]


@dataclass
class _Part:
    """The table of consecutive images of a batch: its CuPy words (TABLE_COLUMNS, rows)
    and each image's first row, then the end, on the host."""

    words: Any
    starts: np.ndarray
    components: np.ndarray  # K per image before area filtering


def label_counts(values: Any, params: LabelParams, out: Any, counts: Any) -> bool:
    """Dense labels of the CuPy batch `values` (N, H, W) into `out` (contiguous u32,
    same shape) and K' per image into `counts` (contiguous u32 (N,)), on the current
    stream. Returns whether the host waited (only with min-area filtering)."""
    check_batch(values)
    values = contiguous(values)
    if values.size == 0:
        _memset_zero(counts)  # empty images leave no kernel to write them
        return False
    if params.min_area == 0 and not selects(params) and not params.fill_holes:
        _labels(values, params, out, counts)
        return False
    for lo, hi in _parts(values.shape):
        components, read = _labels(values[lo:hi], params, out[lo:hi])
        label_base = label_offsets(components)
        total = int(label_base[-1:].get()[0])
        agg = aggregate(read, out[lo:hi], label_base, total)
        kept = remove_small(out[lo:hi], params, label_base, agg)
        if params.fill_holes:
            filled_on_host(out[lo:hi], params)
        _copy(counts[lo:hi], components if kept is None else kept.counts)
    return True


def label_table(
    values: Any, params: LabelParams, out: Any, empty: Allocator = cupy_empty
) -> tuple[DeviceTable, Any]:
    """Dense labels of the CuPy batch `values` into `out` and their statistics on the
    device (module docstring: the host waits once or twice). Returns the DeviceTable
    (columns allocated with `empty`) and K' per image, a device u32 array (`empty`)."""
    check_batch(values)
    values = contiguous(values)
    floats = np.dtype(values.dtype).kind == "f"
    bounds = _parts(values.shape)
    if len(bounds) == 1:
        native, part = _part_table(values, params, out, floats, empty)
        starts, components = part.starts, part.components
    else:  # each part's table on its own, then copied into one
        parts = [_part_table(values[a:b], params, out[a:b], floats)[1] for a, b in bounds]
        native, starts = _joined(parts, TABLE_COLUMNS, empty)
        components = np.concatenate([part.components for part in parts])
    return _device_table(native, starts, floats, empty, components=components)


def _joined(parts: list[_Part], columns: int, empty: Allocator) -> tuple[Any, np.ndarray]:
    """The tables of consecutive parts of a batch copied into one (allocated with `empty`,
    `columns` rows of int64 words): the table and its starts."""
    starts = _joined_starts([part.starts for part in parts])
    native, words = empty((columns, int(starts[-1])), np.int64)
    position = 0
    for part in parts:
        size = int(part.starts[-1])
        for column in range(columns):
            _copy(words[column, position : position + size], part.words[column, :size])
        position += size
    return native, starts


def _device_table(
    native: Any,
    starts: np.ndarray,
    floats: bool,
    empty: Allocator,
    volume: bool = False,
    components: np.ndarray | None = None,
) -> tuple[DeviceTable, Any]:
    """The DeviceTable over a batch's table words `native` (stats_table's columns, or
    volumes.stats_table's), whose image (volume) i has rows starts[i]:starts[i + 1] and
    K `components[i]` before area filtering, and K' per image (volume), a device u32
    array; both allocated with `empty`."""
    rows = int(starts[-1])
    offsets_native, offsets = empty((len(starts),), np.int64)
    offsets.set(starts)
    counts_native, counts = empty((len(starts) - 1,), np.uint32)
    counts.set(np.diff(starts).astype(np.uint32))
    words = _cupy_words(native)
    starts_tuple = tuple(starts.tolist())
    ints = volumes.INT_COLUMNS if volume else 5  # an image's: area, x, y, width, height
    columns = [native[c, :rows] for c in range(ints)]
    columns += [_as_float64(native[c, :rows]) for c in range(ints, len(native))]
    known = tuple(int(k) for k in components) if components is not None else ()
    if not volume:
        table = DeviceTable(*columns, offsets_native, starts_tuple, not floats, words)  # type: ignore[call-arg]
        table.components = known
        return table, counts_native
    area, x, y, z, width, height, depth, centroid_x, centroid_y, centroid_z, *values = columns
    mean, low, high = values
    table = DeviceTable(
        area,
        x,
        y,
        width,
        height,
        centroid_x,
        centroid_y,
        mean,
        low,
        high,
        offsets_native,
        starts_tuple,
        not floats,
        words,
        z,
        depth,
        centroid_z,
        known,
    )
    return table, counts_native


def _part_table(
    values: Any, params: LabelParams, out: Any, floats: bool, empty: Allocator = cupy_empty
) -> tuple[Any, _Part]:
    """The statistics of a part of a batch (under MAX_PART_PIXELS), waiting for its
    counts: the table as allocated with `empty` (int64 words) and as a _Part."""
    n = values.shape[0]
    if values.size == 0:
        native, words = empty((TABLE_COLUMNS, 0), np.int64)
        return native, _Part(words.view(np.uint64), np.zeros(n + 1, np.int64), np.zeros(n, int))
    components, read = _labels(values, params, out)
    label_base = label_offsets(components)
    host_base = label_base.get().astype(np.int64)
    total = int(host_base[-1])
    native, words = empty((TABLE_COLUMNS, total), np.int64)
    words = words.view(np.uint64)
    _, kept = filtered_table(read, out, label_base, total, params, words)
    starts = host_base if kept is None else kept.base.get().astype(np.int64)
    return native, _Part(words, starts, np.diff(host_base))


def volume_counts(values: Any, params: LabelParams, out: Any, counts: Any) -> bool:
    """label_counts for the CuPy batch of volumes `values` (N, D, H, W): dense labels into
    `out`, K' per volume into `counts`. Returns whether the host waited: with area
    filtering (once per part), or for a volume labeled in slabs (slabs.py)."""
    values = contiguous_volumes(values)
    filtering = params.min_area > 0 or selects(params)
    waited = False
    for lo, hi, slabbed in _volume_parts(values, params):
        if slabbed:
            result = slabs.label_in_slabs(
                slabs.DeviceVolume(values[lo], out[lo]), params, False, _slabs_of(values, params)
            )
            counts[lo:hi].set(np.array([result.kept], np.uint32))
            waited = True
            continue
        image, label_params, read = label_input(values[lo:hi], params, import_cupy(), _STAGES)
        if not filtering:
            volumes.dense_labels(image, label_params, out[lo:hi], counts[lo:hi])
            continue
        components = volumes.dense_labels(image, label_params, out[lo:hi])
        label_base = label_offsets(components)
        total = int(label_base[-1:].get()[0])
        waited = True
        if total == 0:
            _copy(counts[lo:hi], components)
            continue
        agg = volumes.aggregate(read, out[lo:hi], label_base, volumes.empty_aggregates(total))
        kept = volumes.remove_small(out[lo:hi], params, label_base, agg[volumes.AREA])
        _copy(counts[lo:hi], kept.counts)
    return waited


def volume_table(
    values: Any, params: LabelParams, out: Any, empty: Allocator = cupy_empty
) -> tuple[DeviceTable, Any]:
    """label_table for the CuPy batch of volumes `values` (N, D, H, W): dense labels into
    `out` and their volume statistics on the device. The host waits for the number of
    labels of each part (and with area filtering the number kept), or for each slab of a
    volume labeled in slabs."""
    values = contiguous_volumes(values)
    floats = np.dtype(values.dtype).kind == "f"
    plan = _volume_parts(values, params)
    if len(plan) == 1 and not plan[0][2]:
        native, part = _volume_part_table(values, params, out, floats, empty)
        return _device_table(native, part.starts, floats, empty, True, part.components)
    parts = []
    for lo, hi, slabbed in plan:
        if slabbed:
            result = slabs.label_in_slabs(
                slabs.DeviceVolume(values[lo], out[lo]), params, True, _slabs_of(values, params)
            )
            starts = np.array([0, result.kept], np.int64)
            parts.append(_Part(result.table, starts, np.array([result.components])))
        else:
            parts.append(_volume_part_table(values[lo:hi], params, out[lo:hi], floats)[1])
    native, starts = _joined(parts, volumes.TABLE_COLUMNS, empty)
    components = np.concatenate([part.components for part in parts])
    return _device_table(native, starts, floats, empty, True, components)


def _volume_part_table(
    values: Any, params: LabelParams, out: Any, floats: bool, empty: Allocator = cupy_empty
) -> tuple[Any, _Part]:
    """The statistics of a part of a batch of volumes labeled in one piece, waiting for its
    counts: the table as allocated with `empty` (int64 words) and as a _Part."""
    image, label_params, read = label_input(values, params, import_cupy(), _STAGES)
    label_base = label_offsets(volumes.dense_labels(image, label_params, out))
    host_base = label_base.get().astype(np.int64)
    total = int(host_base[-1])
    native, words = empty((volumes.TABLE_COLUMNS, total), np.int64)
    words = words.view(np.uint64)
    agg = volumes.aggregate(read, out, label_base, volumes.empty_aggregates(total))
    kept = None
    if total and (params.min_area > 0 or selects(params)):
        kept = volumes.remove_small(out, params, label_base, agg[volumes.AREA])
    volumes.stats_table(agg, label_base, kept, floats, words)
    starts = host_base if kept is None else kept.base.get().astype(np.int64)
    return native, _Part(words, starts, np.diff(host_base))


def _volume_parts(values: Any, params: LabelParams) -> list[tuple[int, int, bool]]:
    """[lo, hi) runs of whole volumes labeled together, and whether the run is one volume
    labeled in slabs: each volume too large for one piece (volumes.fits_one_piece), or
    whose labeling does not fit the device budget (slabs.device_budget), alone in slabs;
    the others in runs of at most MAX_PART_PIXELS voxels that fit the budget."""
    n, depth, height, width = values.shape
    voxels = depth * height * width
    need = voxels * slabs.voxel_bytes(np.dtype(values.dtype), params, uploaded=False)
    budget = slabs.device_budget(values.device.id)
    if not volumes.fits_one_piece(values.shape, params) or need > budget:
        return [(i, i + 1, True) for i in range(n)]
    per_part = max(1, min(MAX_PART_PIXELS // voxels, budget // max(need, 1)))
    bounds = [*range(0, n, per_part), n]
    return [(lo, hi, False) for lo, hi in pairwise(bounds)]


def _slabs_of(values: Any, params: LabelParams) -> list[tuple[int, int]]:
    """The slabs of each volume of the batch `values` labeled on the device in slabs."""
    _, depth, height, width = values.shape
    per_voxel = slabs.voxel_bytes(np.dtype(values.dtype), params, uploaded=False)
    budget = slabs.device_budget(values.device.id)
    return slabs.plan_slabs(depth, height * width, per_voxel, budget, slabs.halo_planes(params))


def _labels(values: Any, params: LabelParams, out: Any, components: Any = None) -> Any:
    """Kernels 1-2 after the stages on a contiguous batch: K per image (device u32,
    into `components` where given) and the values the statistics read (label_input's)."""
    image, label_params, read = label_input(values, params, import_cupy(), _STAGES)
    return dense_labels(image, label_params, out, components), read


def _parts(shape: Sequence[int]) -> list[tuple[int, int]]:
    """[lo, hi) runs of whole images of at most MAX_PART_PIXELS each (at least one image)."""
    n, height, width = shape
    per_part = max(1, MAX_PART_PIXELS // max(1, height * width))
    bounds = [*range(0, n, per_part), n]
    return list(pairwise(bounds)) if n else [(0, 0)]


def _joined_starts(parts: list[np.ndarray]) -> np.ndarray:
    """The row offsets of consecutive parts' images as one array (N + 1)."""
    joined, shift = [np.zeros(1, np.int64)], 0
    for starts in parts:
        joined.append(starts[1:] + shift)
        shift += int(starts[-1])
    return np.concatenate(joined)


def _copy(target: Any, source: Any) -> None:
    """Copy the contiguous device array `source` into `target` on the current stream."""
    if source.nbytes:
        stream = import_cupy().cuda.get_current_stream()
        target.data.copy_from_device_async(source.data, source.nbytes, stream)


def _memset_zero(target: Any) -> None:
    if target.nbytes:
        target.data.memset_async(0, target.nbytes, import_cupy().cuda.get_current_stream())


def _cupy_words(native: Any) -> Any:
    """The u64 CuPy view of a table allocated as int64 (CuPy or PyTorch)."""
    if hasattr(native, "data_ptr"):
        from .frameworks import cupy_view

        native = cupy_view(native)
    return native.view(np.uint64)


def _as_float64(column: Any) -> Any:
    """An 8-byte column's bits read as float64 (CuPy and PyTorch alike)."""
    if hasattr(column, "data_ptr"):
        import torch

        return column.view(torch.float64)
    return column.view(np.float64)
