"""The host side of labeling volumes on the device: dense raster-order labels of a batch of
volumes (N, D, H, W) in one set of launches, their statistics, area filtering and
statistics table (src/volume_local.cu, volume_border.cu, volume_cells.cu, relabel.cu,
volume_stats.cu, volume_slabs.cu).

1. Local union-find per tile voxel by voxel (gccl_volume_local_*), then the edges that
   leave the tiles (gccl_volume_border_*).
2. Dense labels per volume: relabel.cu's finalize, scan and resolve, which work on a
   volume as on an image of D x H x W pixels.
   Binary volumes do 1-2 on cells instead (src/volume_cells.cu: 2x2x2 blocks for 26,
   1x2x2 for 18, 1x1x2 for 6; the local phase, the joins between tiles, the roots' ranks
   by voxel row, a scan of the counts of groups of rows, every voxel's label).
3. Statistics (gccl_volume_stats_*, exact 128-bit sums of values), area filtering
   (labels.kept_ranks and gccl_volume_remap) and the volume table (gccl_volume_stats_table).

Each volume here fits one piece (fits_one_piece: fewer than 2**31 voxels in tau mode, whose
voxel indexes, labels and ranks share a u32 with a flag bit; up to about 2**32 binary, whose
cells are two voxels wide); a larger one is labeled in slabs of planes (slabs.py), whose steps
use the 64-bit statistics and remap kernels here on each slab. These functions queue work on
the current stream and never wait, except where they say so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...contract.params import VOLUME_CONNECTIVITIES, LabelParams
from ...contract.stats import StatsTable
from .arrays import elementwise, rule_args
from .kernel_names import kernel_name
from .labels import Kept, kept_ranks, label_offsets, table_kernel, tau_args
from .loader import (
    CHUNK,
    CHUNK_THREADS,
    GEOMETRY,
    KERNEL_SUFFIX,
    LAYOUT,
    device_kernels,
    import_cupy,
)

# Tiles of the local phase (voxels) and the CUDA blocks that label them (threads x, y, z).
_VOXEL_TILE = (GEOMETRY["GCCL_VX_TILE_W"], GEOMETRY["GCCL_VX_TILE_H"], GEOMETRY["GCCL_VX_TILE_D"])
#: Binary volumes' cells (volume_cells.cu) per connectivity: voxels deep and high (2 wide).
_CELLS = {
    conn: (GEOMETRY[f"GCCL_CELL_D_{conn}"], GEOMETRY[f"GCCL_CELL_H_{conn}"])
    for conn in VOLUME_CONNECTIVITIES
}
_CELL_THREADS = (GEOMETRY["GCCL_CELL_TBW"], GEOMETRY["GCCL_CELL_TBH"], GEOMETRY["GCCL_CELL_TBD"])
_ROW_WARPS = GEOMETRY["GCCL_CELL_ROW_WARPS"]
_BORDER_THREADS = GEOMETRY["GCCL_VOLUME_BORDER_THREADS"]
_SCAN_THREADS = GEOMETRY["GCCL_SCAN_THREADS"]
#: Voxels of a slab, and of a tau-mode volume labeled in one piece: voxel indexes, labels and
#: ranks share a u32 with a flag bit.
MAX_VOLUME_VOXELS = 2**31 - 1
#: Voxel rows times cells across of a binary volume labeled in one piece: its cells are two
#: voxels wide, and their forest's indexes and first-voxel keys share a u32 with a flag bit
#: (volume_cells.cu), which takes volumes of up to 2**32 voxels.
_MAX_CELL_KEYS = 2**31 - 1
_MAX_GRID = 2**31 - 1
_INIT_BLOCKS = 4096  # gccl_volume_stats_init loops: enough blocks to fill any device

# volume_stats.cu's aggregate rows (their count, the voxels' and the largest |v|'s) and
# table columns.
FIELDS = LAYOUT["GCCL_V_FIELDS"]
AREA = LAYOUT["GCCL_V_AREA"]
ABSMAX = LAYOUT["GCCL_V_ABSMAX"]
TABLE_COLUMNS = LAYOUT["GCCL_VOLUME_TABLE_COLUMNS"]
#: The table's int64 columns, which come first (area, x, y, z, width, height, depth).
INT_COLUMNS = LAYOUT["GCCL_VOLUME_TABLE_INTS"]


def fits_one_piece(shape: tuple[int, ...], params: LabelParams) -> bool:
    """Whether a volume of `shape` (.., D, H, W) can be labeled in one piece with `params`
    (else it goes in slabs): under 2**31 voxels in tau mode, about 2**32 binary."""
    depth, height, width = shape[-3:]
    if params.tau is None:
        return depth * height * -(-width // 2) <= _MAX_CELL_KEYS
    return depth * height * width <= MAX_VOLUME_VOXELS


def check_volumes(values: Any, params: LabelParams) -> None:
    """Reject what the kernels of this module cannot take, with a one-line reason."""
    if values.ndim != 4:
        raise ValueError(f"a batch of volumes is (N, D, H, W), got shape {values.shape}")
    if np.dtype(values.dtype) not in KERNEL_SUFFIX:
        raise ValueError(f"unsupported dtype {values.dtype}")
    n, depth, height, width = values.shape
    voxels = depth * height * width
    if not fits_one_piece(values.shape, params):
        limit = "2**31 - 1 voxels" if params.tau is not None else "about 2**32 voxels"
        raise ValueError(
            f"a volume labeled in one piece holds at most {limit}, got "
            f"{depth}x{height}x{width} (larger ones go in slabs)"
        )
    if n * max(_tiles(values.shape, _VOXEL_TILE)[3], -(-voxels // CHUNK)) > _MAX_GRID:
        raise ValueError(f"batch of {n} volumes too large for one launch; split it")


def _tiles(shape: tuple[int, ...], tile: tuple[int, int, int]) -> tuple[int, int, int, int]:
    """Tiles across, down and deep of a volume of `shape` (.., D, H, W), and per volume."""
    depth, height, width = shape[-3:]
    across, down, deep = -(-width // tile[0]), -(-height // tile[1]), -(-depth // tile[2])
    return across, down, deep, across * down * deep


def dense_labels(values: Any, params: LabelParams, out: Any, components: Any = None) -> Any:
    """Dense raster-order labels of a contiguous CuPy batch of volumes (N, D, H, W) into
    `out` (contiguous u32, same shape): steps 1-2 of the module docstring. Returns K per
    volume, a device u32 (N,) array (`components` where given)."""
    check_volumes(values, params)
    dtype = np.dtype(values.dtype)
    storage = values.view(import_cupy().uint8) if dtype == np.bool_ else values
    rule = rule_args(params, dtype)  # the values' own dtype: --invert subtracts from its max
    if params.tau is None:
        return _cell_labels(storage, rule, params.connectivity, out, components)
    cupy = import_cupy()
    kernels = device_kernels(values.device.id)
    n, depth, height, width = values.shape
    labels = cupy.empty((n, depth * height * width), cupy.uint32)
    suffix = KERNEL_SUFFIX[dtype]
    geometry = (np.uint32(depth), np.uint32(height), np.uint32(width))
    across, down, _, per_volume = _tiles(values.shape, _VOXEL_TILE)
    tiles = (np.uint32(across), np.uint32(down), np.uint32(per_volume))
    grid = n * per_volume
    local = kernel_name(
        "gccl_volume_local_{connectivity}_{dtype}", connectivity=params.connectivity, dtype=suffix
    )
    local_args = (storage, labels, *geometry, *tiles, *rule, *tau_args(params))
    kernels.launch(local, grid, _VOXEL_TILE, local_args)  # one thread per voxel
    if per_volume > 1:
        tile_args = tuple(np.uint32(side) for side in _VOXEL_TILE)
        border_args = (storage, labels, *geometry, *tile_args, *tiles, *tau_args(params))
        name = kernel_name(
            "gccl_volume_border_{connectivity}_{dtype}",
            connectivity=params.connectivity,
            dtype=suffix,
        )
        kernels.launch(name, grid, (_BORDER_THREADS,), border_args)
    return resolve(labels, out, components)


def _cell_labels(values: Any, rule: tuple[Any, ...], conn: int, out: Any, components: Any) -> Any:
    """dense_labels of binary volumes, on cells (src/volume_cells.cu): `values` as the
    kernels read them (booleans as uint8), `rule` the foreground rule of the values'
    dtype."""
    cupy = import_cupy()
    kernels = device_kernels(values.device.id)
    n, depth, height, width = values.shape
    cell_d, cell_h = _CELLS[conn]
    grid_d, grid_h = -(-depth // cell_d), -(-height // cell_h)
    cells = grid_d * grid_h * -(-width // 2)
    forest = cupy.empty((n, cells), cupy.uint32)
    masks = cupy.empty((n, cells), cupy.uint8)
    geometry = (np.uint32(depth), np.uint32(height), np.uint32(width))
    tile = (2 * _CELL_THREADS[0], cell_h * _CELL_THREADS[1], cell_d * _CELL_THREADS[2])
    across, down, _, per_volume = _tiles(values.shape, tile)
    tiles = (np.uint32(across), np.uint32(down), np.uint32(per_volume))
    suffix = KERNEL_SUFFIX[np.dtype(values.dtype)]
    local_args = (values, forest, masks, *geometry, *tiles, *rule)
    local = kernel_name(
        "gccl_volume_cells_local_{connectivity}_{dtype}", connectivity=conn, dtype=suffix
    )
    kernels.launch(local, n * per_volume, _CELL_THREADS, local_args)
    if per_volume > 1:
        border_args = (masks, forest, *geometry, *tiles)
        name = kernel_name("gccl_volume_cells_border_{connectivity}", connectivity=conn)
        kernels.launch(name, n * per_volume, (_BORDER_THREADS,), border_args)
    per_plane = -(-grid_h // _ROW_WARPS)  # groups of cell rows, a CUDA block each
    runs = cell_d * grid_d * per_plane  # per volume: a run of voxel rows per group and vz
    row_starts = cupy.empty(n * cell_d * cell_h * grid_d * grid_h, cupy.uint32)
    counts = cupy.empty(n * runs, cupy.uint32)
    offsets = cupy.empty(n * runs, cupy.uint32)
    if components is None:
        components = cupy.empty(n, cupy.uint32)
    grid, row_threads = n * grid_d * per_plane, (_ROW_WARPS * 32,)
    group_args = (*geometry, np.uint32(per_plane), row_starts)
    roots_args = (forest, masks, *group_args, counts)
    kernels.launch(
        kernel_name("gccl_volume_cells_roots_{connectivity}", connectivity=conn),
        grid,
        row_threads,
        roots_args,
    )
    scan_args = (counts, offsets, np.uint64(0), np.uint64(runs), components)
    kernels.launch(kernel_name("gccl_segmented_scan"), n, (_SCAN_THREADS,), scan_args)
    resolve_args = (forest, masks, out, *group_args, offsets)
    kernels.launch(
        kernel_name("gccl_volume_cells_resolve_{connectivity}", connectivity=conn),
        grid,
        row_threads,
        resolve_args,
    )
    return components


def resolve(labels: Any, out: Any, components: Any = None) -> Any:
    """Dense labels from union-find labels: `labels` (N, P) u32, each row a forest whose
    roots are their sets' smallest indices (GCCL_BACKGROUND off the sets), numbered 1..K
    per row in index order into `out` (N, P) (relabel.cu's finalize, scan and resolve; the
    finalize flags `labels`' roots). Returns K per row, a device u32 (N,) array
    (`components` where given)."""
    cupy = import_cupy()
    kernels = device_kernels(labels.device.id)
    n, size = labels.shape[0], int(np.prod(labels.shape[1:], dtype=np.int64))
    chunks = -(-size // CHUNK)
    counts = cupy.empty(n * chunks, cupy.uint32)
    offsets = cupy.empty(n * chunks, cupy.uint32)
    if components is None:
        components = cupy.empty(n, cupy.uint32)
    chunk_args = (np.uint32(size), np.uint32(chunks))
    kernels.launch(
        kernel_name("gccl_finalize"), n * chunks, (CHUNK_THREADS,), (labels, *chunk_args, counts)
    )
    scan_args = (counts, offsets, np.uint64(0), np.uint64(chunks), components)
    kernels.launch(kernel_name("gccl_segmented_scan"), n, (_SCAN_THREADS,), scan_args)
    kernels.launch(
        kernel_name("gccl_resolve"),
        n * chunks,
        (CHUNK_THREADS,),
        (labels, out, *chunk_args, offsets),
    )
    return components


def empty_aggregates(total: int) -> Any:
    """Aggregates of `total` labels before any voxel: the (FIELDS, total) device u64 array
    of volume_stats.cu at its identities (gccl_volume_stats_init), on the current device."""
    cupy = import_cupy()
    agg = cupy.empty((FIELDS, total), cupy.uint64)
    if total:
        init_grid = min(-(-total // CHUNK_THREADS), _INIT_BLOCKS)
        device_kernels(agg.device.id).launch(
            kernel_name("gccl_volume_stats_init"),
            init_grid,
            (CHUNK_THREADS,),
            (agg, np.uint64(total)),
        )
    return agg


def aggregate(
    values: Any,
    labels: Any,
    label_base: Any,
    agg: Any,
    first_plane: int = 0,
    sizes: Any = None,
) -> Any:
    """Add the per-label aggregates of the labeled volumes `labels` (N, D, H, W), read from
    `values`, into `agg` (empty_aggregates' (FIELDS, total) array, total = label_base's last
    entry) and return it. first_plane: the z of the labels' first plane (a slab of a larger
    volume). sizes: where float volumes' mean shifts come from, an array like agg whose AREA
    and ABSMAX rows are complete (None: agg itself, which then must hold these labels'
    voxels alone)."""
    total = agg.shape[1]
    if total == 0:
        return agg
    cupy = import_cupy()
    n, depth, height, width = labels.shape
    dtype = np.dtype(values.dtype)
    chunks = -(-(depth * height * width) // CHUNK)
    storage = values.view(cupy.uint8) if dtype == np.bool_ else values
    geometry = (np.uint32(depth), np.uint32(height), np.uint32(width), np.uint32(first_plane))
    source = agg if sizes is None else sizes
    args = (labels, storage, *geometry, np.uint32(chunks), label_base, agg, np.uint64(total))
    shifts = (source, np.uint64(source.shape[1]))
    suffix = KERNEL_SUFFIX[dtype]
    kernels = device_kernels(labels.device.id)
    kernels.launch(
        kernel_name("gccl_volume_stats_{dtype}", dtype=suffix),
        n * chunks,
        (CHUNK_THREADS,),
        (*args, *shifts),
    )
    if dtype.kind == "f":
        name = kernel_name("gccl_volume_float_sum_{dtype}", dtype=suffix)
        kernels.launch(name, n * chunks, (CHUNK_THREADS,), (*args, *shifts))
    return agg


def remap(labels: Any, table: Any, table_base: Any = None) -> None:
    """Label l of volume v of `labels` (N, D, H, W) becomes table[table_base[v] + l - 1]
    (table_base None: table[l - 1]); 0 stays 0 (gccl_volume_remap)."""
    n = labels.shape[0]
    voxels = int(np.prod(labels.shape[1:], dtype=np.int64))
    chunks = -(-voxels // CHUNK)
    base = np.uint64(0) if table_base is None else table_base
    args = (labels, np.uint64(voxels), np.uint32(chunks), table, base)
    device_kernels(labels.device.id).launch(
        kernel_name("gccl_volume_remap"), n * chunks, (CHUNK_THREADS,), args
    )


def kept_labels(keep: Any, rank: Any) -> Any:
    """The label each label keeps after area filtering (its kept rank + 1, or 0): a device
    u32 array (gccl_kept_labels)."""
    count = len(keep)
    out = import_cupy().empty(count, np.uint32)
    elementwise(keep, kernel_name("gccl_kept_labels"), (keep, rank, out, np.uint64(count)), count)
    return out


def remove_small(labels: Any, params: LabelParams, label_base: Any, area: Any) -> Kept:
    """Area filtering of the labeled volumes `labels` whose labels have voxels `area`
    (device u64, one per label of the batch): the kept labels renumbered 1..K' per volume
    in label order, the others 0 (labels.kept_ranks's choice, which waits for the device
    with --largest)."""
    keep, rank, counts = kept_ranks(params, label_base, area)
    remap(labels, kept_labels(keep, rank), label_base)
    return Kept(keep, rank, label_offsets(counts), counts)


def stats_table(
    agg: Any, label_base: Any, kept: Kept | None, floats: bool, table: Any = None
) -> Any:
    """The kept labels' volume statistics table from the aggregates
    (gccl_volume_stats_table): a (TABLE_COLUMNS, total) device u64 array whose first K'
    columns are the kept labels' rows, volume after volume (table_view reads it).

    kept: remove_small's result (None: every label is kept); floats: whether the values
    are floating point; table: a contiguous (TABLE_COLUMNS, total) 8-byte array to write
    (None: a new one).
    """
    return table_kernel(
        kernel_name("gccl_volume_stats_table"), TABLE_COLUMNS, agg, label_base, kept, floats, table
    )


def table_view(words: np.ndarray, rows: int, integer: bool) -> StatsTable:
    """A volume StatsTable whose columns are views of the first `rows` rows of
    stats_table's words, copied to the host (no copy, no arithmetic)."""
    area, x, y, z, width, height, depth = (
        words[c, :rows].view(np.int64) for c in range(INT_COLUMNS)
    )
    centroid_x, centroid_y, centroid_z, mean, low, high = (
        words[c, :rows].view(np.float64) for c in range(INT_COLUMNS, TABLE_COLUMNS)
    )
    table = StatsTable(area, x, y, width, height, centroid_x, centroid_y, mean, low, high, integer)
    table.z, table.depth, table.centroid_z = z, depth, centroid_z
    return table
