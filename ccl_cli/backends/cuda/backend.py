"""The CUDA backend: the host side of the kernels in ccl_cli/backends/cuda/src/.

One batch (N, H, W) is labeled with one set of launches:

1. local union-find per tile (block8.cu for binary 8-connectivity, pixel.cu
   for binary 4-connectivity and tau mode), then the tile borders (border.cu);
2. dense raster-order labels per image (relabel.cu: root ranks per chunk, a
   per-image scan of the chunk counts, one resolve pass);
3. statistics per label (stats.cu), area filtering (area_filter.cu), holes filled on the host
   (contract/cleaning.py),
   the statistics table of the kept labels (stats.cu);
4. with --polygons, the outlines of the final labels (outlines.py).

Morphology and smoothing run before step 1 (ccl_cli.contract.stages with the kernels
of stages.py).

Only the label images (when the batch came from the host) and the
statistics table travel back; the table is finished on the device with the
arithmetic of ccl_cli.contract.stats, so it matches the CPU backend bit for bit.

The host waits for the device at two points only: for the number of labels
(it sizes the statistics) and for the statistics themselves (job.py). A numpy
batch is labeled in chunks of about _CHUNK_BYTES, each on a stream of its
own, by one thread that issues every chunk's work before it waits for the
first (CudaBackend.label_steps): the chunks' uploads follow each other at
full bus speed while earlier chunks compute and copy their labels back.

CuPy is imported only inside functions (loader.py): importing this module,
and the CPU path, never need it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...contract.params import LabelParams
from ...errors import BackendUnavailable
from ..base import (
    Backend,
    BatchResult,
    LabelSteps,
    is_device_array,
    joined,
    new_labels,
    split_bounds,
)
from ..steps import interleaved
from .job import HostLabels, Job, record_event, released
from .loader import (
    device_kernels,
    import_cupy,
    one_line,
)
from .pinned import page_locked, pinned_empty

_MAX_BATCH_PIXELS = 2**32 - 1  # bounds the labels of a batch: offsets are u32
#: Input bytes of a pipeline batch (--batch-size auto).
HOST_BATCH_BYTES = 64 << 20
#: Input bytes of each chunk a numpy batch is labeled in, without stages (see _chunks).
_CHUNK_BYTES = 32 << 20
#: Morphology steps (erosions and dilations) that double a chunk's input bytes (_chunks).
_CHUNK_STEPS = 32
#: Chunks of a batch whose labeling the device runs at once: chunk k's starts when
#: chunk k - _CHUNKS_LABELING's is done (label_steps).
_CHUNKS_LABELING = 2


class CudaBackend(Backend):
    """Labels batches on one CUDA device; results match CpuBackend bit for bit."""

    name = "cuda"

    def __init__(self, device: int = 0) -> None:
        cupy = import_cupy()
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:
            raise BackendUnavailable(f"no usable CUDA driver ({one_line(exc)})") from exc
        if not 0 <= device < count:
            raise BackendUnavailable(f"CUDA device {device} does not exist ({count} found)")
        self.device = device
        try:
            device_kernels(device)
        except Exception as exc:
            raise BackendUnavailable(f"CUDA kernels failed to load ({one_line(exc)})") from exc
        self._streams: list[Any] = []  # every stream made, in order (_take_stream)
        self._busy_streams: set[int] = set()  # ids of the streams jobs hold
        self._streams_lock = threading.Lock()

    def label(
        self,
        batch: Any,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
        statistics: bool = True,
    ) -> BatchResult:
        """Label each image of an (N, H, W) batch, or each volume of an (N, D, H, W) one
        (params.rank 3: host_volumes.py); see backends.base.

        A device batch (CuPy, __cuda_array_interface__, DLPack) stays on its
        device and its labels are a CuPy uint32 array there. A numpy batch is
        labeled by label_steps; its labels land in `out` (or a new page-locked
        array), as uint16 with `narrow` (backends.base). Out of device memory,
        a batch of images is split in halves and retried; a volume that does not fit
        goes in slabs of planes.
        """
        cupy = import_cupy()
        if params.rank == 3:
            from .host_volumes import label_device_volumes, label_host_volumes

            if is_device_array(batch):
                return label_device_volumes(_as_cupy(cupy, batch), params, statistics)
            host = np.asarray(batch)
            labels = new_labels(self, host.shape, params, narrow) if out is None else out
            return label_host_volumes(host, params, labels, statistics, self.device)
        if is_device_array(batch):
            values = _as_cupy(cupy, batch)
            with values.device:
                labels = cupy.empty(values.shape, cupy.uint32)
                return _split_on_oom(
                    cupy,
                    values.shape,
                    labels,
                    params,
                    lambda lo, hi: _label(values[lo:hi], params, labels[lo:hi]),
                )
        host = np.asarray(batch)
        labels = new_labels(self, host.shape, params, narrow) if out is None else out
        (result,) = interleaved([self.label_steps(host, params, labels, narrow)])
        return result

    def label_device(
        self,
        array: Any,
        batched: bool,
        params: LabelParams,
        out: Any,
        statistics: bool,
        check_dtype: Callable[[np.dtype], None],
        device: int | None = None,
    ) -> tuple[Any, Any]:
        """The caller's device array labeled where it is (device_arrays.py; backends.base)."""
        from .device_arrays import label_device_array

        return label_device_array(array, batched, params, out, statistics, check_dtype, device)

    def label_steps(
        self, host: np.ndarray, params: LabelParams, labels: np.ndarray, narrow: bool
    ) -> LabelSteps:
        """Label the numpy batch `host` into the numpy `labels`, in steps (base.LabelSteps).

        The batch goes in chunks (_chunks), each a Job on a non-blocking stream
        of its own, straight from `host` where it is page-locked and
        C-contiguous, else through a page-locked staging copy. The steps: upload
        every chunk (each upload waits for the previous one, so they follow each
        other at full bus speed), then issue each chunk's labeling, then each
        chunk's statistics and the copy of its labels back, then collect each.
        Each step yields the event that the next one waits for, so a runner with
        other labelings (other devices, other batches) steps those meanwhile.
        Every upload comes first because issuing a chunk's labeling takes the
        host up to a millisecond: another device's first upload would wait for
        it. A chunk's labeling waits on the device for the label count of the
        chunk _CHUNKS_LABELING before it, so that early chunks finish first and
        their statistics and copies back overlap later chunks' kernels, instead
        of every chunk finishing late at once. Out of device memory, the batch
        is labeled again without overlap (_label_without_overlap).
        """
        if params.rank == 3:  # volumes go in one step (host_volumes.py)
            yield from ()
            return self.label(host, params, labels, narrow)
        cupy = import_cupy()
        jobs: list[Job] = []
        try:
            for lo, hi in _chunks(host, params):
                after = jobs[-1].uploaded if jobs else None
                jobs.append(self._upload(host[lo:hi], params, labels[lo:hi], narrow, after))
                yield None
            for index, job in enumerate(jobs):
                earlier = index - _CHUNKS_LABELING
                job.label(after=jobs[earlier].counted if earlier >= 0 else None)
                yield None
            for job in jobs:
                yield job.counted
                job.statistics()
            parts = []
            for job in jobs:
                yield job.copied
                parts.append(job.collect())
            return joined(labels, parts, params)
        except cupy.cuda.memory.OutOfMemoryError:
            self._abandon(jobs)
            jobs = []
            cupy.get_default_memory_pool().free_all_blocks()
            return self._label_without_overlap(host, params, labels, narrow)
        finally:
            self._abandon(jobs)

    def _upload(
        self,
        host: np.ndarray,
        params: LabelParams,
        labels: np.ndarray,
        narrow: bool,
        after: Any = None,
    ) -> Job:
        """A Job for the numpy chunk `host` on a stream of its own, its upload issued
        after the event `after` (the previous chunk's upload) where given."""
        cupy = import_cupy()
        stream = self._take_stream()
        try:
            with cupy.cuda.Device(self.device), stream:
                staging = None
                if not page_locked(cupy, host):
                    staging = pinned_empty(host.shape, host.dtype)
                    np.copyto(staging, host)
                if after is not None:
                    stream.wait_event(after)
                values = cupy.empty(host.shape, host.dtype)
                values.set(staging if staging is not None else host, stream=stream)
                uploaded = record_event(cupy, stream)
                out = cupy.empty(host.shape, cupy.uint32)
                job = Job(values, params, out, HostLabels(labels, narrow, staging))
                job.uploaded = uploaded
                job.release = lambda: self._give_stream(stream)
                return job
        except BaseException:
            with cupy.cuda.Device(self.device):
                stream.synchronize()
            self._give_stream(stream)
            raise

    def _label_without_overlap(
        self, host: np.ndarray, params: LabelParams, labels: np.ndarray, narrow: bool
    ) -> BatchResult:
        """label_steps' work as one job at a time: the batch, or its halves (and
        theirs) while device memory runs out (_split_on_oom)."""

        def run(lo: int, hi: int) -> BatchResult:
            job = self._upload(host[lo:hi], params, labels[lo:hi], narrow)
            try:
                job.label()
                job.statistics()
                return job.collect()
            finally:
                self._abandon([job])

        return _split_on_oom(import_cupy(), host.shape, labels, params, run)

    def _abandon(self, jobs: list[Job]) -> None:
        """Wait for whatever `jobs` still have in flight (their copies write into host
        memory the caller owns) and give their streams back."""
        cupy = import_cupy()
        for job in jobs:
            with cupy.cuda.Device(self.device):
                job.stream.synchronize()
            job.release()
            job.release = released

    def _take_stream(self) -> Any:
        """A non-blocking stream of this device that no other job uses meanwhile.

        Streams are kept and reused (_give_stream): CuPy's memory pool keeps
        freed device memory per stream, so memory freed on a stream that is
        then destroyed is never reused, and a new stream per batch would
        allocate afresh (cudaMalloc, which also synchronizes the device) every
        time. The first idle one in creation order is taken, so a batch's
        chunk i gets the same stream batch after batch, with memory blocks of
        its size already pooled, and no more streams (each holding its own
        blocks) are made than jobs ever ran at once. Streams share the
        device's hardware work queues, each of which runs its work in
        order; docs/performance.md measures what more of them
        (CUDA_DEVICE_MAX_CONNECTIONS, the user's choice) gain and cost.
        """
        cupy = import_cupy()
        with self._streams_lock:
            for stream in self._streams:
                if id(stream) not in self._busy_streams:
                    self._busy_streams.add(id(stream))
                    return stream
            with cupy.cuda.Device(self.device):
                stream = cupy.cuda.Stream(non_blocking=True)
            self._streams.append(stream)
            self._busy_streams.add(id(stream))
            return stream

    def _give_stream(self, stream: Any) -> None:
        with self._streams_lock:
            self._busy_streams.discard(id(stream))

    def empty_batch(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialized host array in page-locked memory (see backends.base).

        A batch stacked into it goes to the device without a staging copy.
        """
        return pinned_empty(shape, np.dtype(dtype))

    def batch_budget_bytes(self) -> int:
        """Input bytes per batch: HOST_BATCH_BYTES, less where device memory is short.

        A 1-byte pixel needs about 10 bytes on the device. Larger batches
        gain nothing on the GPU and keep the CPU threads waiting: a batch is
        decoded before, and encoded after, it is labeled.
        """
        cupy = import_cupy()
        with cupy.cuda.Device(self.device):
            free, _ = cupy.cuda.runtime.memGetInfo()
            free += cupy.get_default_memory_pool().free_bytes()
        return max(1 << 20, min(HOST_BATCH_BYTES, int(free * 0.8) // 10))


def _chunks(host: np.ndarray, params: LabelParams) -> list[tuple[int, int]]:
    """[lo, hi) bounds of the chunks a numpy batch is labeled in (label_steps).

    Whole images, as even as they divide, under 2**32 pixels (label offsets
    are 32-bit), and about _CHUNK_BYTES of input each, times 1 + (morphology
    steps) / _CHUNK_STEPS. Smaller chunks let the copies of one chunk overlap
    the kernels of another sooner, and leave less to wait for after the last
    upload, but with stages a chunk has more work per byte, and more of it in
    small kernels and host work that do not shrink with the chunk.
    """
    if len(host) <= 1:
        return [(0, len(host))]
    from ...contract.stages import primitive_steps

    morphology = sum(iterations for _, iterations in primitive_steps(params.morphology))
    chunk_bytes = _CHUNK_BYTES * (_CHUNK_STEPS + morphology) // _CHUNK_STEPS
    pixels = int(np.prod(host.shape, dtype=np.int64))
    count = max(-(-host.nbytes // chunk_bytes), -(-pixels // _MAX_BATCH_PIXELS))
    return split_bounds(len(host), count)


def _label(values: Any, params: LabelParams, out: Any) -> BatchResult:
    """Labels into `out`, the statistics tables and outlines of one device (sub-)batch,
    on the current stream (a Job's steps one after the other)."""
    job = Job(values, params, out)
    job.label()
    job.statistics()
    return job.collect()


def _split_on_oom(
    cupy: Any,
    shape: tuple[int, ...],
    labels: Any,
    params: LabelParams,
    run: Callable[[int, int], BatchResult],
) -> BatchResult:
    """run(0, N) for a batch of `shape` labeled into `labels`, in halves (recursively)
    on device out-of-memory.

    Sub-batches also stay under 2**32 pixels: label offsets are 32-bit.
    """
    pixels = int(np.prod(shape[1:], dtype=np.int64))
    return joined(labels, _run_part(cupy, run, pixels, 0, shape[0]), params)


def _run_part(
    cupy: Any, run: Callable[[int, int], BatchResult], pixels: int, lo: int, hi: int
) -> list[BatchResult]:
    """[run(lo, hi)], or the parts of its two halves (see _split_on_oom).

    A module function, not a pair of nested ones: nested functions that call
    each other form a reference cycle, which kept `run` (and the pinned label
    buffer it writes) alive until Python's cycle collector ran, so the next
    batch could not reuse the buffer and page-locked new memory instead.
    """
    if hi - lo > 1 and (hi - lo) * pixels > _MAX_BATCH_PIXELS:
        return _halves(cupy, run, pixels, lo, hi)
    try:
        return [run(lo, hi)]
    except cupy.cuda.memory.OutOfMemoryError:
        if hi - lo <= 1:
            raise
        cupy.get_default_memory_pool().free_all_blocks()
        return _halves(cupy, run, pixels, lo, hi)


def _halves(
    cupy: Any, run: Callable[[int, int], BatchResult], pixels: int, lo: int, hi: int
) -> list[BatchResult]:
    mid = (lo + hi) // 2
    return [*_run_part(cupy, run, pixels, lo, mid), *_run_part(cupy, run, pixels, mid, hi)]


def _as_cupy(cupy: Any, array: Any) -> Any:
    """A CuPy view of a device array (CuPy, __cuda_array_interface__ or DLPack)."""
    if isinstance(array, cupy.ndarray):
        return array
    if hasattr(array, "__cuda_array_interface__"):
        return cupy.asarray(array)
    return cupy.from_dlpack(array)
