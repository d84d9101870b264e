"""The CUDA backend: the host side of the kernels in ccl_cli/cuda/.

One batch (N, H, W) is labeled with one set of launches:

1. local union-find per tile (block8.cu for binary 8-connectivity, pixel.cu
   for binary 4-connectivity and tau mode), then the tile borders (border.cu);
2. dense raster-order labels per image (relabel.cu: root ranks per chunk, a
   per-image scan of the chunk counts, one resolve pass);
3. statistics per label (stats.cu), min-area renumbering (min_area.cu);
4. with --polygons, the outlines of the final labels (cuda_polygons.py).

Morphology and smoothing run before step 1 (ccl_cli.stages with the kernels
of cuda_stages.py).

Only the label images (when the batch came from the host) and the small
statistics arrays travel back; centroids and means are finished on the host
with the arithmetic of ccl_cli.stats, so they match the CPU backend bit for bit.

CuPy is imported only inside functions: importing this module, and the CPU
path, never need it. Kernels come from the shipped fatbin, or from the same
sources through NVRTC when the fatbin cannot be loaded (GCCL_CUDA_NVRTC=1
forces that route).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BackendUnavailable
from ..params import SUPPORTED_DTYPES, LabelParams, canonical_bools, dtype_max
from ..polygons import Outlines
from ..stats import StatsTable, empty_table, float_mean, float_sum_shift
from .base import (
    NARROW_LIMIT,
    BatchResult,
    Labeled,
    batch_result,
    joined,
    label_dtype,
    label_in_parts,
    nothing_to_undo,
    split_bounds,
)

CUDA_DIR = Path(__file__).resolve().parent.parent / "cuda"
FATBIN = CUDA_DIR / "gccl.fatbin"
ENTRY = CUDA_DIR / "gccl.cu"
FORCE_NVRTC_ENV = "GCCL_CUDA_NVRTC"

# Geometry shared with the .cu files (common.cuh, block8.cu, pixel.cu, relabel.cu).
_B8_TILE = (64, 32)  # pixels (w, h) per CUDA block of block8.cu
_B8_THREADS = (32, 16)
_PX_TILE = (32, 16)  # pixels (w, h) per CUDA block of pixel.cu, one thread each
_CHUNK = 4096  # pixels per block of the raster-order kernels
_CHUNK_THREADS = 256
_SCAN_THREADS = 1024
_MAX_GRID = 2**31 - 1
_MAX_IMAGE_PIXELS = 2**31 - 1  # labels and ranks share a u32 with a flag bit
_MAX_BATCH_PIXELS = 2**32 - 1  # bounds the labels of a batch: offsets are u32
#: Parts of a numpy batch labeled at once, each on its own stream and thread.
HOST_STREAMS = 2
#: Input bytes of a pipeline batch (--batch-size auto).
HOST_BATCH_BYTES = 64 << 20
#: Input bytes from which a numpy batch is labeled in HOST_STREAMS parts (see _parts).
_MIN_SPLIT_BYTES = 32 << 20
_HOST_REGISTER_PORTABLE = 1  # cudaHostRegisterPortable

# foreground.cuh rule kinds and stats.cu fields.
_FG_BACKGROUND, _FG_ALL, _FG_ABOVE, _FG_BELOW = 0, 1, 2, 3
_FIELDS = 12
(AREA, XMIN, XMAX, YMIN, YMAX, SUMX, SUMY, SUMV, VMIN, VMAX, ABSMAX, INF) = range(_FIELDS)
_INF_POS, _INF_NEG = 1, 2

_SUFFIX = {
    np.dtype(np.bool_): "u8",
    np.dtype(np.uint8): "u8",
    np.dtype(np.int8): "i8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.int32): "i32",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}
assert set(_SUFFIX) == set(SUPPORTED_DTYPES)


@dataclass
class CudaStatus:
    """Whether the CUDA backend can run here, and what it would run on.

    devices: "name (memory)" per visible device. kernel_source: where the
    kernels of device 0 came from (fatbin, or NVRTC and why).
    """

    usable: bool
    reason: str = ""
    devices: list[str] = field(default_factory=list)
    kernel_source: str = ""
    cupy_version: str | None = None


def cuda_status() -> CudaStatus:
    """Probe CuPy, the driver, the devices and the kernels; never raises."""
    try:
        import cupy
    except Exception as exc:
        return CudaStatus(False, f"CuPy is not installed ({_one_line(exc)})")
    version = str(cupy.__version__)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        devices = []
        for index in range(count):
            props = cupy.cuda.runtime.getDeviceProperties(index)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            devices.append(f"{name} ({props['totalGlobalMem'] / 2**30:.1f} GiB)")
    except Exception as exc:
        return CudaStatus(
            False, f"no usable CUDA driver or device ({_one_line(exc)})", [], "", version
        )
    if not devices:
        return CudaStatus(False, "no CUDA device found", [], "", version)
    try:
        source = _kernels(0).source
    except Exception as exc:
        return CudaStatus(False, f"kernels failed to load ({_one_line(exc)})", devices, "", version)
    return CudaStatus(True, "", devices, source, version)


def is_device_array(array: Any) -> bool:
    """True for CuPy arrays and anything exposing CUDA memory (CAI or DLPack)."""
    if hasattr(array, "__cuda_array_interface__"):
        return True
    device = getattr(array, "__dlpack_device__", None)
    if device is None or isinstance(array, np.ndarray):
        return False
    return int(device()[0]) in (2, 13)  # kDLCUDA, kDLCUDAManaged


class CudaBackend:
    """Labels batches on one CUDA device; results match CpuBackend bit for bit."""

    name = "cuda"

    def __init__(self, device: int = 0) -> None:
        cupy = _import_cupy()
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise BackendUnavailable(f"no usable CUDA driver ({_one_line(exc)})") from exc
        if not 0 <= device < count:
            raise BackendUnavailable(f"CUDA device {device} does not exist ({count} found)")
        self.device = device
        try:
            _kernels(device)
        except Exception as exc:
            raise BackendUnavailable(f"CUDA kernels failed to load ({_one_line(exc)})") from exc
        self._idle_streams: list[Any] = []
        self._streams_lock = threading.Lock()

    def label(
        self,
        batch: Any,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
    ) -> BatchResult:
        """Label each image of an (N, H, W) batch; see backends.base.

        A device batch (CuPy, __cuda_array_interface__, DLPack) stays on its
        device and its labels are a CuPy uint32 array there. A numpy batch goes
        through page-locked host memory (its own when it is stacked in
        empty_batch's, else a staging copy) on non-blocking streams, in up to
        HOST_STREAMS parts at once, so that one part's copies overlap another's
        kernels; its labels land in `out` (or a new page-locked array), as
        uint16 with `narrow` (backends.base). Out of device memory, a part is
        split in halves and retried.
        """
        cupy = _import_cupy()
        if is_device_array(batch):
            values = _as_cupy(cupy, batch)
            with values.device:
                labels = cupy.empty(values.shape, cupy.uint32)
                labeled = _split_on_oom(
                    cupy, values.shape, lambda lo, hi: _label(values[lo:hi], params, labels[lo:hi])
                )
            return batch_result(labels, labeled, params)
        host = np.asarray(batch)
        labels = self.empty_batch(host.shape, label_dtype(narrow)) if out is None else out
        labeled = label_in_parts(
            lambda _, lo, hi: self._label_host(host[lo:hi], params, labels[lo:hi], narrow),
            _parts(host),
        )
        return batch_result(labels, labeled, params)

    def _label_host(
        self, host: np.ndarray, params: LabelParams, labels: np.ndarray, narrow: bool
    ) -> Labeled:
        """Label a numpy (sub-)batch into the numpy `labels`, on a stream of its own.

        The images go to the device asynchronously on the stream, straight
        from `host` when it is page-locked and C-contiguous, else through a
        page-locked staging copy; the labels come back into `labels`
        (page-locked unless the caller gave its own `out`), see _labels_to_host.
        The thread waits only for its own stream, so other threads' copies and
        kernels go on meanwhile.
        """
        cupy = _import_cupy()

        def run(lo: int, hi: int) -> Labeled:
            part = host[lo:hi]
            if not _page_locked(cupy, part):
                part = pinned_empty(part.shape, part.dtype)
                np.copyto(part, host[lo:hi])
            values = cupy.empty(part.shape, part.dtype)
            values.set(part, stream=stream)
            out = cupy.empty(part.shape, cupy.uint32)
            labeled = _label(values, params, out)
            kept = [len(table) for table in labeled.tables]
            labeled.wide = _labels_to_host(cupy, out, labels[lo:hi], kept, narrow, stream)
            return labeled

        with cupy.cuda.Device(self.device), self._stream() as stream, stream:
            return _split_on_oom(cupy, host.shape, run)

    @contextmanager
    def _stream(self) -> Iterator[Any]:
        """A non-blocking stream of this device that no other thread uses meanwhile.

        Streams are kept and reused: CuPy's memory pool keeps freed device
        memory per stream, so memory freed on a stream that is then destroyed
        is never reused, and a new stream per batch would allocate afresh
        (cudaMalloc, which also synchronizes the device) every time.
        """
        cupy = _import_cupy()
        with self._streams_lock:
            stream = (
                self._idle_streams.pop()
                if self._idle_streams
                else cupy.cuda.Stream(non_blocking=True)
            )
        try:
            yield stream
        finally:
            with self._streams_lock:
                self._idle_streams.append(stream)

    def empty_batch(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialized host array in page-locked memory (see backends.base).

        A batch stacked into it goes to the device without a staging copy.
        """
        return pinned_empty(shape, np.dtype(dtype))

    def page_lock(self, address: int, size: int) -> Callable[[], None]:
        """Page-lock existing host memory for every device (cudaHostRegister, portable).

        Pinning costs about as much as copying the memory a few times, so it
        pays for memory that is reused, like the service's shared blocks. If the
        driver refuses, the memory stays pageable and copies are staged.
        """
        cupy = _import_cupy()
        runtime = cupy.cuda.runtime
        try:
            with cupy.cuda.Device(self.device):
                runtime.hostRegister(address, size, _HOST_REGISTER_PORTABLE)
        except runtime.CUDARuntimeError:
            return nothing_to_undo

        def unlock() -> None:
            with suppress(runtime.CUDARuntimeError):
                runtime.hostUnregister(address)

        return unlock

    def batch_budget_bytes(self) -> int:
        """Input bytes per batch: HOST_BATCH_BYTES, less where device memory is short.

        A 1-byte pixel needs about 10 bytes on the device. Larger batches
        gain nothing on the GPU and keep the CPU threads waiting: a batch is
        decoded before, and encoded after, it is labeled.
        """
        cupy = _import_cupy()
        with cupy.cuda.Device(self.device):
            free, _ = cupy.cuda.runtime.memGetInfo()
            free += cupy.get_default_memory_pool().free_bytes()
        return max(1 << 20, min(HOST_BATCH_BYTES, int(free * 0.8) // 10))


def _parts(host: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) bounds of the parts a numpy batch is labeled in, one stream each.

    Small batches stay whole: a part costs about a millisecond of host work
    (its thread, launches, waits), which the overlap of one part's copies
    with the other's kernels only repays from a few tens of megabytes (on an
    H200, 16 depth maps of 10 MB took 4.2 ms in two parts, 2.9 ms in one).
    """
    if len(host) <= 1 or host.nbytes < _MIN_SPLIT_BYTES:
        return [(0, len(host))]
    return split_bounds(len(host), HOST_STREAMS)


def pinned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A numpy array in page-locked host memory (from CuPy's pinned pool, so reused).

    Copies between it and any device (the memory is portable under unified
    addressing) run asynchronously at full bus speed; pageable memory is
    staged through a driver buffer by the CPU. The memory goes back to the
    pool when the last view of the array is gone. Sizes are rounded up to a
    power of two: the pool reuses a block only for the same size, and
    page-locking new memory costs far more than the copies it speeds up.
    """
    cupy = _import_cupy()
    count = int(np.prod(shape, dtype=np.int64))
    size = max(1, count * dtype.itemsize)
    memory = cupy.cuda.alloc_pinned_memory(1 << (size - 1).bit_length())
    return np.frombuffer(memory, dtype, count).reshape(shape)


def _labels_to_host(
    cupy: Any, device: Any, host: np.ndarray, kept: list[int], narrow: bool, stream: Any
) -> dict[int, np.ndarray]:
    """Copy a part's device labels (uint32) into `host` and wait for `stream`.

    With `narrow`, `host` is uint16: the labels are cast on the device (one
    kernel), so a scan's labels cost half the bus time, and the images whose
    kept labels exceed NARROW_LIMIT come back whole, in page-locked arrays of
    their own. Returns those, by image index (BatchResult.wide).
    """
    if not narrow:
        device.get(stream=stream, out=host)
        return {}
    device.astype(cupy.uint16).get(stream=stream, out=host, blocking=False)
    wide = {}
    for i, count in enumerate(kept):
        if count > NARROW_LIMIT:
            wide[i] = pinned_empty(device[i].shape, np.dtype(np.uint32))
            device[i].get(stream=stream, out=wide[i], blocking=False)
    stream.synchronize()
    return wide


def _page_locked(cupy: Any, array: np.ndarray) -> bool:
    """Whether `array` is C-contiguous and in page-locked memory (copies need no staging)."""
    if array.size == 0 or not array.flags.c_contiguous:
        return False
    runtime = cupy.cuda.runtime
    return bool(runtime.pointerGetAttributes(array.ctypes.data).type == runtime.memoryTypeHost)


def dense_labels(values: Any, params: LabelParams, out: Any) -> Any:
    """Kernels 1-2 only: dense raster-order labels of a contiguous CuPy batch into `out`.

    Returns the device array of K per image. The benchmark times this alone.
    """
    _check_batch(values)
    kernels = _kernels(values.device.id)
    cupy = _import_cupy()
    n, height, width = values.shape
    pixels = height * width
    labels = cupy.empty((n, pixels), cupy.uint32)
    rule = _rule_args(params, np.dtype(values.dtype))
    suffix = _SUFFIX[np.dtype(values.dtype)]
    storage = values.view(cupy.uint8) if values.dtype == np.bool_ else values
    geometry = (np.uint32(height), np.uint32(width))
    if params.tau is None and params.connectivity == 8:
        tile, threads, local = _B8_TILE, _B8_THREADS, f"gccl_block8_local_{suffix}"
        local_tau: tuple[Any, ...] = ()
    else:
        tile, threads = _PX_TILE, _PX_TILE
        local = f"gccl_pixel_local_{params.connectivity}_{suffix}"
        local_tau = _tau_args(params)
    tiles_x, tiles_y = -(-width // tile[0]), -(-height // tile[1])
    tiles = (np.uint32(tiles_x), np.uint32(tiles_x * tiles_y))
    grid = n * tiles_x * tiles_y
    kernels.launch(local, grid, threads, (storage, labels, *geometry, *tiles, *rule, *local_tau))
    if tiles_x * tiles_y > 1:
        kernels.launch(
            f"gccl_border_{params.connectivity}_{suffix}",
            grid,
            (-(-(tile[0] + 2 * tile[1] - 1) // 32) * 32,),  # border.cu: one per border pixel
            (
                storage,
                labels,
                *geometry,
                np.uint32(tile[0]),
                np.uint32(tile[1]),
                *tiles,
                *_tau_args(params),
            ),
        )
    chunks = -(-pixels // _CHUNK)
    counts = cupy.empty(n * chunks, cupy.uint32)
    offsets = cupy.empty(n * chunks, cupy.uint32)
    components = cupy.empty(n, cupy.uint32)
    chunk_args = (np.uint32(pixels), np.uint32(chunks))
    kernels.launch("gccl_finalize", n * chunks, (_CHUNK_THREADS,), (labels, *chunk_args, counts))
    kernels.launch(
        "gccl_segmented_scan",
        n,
        (_SCAN_THREADS,),
        (counts, offsets, np.uint64(0), np.uint64(chunks), components),
    )
    kernels.launch(
        "gccl_resolve", n * chunks, (_CHUNK_THREADS,), (labels, out, *chunk_args, offsets)
    )
    return components


def device_statistics(
    values: Any, params: LabelParams, out: Any, components: Any
) -> tuple[Any, Any]:
    """Kernel stage 3: per-label aggregates of a labeled batch, min-area renumbering of `out`.

    components: K per image (device, from dense_labels). Returns the
    (GCCL_STATS_FIELDS, sum K) device array of stats.cu's aggregates and the
    label offsets per image (device u32, N + 1 entries). Waits for the total
    number of labels (it sizes the aggregates). The benchmark times
    dense_labels plus this.
    """
    cupy = _import_cupy()
    n, height, width = values.shape
    dtype = np.dtype(values.dtype)
    kernels = _kernels(values.device.id)
    label_base = cupy.empty(n + 1, cupy.uint32)
    scan_base = (components, label_base, np.uint64(0), np.uint64(n), label_base[n:])
    kernels.launch("gccl_segmented_scan", 1, (_SCAN_THREADS,), scan_base)
    total = int(label_base[n:].get()[0])
    agg = cupy.empty((_FIELDS, total), cupy.uint64)
    if total == 0:
        return agg, label_base
    init_grid = min(-(-total // _CHUNK_THREADS), 4096)
    kernels.launch("gccl_stats_init", init_grid, (_CHUNK_THREADS,), (agg, np.uint64(total)))
    pixels, chunks = height * width, -(-(height * width) // _CHUNK)
    storage = values.view(cupy.uint8) if dtype == np.bool_ else values
    geometry = (np.uint32(height), np.uint32(width), np.uint32(chunks))
    stats_args = (out, storage, *geometry, label_base, agg, np.uint64(total))
    grid = n * chunks
    kernels.launch(f"gccl_stats_{_SUFFIX[dtype]}", grid, (_CHUNK_THREADS,), stats_args)
    if dtype.kind == "f":
        kernels.launch(f"gccl_float_sum_{_SUFFIX[dtype]}", grid, (_CHUNK_THREADS,), stats_args)
    if params.min_area > 0:
        keep = cupy.empty(total, cupy.uint32)
        cupy.greater_equal(agg[AREA], params.min_area, out=keep)
        rank = cupy.empty(total, cupy.uint32)
        scan_args = (keep, rank, label_base, np.uint64(0), np.uint64(0))
        kernels.launch("gccl_segmented_scan", n, (_SCAN_THREADS,), scan_args)
        min_area = np.uint64(params.min_area)
        remap_args = (out, np.uint32(pixels), np.uint32(chunks), label_base, agg[AREA], rank)
        kernels.launch("gccl_min_area_remap", grid, (_CHUNK_THREADS,), (*remap_args, min_area))
    return agg, label_base


def _label(values: Any, params: LabelParams, out: Any) -> Labeled:
    """Labels into `out`, the statistics tables and outlines of one (sub-)batch on its device.

    Morphology and smoothing (ccl_cli.stages) decide the labels; statistics
    read the original values.
    """
    cupy = _import_cupy()
    n, height, width = values.shape
    integer = np.dtype(values.dtype).kind != "f"
    if n == 0:
        return Labeled([], [], [])
    if height * width == 0:
        outlines = [Outlines.empty() for _ in range(n)] if params.polygons else []
        return Labeled([empty_table(integer) for _ in range(n)], [0] * n, outlines)
    from ..stages import label_input
    from .cuda_stages import CudaStages

    _check_batch(values)
    values = canonical_bools(cupy.ascontiguousarray(values), cupy)
    image, label_params = label_input(values, params, cupy, CudaStages())
    components = dense_labels(image, label_params, out)
    agg, label_base = device_statistics(values, params, out, components)
    label_base = label_base.get().astype(np.int64)
    table = _host_table(agg.get(out=pinned_empty(agg.shape, np.dtype(np.uint64))), integer)
    kept = np.flatnonzero(table.area >= params.min_area)
    if len(kept) < len(table):
        table = table.take(kept)
    starts = np.searchsorted(kept, label_base)  # each image's first kept row, and the end
    tables = [table.take(slice(starts[i], starts[i + 1])) for i in range(n)]
    polygons: list[Outlines] = []
    if params.polygons:
        from .cuda_polygons import device_outlines

        polygons = device_outlines(out, [len(table) for table in tables])
    return Labeled(tables, np.diff(label_base).tolist(), polygons)


def _host_table(agg: np.ndarray, integer: bool) -> StatsTable:
    """All labels of a batch as one StatsTable, from stats.cu's aggregates."""
    area = agg[AREA].astype(np.int64)
    safe_area = np.maximum(area, 1).astype(np.float64)
    if integer:
        mean = agg[SUMV].view(np.int64).astype(np.float64) / safe_area
    else:
        shift = float_sum_shift(agg[ABSMAX].view(np.float64), area)
        inf = agg[INF]
        mean = float_mean(
            agg[SUMV].view(np.int64), shift, area, (inf & _INF_POS) > 0, (inf & _INF_NEG) > 0
        )
    xmin, ymin = agg[XMIN].astype(np.int64), agg[YMIN].astype(np.int64)
    return StatsTable(
        area=area,
        x=xmin,
        y=ymin,
        width=agg[XMAX].astype(np.int64) - xmin + 1,
        height=agg[YMAX].astype(np.int64) - ymin + 1,
        centroid_x=agg[SUMX].view(np.int64).astype(np.float64) / safe_area,
        centroid_y=agg[SUMY].view(np.int64).astype(np.float64) / safe_area,
        mean=mean,
        min=_from_order_key(agg[VMIN]),
        max=_from_order_key(agg[VMAX]),
        integer_values=integer,
    )


def _from_order_key(keys: np.ndarray) -> np.ndarray:
    """Inverse of stats.cu's order_key: u64 keys back to float64 values."""
    sign = np.uint64(1 << 63)
    bits = np.where(keys & sign, keys & ~sign, ~keys)
    return bits.astype(np.uint64).view(np.float64)


def _rule_args(params: LabelParams, dtype: np.dtype) -> tuple[Any, ...]:
    """foreground.cuh's ForegroundRule as kernel arguments."""
    value = 0.0
    if params.threshold is not None:
        kind, value = (_FG_BELOW if params.invert else _FG_ABOVE), float(params.threshold)
    elif params.background is None:
        kind = _FG_ALL
    else:
        kind, value = _FG_BACKGROUND, float(params.background)
    invert_max = 0.0 if dtype.kind == "f" else float(dtype_max(dtype))
    return (np.int32(kind), np.float64(value), np.int32(params.invert), np.float64(invert_max))


def _tau_args(params: LabelParams) -> tuple[Any, ...]:
    """(use_tau, tau) kernel arguments."""
    if params.tau is None:
        return (np.int32(0), np.float64(0.0))
    return (np.int32(1), np.float64(params.tau))


def _check_batch(values: Any) -> None:
    """Reject what the kernels cannot take, with a one-line reason."""
    if values.ndim != 3:
        raise ValueError(f"a batch is (N, H, W), got shape {values.shape}")
    if np.dtype(values.dtype) not in _SUFFIX:
        raise ValueError(f"unsupported dtype {values.dtype}")
    n, height, width = values.shape
    if height * width > _MAX_IMAGE_PIXELS:
        raise ValueError(f"an image may hold at most 2**31 - 1 pixels, got {height}x{width}")
    tiles = -(-width // _PX_TILE[0]) * -(-height // _PX_TILE[1])
    if n * max(tiles, -(-(height * width) // _CHUNK)) > _MAX_GRID:
        raise ValueError(f"batch of {n} images too large for one launch; split it")


def _split_on_oom(
    cupy: Any,
    shape: tuple[int, ...],
    run: Callable[[int, int], Labeled],
) -> Labeled:
    """run(0, N) for a batch of `shape`, in halves (recursively) on device out-of-memory.

    Sub-batches also stay under 2**32 pixels: label offsets are 32-bit.
    """
    pixels = int(np.prod(shape[1:], dtype=np.int64))
    return _run_part(cupy, run, pixels, 0, shape[0])


def _run_part(
    cupy: Any, run: Callable[[int, int], Labeled], pixels: int, lo: int, hi: int
) -> Labeled:
    """run(lo, hi), or its two halves (see _split_on_oom).

    A module function, not a pair of nested ones: nested functions that call
    each other form a reference cycle, which kept `run` (and the pinned label
    buffer it writes) alive until Python's cycle collector ran, so the next
    batch could not reuse the buffer and page-locked new memory instead.
    """
    if hi - lo > 1 and (hi - lo) * pixels > _MAX_BATCH_PIXELS:
        return _halves(cupy, run, pixels, lo, hi)
    try:
        return run(lo, hi)
    except cupy.cuda.memory.OutOfMemoryError:
        if hi - lo <= 1:
            raise
        cupy.get_default_memory_pool().free_all_blocks()
        return _halves(cupy, run, pixels, lo, hi)


def _halves(
    cupy: Any, run: Callable[[int, int], Labeled], pixels: int, lo: int, hi: int
) -> Labeled:
    mid = (lo + hi) // 2
    return joined([_run_part(cupy, run, pixels, lo, mid), _run_part(cupy, run, pixels, mid, hi)])


def _as_cupy(cupy: Any, array: Any) -> Any:
    """A CuPy view of a device array (CuPy, __cuda_array_interface__ or DLPack)."""
    if isinstance(array, cupy.ndarray):
        return array
    if hasattr(array, "__cuda_array_interface__"):
        return cupy.asarray(array)
    return cupy.from_dlpack(array)


class _Kernels:
    """The gccl kernels loaded on one device, and where they came from."""

    def __init__(self, device: int) -> None:
        import cupy

        self.device = device
        self._functions: dict[str, Any] = {}
        self._resident: dict[tuple[str, int], int] = {}
        with cupy.cuda.Device(device):
            self.multiprocessors = int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])
            reason = f"{FORCE_NVRTC_ENV} is set" if os.environ.get(FORCE_NVRTC_ENV) else ""
            if not reason:
                try:
                    self._module = cupy.RawModule(path=str(FATBIN))
                    self._module.get_function("gccl_finalize")
                    self.source = f"fatbin {FATBIN.relative_to(CUDA_DIR.parent.parent)}"
                    return
                except Exception as exc:
                    reason = f"fatbin failed to load: {_one_line(exc)}"
            self._module = cupy.RawModule(
                code=ENTRY.read_text(), options=("-std=c++17", f"-I{CUDA_DIR}")
            )
            self._module.get_function("gccl_finalize")
            self.source = f"NVRTC ({reason})"

    def launch(self, name: str, grid: int, block: tuple[int, ...], args: tuple[Any, ...]) -> None:
        """Launch kernel `name` on a 1-D grid on the current stream."""
        if grid > 0:
            self._function(name)((grid,), block, args)

    def resident_blocks(self, name: str, threads: int) -> int:
        """Blocks of `threads` threads of kernel `name` that one SM holds at once."""
        key = (name, threads)
        if key not in self._resident:
            import cupy

            with cupy.cuda.Device(self.device):
                self._resident[key] = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    self._function(name).kernel.ptr, threads, 0
                )
        return self._resident[key]

    def _function(self, name: str) -> Any:
        function = self._functions.get(name)
        if function is None:
            function = self._functions[name] = self._module.get_function(name)
        return function


_loaded: dict[int, _Kernels] = {}
_loading = threading.Lock()


def _kernels(device: int) -> _Kernels:
    """The kernels of `device`, loaded once per process."""
    with _loading:
        if device not in _loaded:
            _loaded[device] = _Kernels(device)
        return _loaded[device]


def _import_cupy() -> Any:
    """cupy, or BackendUnavailable with the reason."""
    try:
        import cupy
    except Exception as exc:
        raise BackendUnavailable(f"CuPy is not installed ({_one_line(exc)})") from exc
    return cupy


def _one_line(exc: BaseException) -> str:
    """The first line of an exception's message, with its type."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
