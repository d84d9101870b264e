"""One chunk on a worker: its pieces (the components of the chunk labeled alone) and what
of them leaves the worker.

A piece is named by its key, the global raster index (z * H * W + y * W + x) of its first
voxel. A chunk is a box, so its own raster order is the global one restricted to it: the
chunk's labels 1..k (gccl's engine numbers them in raster order of first voxels) are its
pieces in key order, and a piece's first voxel in the chunk is its first in the volume.

What leaves the worker: the six boundary planes of keys (and values, in tau mode) where a
neighbouring chunk lies (`Faces`), and the partial statistics of the pieces on them
(`Partials` of the face pieces); the interior pieces' partials stay in the `Summary`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backends.base import cuda_index, usable_cores
from ..backends.cpu.labels import threads_at_most
from ..contract.params import SUPPORTED_DTYPES
from ..native import gccl_cpu
from .geometry import Chunk, Grid

#: Face planes by (axis, side): side 0 is the chunk's low plane along the axis, 1 its high.
FacePlanes = dict[tuple[int, int], np.ndarray]


@dataclass
class Partials:
    """Partial statistics of pieces (one row each), in global coordinates, summed exactly.

    key: first voxel's global raster index; area: voxels; low, high: (z, y, x) bounding
    box, high exclusive; sums: (z, y, x) coordinate sums (int64, exact); value_sum: int64
    sum of the values (integer dtypes, exact) or the piece's own mean times its area
    (floats); mean: the piece's mean as labeled alone; v_min, v_max: extremes (float64).
    """

    key: np.ndarray
    area: np.ndarray
    low: np.ndarray
    high: np.ndarray
    sums: np.ndarray
    value_sum: np.ndarray
    mean: np.ndarray
    v_min: np.ndarray
    v_max: np.ndarray

    def take(self, rows: Any) -> Partials:
        """The rows `rows` (indices or a boolean mask)."""
        return Partials(**{name: getattr(self, name)[rows] for name in _FIELDS})

    def __len__(self) -> int:
        return int(self.key.shape[0])


_FIELDS = ("key", "area", "low", "high", "sums", "value_sum", "mean", "v_min", "v_max")


def empty_partials() -> Partials:
    """Partials of no piece."""
    rows = {
        name: np.zeros((0, 3) if name in ("low", "high", "sums") else 0, np.int64)
        for name in _FIELDS
    }
    return Partials(**rows)


def concat_partials(parts: list[Partials]) -> Partials:
    """The rows of `parts`, one after the other."""
    return Partials(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in _FIELDS})


@dataclass
class Faces:
    """The boundary planes of a chunk that border another chunk: keys + 1 of the pieces
    there (0: not foreground, int64) and, in tau mode, the values."""

    keys: FacePlanes
    values: FacePlanes


@dataclass
class Summary:
    """What stays on the worker of one chunk: every piece's partials, and which are on a
    face (a plane bordering another chunk)."""

    pieces: Partials
    on_face: np.ndarray


@dataclass(frozen=True)
class ChunkLabeler:
    """Labels one chunk alone with gccl's engine through the public API (`label` is
    ccl_cli.label, handed in by the caller: the API leads here, not the other way), with
    `options` but the area filters, which act on whole components. `chunks`: how many
    chunks the volume has (at most so many tasks label at once; 0: not known).

    With device "cuda" or "cuda:N" (a GPU worker) the chunk's values go up to the device
    and its labels stay there (a CuPy array): what the task needs of them (the face
    planes, each label's first voxel, the labels mapped to final ones) is taken there and
    only that comes back. Elsewhere, and for values the API narrows or byte-swaps on the
    host first (int64, float16, big-endian), the labels are a numpy array."""

    label: Callable[..., tuple[Any, Any]]
    options: dict[str, Any]
    chunks: int = 0

    def __call__(self, values: np.ndarray, stats: bool) -> tuple[Any, Any]:
        """(labels, [StatsTable]) with stats, else (labels, count)."""
        every = {**self.options, "min_area": 0, "max_area": None, "largest": None}
        device = str(self.options.get("device", "auto"))
        if device.startswith("cuda") and values.dtype in SUPPORTED_DTYPES:
            from ..backends.cuda.loader import import_cupy

            cupy = import_cupy()
            with cupy.cuda.Device(cuda_index(device)):
                labels, tables = self.label(cupy.asarray(values), stats=stats, **every)
            return labels, tables.to_numpy() if stats else tables
        with threads_at_most(task_threads(self.chunks)):
            return self.label(values, stats=stats, **every)


def task_threads(chunks: int = 0) -> int:
    """The CPU engine's threads for one of the tasks that label a volume's `chunks` chunks.
    Dask runs a task on each of its threads at once and counts each thread as a core, so a
    task takes the cores over the threads that run tasks beside it: on a distributed
    worker, its process's cores over the worker's threads, and at most OMP_NUM_THREADS where
    that is set (a nanny sets it to 1 in each worker process it starts: several workers
    share the machine's cores); in dask's local threads, the cores over as many of them as
    there are chunks; in its synchronous scheduler, every core."""
    import dask

    cores = usable_cores()
    worker = _distributed_worker()
    if worker is not None:
        share = cores // max(1, worker.state.nthreads)
        limit = os.environ.get("OMP_NUM_THREADS", "")
        if limit.isdigit() and int(limit) > 0:
            share = min(share, int(limit))
        return max(1, share)
    if dask.config.get("scheduler", None) in ("sync", "synchronous", "single-threaded"):
        return cores
    threads = int(dask.config.get("num_workers", None) or dask.system.CPU_COUNT)
    return max(1, cores // max(1, min(threads, chunks or threads)))


def _distributed_worker() -> Any:
    """The distributed worker running this task, or None (not on one)."""
    distributed = sys.modules.get("distributed")  # (a task on a worker has it imported)
    if distributed is None:
        return None
    try:
        return distributed.get_worker()
    except ValueError:
        return None


def summarize(
    values: np.ndarray, chunk: Chunk, labeler: ChunkLabeler, tau: bool
) -> tuple[Summary, Faces]:
    """Label one chunk; its pieces' partials and its face planes."""
    if values.shape != chunk.shape:
        raise ValueError(f"chunk {chunk.index}: read {values.shape}, expected {chunk.shape}")
    labels, tables = labeler(values, stats=True)
    table = tables[0]
    pieces = _partials(labels, values, table, chunk)
    keys_of = np.concatenate(([0], pieces.key + 1))
    keys: FacePlanes = {}
    face_values: FacePlanes = {}
    on_face = np.zeros(len(pieces) + 1, bool)
    for axis, side in chunk.bordered_faces():
        where = _plane(axis, side)
        plane = on_host(labels[where])
        on_face[plane] = True
        keys[axis, side] = keys_of[plane]
        if tau:
            face_values[axis, side] = np.ascontiguousarray(values[where])
    return Summary(pieces, on_face[1:]), Faces(keys, face_values)


def summarize_block(
    values: np.ndarray,
    grid: Grid,
    labeler: ChunkLabeler,
    tau: bool,
    *,
    block_id: tuple[int, int, int],
) -> tuple[Summary, Faces]:
    """summarize of the chunk `block_id` of `grid` (dask's map_blocks names the block)."""
    return summarize(values, grid[block_id], labeler, tau)


def _plane(axis: int, side: int) -> tuple[Any, ...]:
    """The index of a chunk's low (side 0) or high (side 1) plane along `axis`."""
    where: list[Any] = [slice(None)] * 3
    where[axis] = 0 if side == 0 else -1
    return tuple(where)


def _partials(labels: Any, values: np.ndarray, table: Any, chunk: Chunk) -> Partials:
    """The partials of the chunk's pieces from its labels and its statistics table."""
    count = len(table)
    area = table.area.astype(np.int64)
    origin = np.array(chunk.origin, np.int64)
    first = _first_voxels(labels, count)
    local = np.stack(np.unravel_index(first, chunk.shape), axis=1).astype(np.int64)
    key = np.ravel_multi_index(tuple((local + origin).T), chunk.volume_shape).astype(np.int64)
    low = np.stack([table.z, table.y, table.x], axis=1).astype(np.int64)
    size = np.stack([table.depth, table.height, table.width], axis=1).astype(np.int64)
    centroid = np.stack([table.centroid_z, table.centroid_y, table.centroid_x], axis=1)
    # The engine's centroid is one division of an exact sum below 2**51, so rounding
    # centroid * area gives that sum back exactly (Chunk checks the bound).
    local_sums = np.rint(centroid * area[:, None]).astype(np.int64)
    sums = local_sums + area[:, None] * origin[None, :]
    return Partials(
        key=key,
        area=area,
        low=low + origin,
        high=low + size + origin,
        sums=sums,
        value_sum=_value_sums(labels, values, table, area),
        mean=table.mean.astype(np.float64),
        v_min=table.min.astype(np.float64),
        v_max=table.max.astype(np.float64),
    )


def on_host(array: Any) -> np.ndarray:
    """A numpy array of `array`'s elements (a device array's copied to the host)."""
    return array if isinstance(array, np.ndarray) else array.get()


def _first_voxels(labels: Any, count: int) -> np.ndarray:
    """The flat index of each label's first voxel (labels 1..count in raster order of their
    first voxels: where the running maximum rises, a new label starts). Device labels are
    scanned where a run of one label starts (a label first appears at one), and only the
    runs' labels and places come to the host."""
    first = np.zeros(count, np.int64)
    if isinstance(labels, np.ndarray):
        gccl_cpu.first_voxels(np.ascontiguousarray(labels, np.uint32).reshape(-1), first)
        return first
    flat = labels.reshape(-1)
    starts = flat != 0
    starts[1:] &= flat[1:] != flat[:-1]
    at = starts.nonzero()[0]
    gccl_cpu.first_voxels(np.ascontiguousarray(flat[at].get(), np.uint32), first)
    return at.get()[first].astype(np.int64)


def _value_sums(labels: Any, values: np.ndarray, table: Any, area: np.ndarray) -> Any:
    """Each piece's sum of values: exact int64 for integer dtypes, mean * area for floats."""
    kind = values.dtype.kind
    if kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            return table.mean * area
    if values.dtype.itemsize < 4:  # |sum| < 2**16 * 2**31: mean * area rounds back exactly
        return np.rint(table.mean * area).astype(np.int64)
    # 32-bit values: the sum may pass 2**53, so add the high and low 16 bits apart (each
    # partial sum stays below 2**53, exact in float64).
    flat = on_host(labels).reshape(-1)
    wide = values.reshape(-1).astype(np.int64)
    count = len(area) + 1
    low = np.bincount(flat, weights=wide & 0xFFFF, minlength=count)[1:]
    high = np.bincount(flat, weights=wide >> 16, minlength=count)[1:]
    return high.astype(np.int64) * 65536 + low.astype(np.int64)
