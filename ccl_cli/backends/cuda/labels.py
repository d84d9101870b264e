"""The host side of labeling on the device: dense raster-order labels (kernels 1-2) and the
statistics, min-area filtering and statistics table of a labeled batch (kernel stage 3).

These functions queue work on the current stream of the batch's device and
never wait for it. backend.py runs them on chunks of host batches and on
device arrays.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ...contract.cleaning import fill_holes, kept_components, selects
from ...contract.params import LabelParams
from ...contract.stats import StatsTable
from .arrays import elementwise, keep_area, rule_args
from .kernel_names import kernel_name
from .loader import (
    CHUNK,
    CHUNK_THREADS,
    GEOMETRY,
    KERNEL_SUFFIX,
    LAYOUT,
    device_kernels,
    import_cupy,
)

_B8_TILE = (GEOMETRY["GCCL_B8_TILE_W"], GEOMETRY["GCCL_B8_TILE_H"])  # pixels per CUDA block
_B8_THREADS = (GEOMETRY["GCCL_B8_TBW"], GEOMETRY["GCCL_B8_TBH"])
_PX_TILE = (GEOMETRY["GCCL_PX_TILE_W"], GEOMETRY["GCCL_PX_TILE_H"])  # one thread per pixel
_SCAN_THREADS = GEOMETRY["GCCL_SCAN_THREADS"]
#: Values one block of gccl_segmented_scan takes in one step (a tile of the batch-wide scan).
_SCAN_TILE = _SCAN_THREADS * GEOMETRY["GCCL_SCAN_ITEMS"]
_MAX_GRID = 2**31 - 1
_TABLE_BLOCKS = 4096  # the table kernels loop: enough blocks to fill any device
_MAX_IMAGE_PIXELS = 2**31 - 1  # labels and ranks share a u32 with a flag bit

# stats.cu fields (the area's index) and table columns.
_FIELDS = LAYOUT["GCCL_STATS_FIELDS"]
AREA = LAYOUT["GCCL_F_AREA"]
TABLE_COLUMNS = LAYOUT["GCCL_TABLE_COLUMNS"]


def dense_labels(values: Any, params: LabelParams, out: Any, components: Any = None) -> Any:
    """Kernels 1-2 only: dense raster-order labels of a contiguous CuPy batch into `out`.

    Returns the device array of K per image (`components`, a contiguous u32 (N,)
    array, where given). The benchmark times this alone.
    """
    check_batch(values)
    kernels = device_kernels(values.device.id)
    cupy = import_cupy()
    n, height, width = values.shape
    pixels = height * width
    labels = cupy.empty((n, pixels), cupy.uint32)
    rule = rule_args(params, np.dtype(values.dtype))
    suffix = KERNEL_SUFFIX[np.dtype(values.dtype)]
    storage = values.view(cupy.uint8) if values.dtype == np.bool_ else values
    geometry = (np.uint32(height), np.uint32(width))
    if params.tau is None and params.connectivity == 8:
        tile, threads, local = (
            _B8_TILE,
            _B8_THREADS,
            kernel_name("gccl_block8_local_{dtype}", dtype=suffix),
        )
        local_tau: tuple[Any, ...] = ()
    else:
        tile, threads = _PX_TILE, _PX_TILE
        local = kernel_name(
            "gccl_pixel_local_{connectivity}_{dtype}",
            connectivity=params.connectivity,
            dtype=suffix,
        )
        local_tau = tau_args(params)
    tiles_x, tiles_y = -(-width // tile[0]), -(-height // tile[1])
    tiles = (np.uint32(tiles_x), np.uint32(tiles_x * tiles_y))
    grid = n * tiles_x * tiles_y
    kernels.launch(local, grid, threads, (storage, labels, *geometry, *tiles, *rule, *local_tau))
    if tiles_x * tiles_y > 1:
        kernels.launch(
            kernel_name(
                "gccl_border_{connectivity}_{dtype}", connectivity=params.connectivity, dtype=suffix
            ),
            grid,
            (-(-(tile[0] + 2 * tile[1] - 1) // 32) * 32,),  # border.cu: one per border pixel
            (
                storage,
                labels,
                *geometry,
                np.uint32(tile[0]),
                np.uint32(tile[1]),
                *tiles,
                *tau_args(params),
            ),
        )
    chunks = -(-pixels // CHUNK)
    counts = cupy.empty(n * chunks, cupy.uint32)
    offsets = cupy.empty(n * chunks, cupy.uint32)
    if components is None:
        components = cupy.empty(n, cupy.uint32)
    chunk_args = (np.uint32(pixels), np.uint32(chunks))
    kernels.launch(
        kernel_name("gccl_finalize"), n * chunks, (CHUNK_THREADS,), (labels, *chunk_args, counts)
    )
    kernels.launch(
        kernel_name("gccl_segmented_scan"),
        n,
        (_SCAN_THREADS,),
        (counts, offsets, np.uint64(0), np.uint64(chunks), components),
    )
    kernels.launch(
        kernel_name("gccl_resolve"),
        n * chunks,
        (CHUNK_THREADS,),
        (labels, out, *chunk_args, offsets),
    )
    return components


def filtered_table(
    values: Any, out: Any, label_base: Any, total: int, params: LabelParams, table: Any = None
) -> tuple[Any, Kept | None]:
    """The statistics table of the labeled batch `out` (stats_table) after area filtering,
    which renumbers `out` (remove_small), and with --fill-holes after the holes are filled
    (filled_on_host, which waits for the device); and remove_small's result.
    label_base: label_offsets'; total: its last entry, on the host. table: as stats_table's
    (its first K' columns are written)."""
    floats = np.dtype(values.dtype).kind == "f"
    agg = aggregate(values, out, label_base, total)
    kept = remove_small(out, params, label_base, agg)
    if not params.fill_holes:
        return stats_table(agg, label_base, kept, floats, table), kept
    filled_on_host(out, params)
    base = label_base if kept is None else kept.base
    rows = total if kept is None else int(base[-1:].get()[0])
    filled = stats_table(aggregate(values, out, base, rows), base, None, floats)
    if table is None:
        return filled, kept
    stream = import_cupy().cuda.get_current_stream()
    for column in range(TABLE_COLUMNS):  # device copies (no kernel compiled at run time)
        if rows:
            table[column, :rows].data.copy_from_device_async(filled[column].data, rows * 8, stream)
    return table, kept


def filled_on_host(out: Any, params: LabelParams) -> None:
    """Fill the holes of each image of the labeled batch `out` (contract.cleaning.fill_holes):
    the labels go to the host (the call waits for the device), are filled there, and come
    back, so that both backends fill with the same code."""
    from ..cpu.labels import region_labels

    host = out.get()
    changed = [fill_holes(image, params, region_labels) for image in host]
    if any(changed):
        out.set(host)


def label_offsets(counts: Any) -> Any:
    """Each image's first row in the batch's statistics, then the total: an
    (N + 1,) device u32 array, scanned from a count per image (device u32: K
    from dense_labels, or the kept labels from remove_small)."""
    cupy = import_cupy()
    n = len(counts)
    label_base = cupy.empty(n + 1, cupy.uint32)
    scan_base = (counts, label_base, np.uint64(0), np.uint64(n), label_base[n:])
    device_kernels(counts.device.id).launch(
        kernel_name("gccl_segmented_scan"), 1, (_SCAN_THREADS,), scan_base
    )
    return label_base


def aggregate(values: Any, out: Any, label_base: Any, total: int) -> Any:
    """Per-label aggregates of a labeled batch: the (GCCL_STATS_FIELDS, total)
    device u64 array of stats.cu. label_base: label_offsets'; total: its last
    entry, on the host (it sizes the aggregates)."""
    cupy = import_cupy()
    n, height, width = values.shape
    dtype = np.dtype(values.dtype)
    kernels = device_kernels(values.device.id)
    agg = cupy.empty((_FIELDS, total), cupy.uint64)
    if total == 0:
        return agg
    init_grid = min(-(-total // CHUNK_THREADS), 4096)
    kernels.launch(
        kernel_name("gccl_stats_init"), init_grid, (CHUNK_THREADS,), (agg, np.uint64(total))
    )
    chunks = -(-(height * width) // CHUNK)
    storage = values.view(cupy.uint8) if dtype == np.bool_ else values
    geometry = (np.uint32(height), np.uint32(width), np.uint32(chunks))
    stats_args = (out, storage, *geometry, label_base, agg, np.uint64(total))
    grid = n * chunks
    kernels.launch(
        kernel_name("gccl_stats_{dtype}", dtype=KERNEL_SUFFIX[dtype]),
        grid,
        (CHUNK_THREADS,),
        stats_args,
    )
    if dtype.kind == "f":
        kernels.launch(
            kernel_name("gccl_float_sum_{dtype}", dtype=KERNEL_SUFFIX[dtype]),
            grid,
            (CHUNK_THREADS,),
            stats_args,
        )
    return agg


class Kept(NamedTuple):
    """What min-area filtering (remove_small) leaves, on the device: whether each
    label stays (u32 0/1), its rank among its image's kept labels, the kept
    labels' offsets per image (label_offsets of `counts`) and K' per image."""

    keep: Any
    rank: Any
    base: Any
    counts: Any


def remove_small(out: Any, params: LabelParams, label_base: Any, agg: Any) -> Kept | None:
    """Area filtering (--min-area, --max-area, --largest): `out`'s labels kept renumbered
    1..K' per image in label order, the others 0 (area_filter.cu). None when nothing is
    filtered. With --largest the areas go to the host (the call waits for the device),
    which picks with the contract's rule (contract.cleaning.kept_components)."""
    total = agg.shape[1]
    if (params.min_area == 0 and not selects(params)) or total == 0:
        return None
    n, height, width = out.shape
    keep, rank, counts = kept_ranks(params, label_base, agg[AREA])
    pixels, chunks = height * width, -(-(height * width) // CHUNK)
    remap_args = (out, np.uint32(pixels), np.uint32(chunks), label_base, keep, rank)
    kernels = device_kernels(out.device.id)
    kernels.launch(kernel_name("gccl_area_remap"), n * chunks, (CHUNK_THREADS,), remap_args)
    return Kept(keep, rank, label_offsets(counts), counts)


def kept_ranks(params: LabelParams, label_base: Any, area: Any) -> tuple[Any, Any, Any]:
    """Area filtering's choice (--min-area, --max-area, --largest) over the labels of a
    batch whose areas (device u64, one per label) are `area`: whether each label stays
    (u32 0/1), its rank among its image's kept labels, and the kept labels per image
    (device u32 arrays). With --largest the areas go to the host (the call waits for the
    device), which picks with the contract's rule (contract.cleaning.kept_components)."""
    cupy = import_cupy()
    total, n = len(area), len(label_base) - 1
    # keep padded with 0 to whole tiles of the scan, which reads tiles whole
    tiles = max(1, -(-total // _SCAN_TILE))
    if params.largest is None:
        keep = cupy.zeros(tiles * _SCAN_TILE, cupy.uint32)
        keep_area(area, params.min_area, params.max_area, keep)
    else:
        starts = label_base.get().astype(np.int64)
        chosen = np.zeros(tiles * _SCAN_TILE, np.uint32)
        chosen[:total] = kept_components(area.get().astype(np.int64), starts, params)
        keep = cupy.asarray(chosen)
    # One scan over the whole batch in two levels (an image may hold millions of labels):
    # within tiles, then over the tiles; then each label's rank in its own image and the kept
    # labels per image (area_filter.cu). Every kernel comes from the fatbin.
    local = cupy.empty(tiles * _SCAN_TILE, cupy.uint32)
    tile_sums = cupy.empty(tiles, cupy.uint32)
    kernels = device_kernels(area.device.id)
    scan_args = (keep, local, np.uint64(0), np.uint64(_SCAN_TILE), tile_sums)
    kernels.launch(kernel_name("gccl_segmented_scan"), tiles, (_SCAN_THREADS,), scan_args)
    tile_base = label_offsets(tile_sums)
    rank = cupy.empty(total, cupy.uint32)
    counts = cupy.empty(n, cupy.uint32)
    tiling = (local, tile_base, np.uint64(_SCAN_TILE), np.uint64(tiles))
    rank_args = (*tiling, label_base, np.uint32(n), rank, counts, np.uint64(total))
    elementwise(area, kernel_name("gccl_kept_ranks"), rank_args, max(total, n))
    keep = keep[:total]
    return keep, rank, counts


def stats_table(
    agg: Any, label_base: Any, kept: Kept | None, floats: bool, table: Any = None
) -> Any:
    """The kept labels' statistics table from the aggregates (stats.cu's
    gccl_stats_table): a (TABLE_COLUMNS, total) device u64 array whose first
    K' columns are the kept labels' rows, image after image (_table_view reads it).

    kept: remove_small's result (None: every label is kept); floats: whether
    the values are floating point (their mean rule differs); table: a contiguous
    (TABLE_COLUMNS, total) 8-byte array to write (None: a new one).
    """
    return table_kernel(
        kernel_name("gccl_stats_table"), TABLE_COLUMNS, agg, label_base, kept, floats, table
    )


def table_kernel(
    kernel: str,
    columns: int,
    agg: Any,
    label_base: Any,
    kept: Kept | None,
    floats: bool,
    table: Any = None,
) -> Any:
    """Run a table kernel of the aggregates (gccl_stats_table for images,
    gccl_volume_stats_table for volumes: the same arguments) into `table`, a contiguous
    (columns, total) 8-byte array (None: a new one), and return it."""
    cupy = import_cupy()
    total = agg.shape[1]
    if table is None:
        table = cupy.empty((columns, total), cupy.uint64)
    if total:
        null = np.uint64(0)
        keep, rank, kept_base = (kept.keep, kept.rank, kept.base) if kept else (null, null, null)
        pieces = np.uint32(len(label_base) - 1)  # images or volumes
        args = (agg, np.uint64(total), keep, rank, label_base, kept_base, pieces, np.int32(floats))
        grid = min(-(-total // CHUNK_THREADS), _TABLE_BLOCKS)
        device_kernels(agg.device.id).launch(kernel, grid, (CHUNK_THREADS,), (*args, table))
    return table


def table_view(words: np.ndarray, rows: int, integer: bool) -> StatsTable:
    """A StatsTable whose columns are views of the first `rows` rows of
    stats_table's words, copied to the host (no copy, no arithmetic)."""
    area, x, y, width, height = (words[c, :rows].view(np.int64) for c in range(5))
    centroid_x, centroid_y, mean, low, high = (
        words[c, :rows].view(np.float64) for c in range(5, TABLE_COLUMNS)
    )
    return StatsTable(area, x, y, width, height, centroid_x, centroid_y, mean, low, high, integer)


def tau_args(params: LabelParams) -> tuple[Any, ...]:
    """(use_tau, tau, relative, quadratic) kernel arguments (GCCL_TAU_PARAMS)."""
    if params.tau is None:
        return (np.int32(0), np.float64(0.0), np.float64(0.0), np.float64(0.0))
    return (
        np.int32(1),
        np.float64(params.tau),
        np.float64(params.tau_relative),
        np.float64(params.tau_quadratic),
    )


def check_batch(values: Any) -> None:
    """Reject what the kernels cannot take, with a one-line reason."""
    if values.ndim != 3:
        raise ValueError(f"a batch is (N, H, W), got shape {values.shape}")
    if np.dtype(values.dtype) not in KERNEL_SUFFIX:
        raise ValueError(f"unsupported dtype {values.dtype}")
    n, height, width = values.shape
    if height * width > _MAX_IMAGE_PIXELS:
        raise ValueError(f"an image may hold at most 2**31 - 1 pixels, got {height}x{width}")
    tiles = -(-width // _PX_TILE[0]) * -(-height // _PX_TILE[1])
    if n * max(tiles, -(-(height * width) // CHUNK)) > _MAX_GRID:
        raise ValueError(f"batch of {n} images too large for one launch; split it")
