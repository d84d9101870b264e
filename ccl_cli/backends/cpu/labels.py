"""The CPU labeling engine: numba loops (kernels.py) over row strips, on every core.

Each image of a batch is cut into row strips, enough to keep the threads busy
(one strip per image when the batch has as many images as threads). Strips
are labeled at once (labels and per-run statistics in one pass), their seams
joined, and every label image written in one more pass; the order of the
labels and every statistic are those of the README's contract whatever the
strips and the threads (kernels.py says why). numba compiles the loops on
first use for each dtype and keeps them in its on-disk cache (README, "CPU
backend").
"""

from __future__ import annotations

import math
import mmap
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from itertools import pairwise

import numba
import numpy as np

from ...contract.params import LabelParams, canonical_bools, dtype_max
from ...contract.stages import has_stages, label_input
from ...contract.stats import StatsTable, float_mean, float_sum_shift
from ..base import NARROW_LIMIT
from . import kernels
from .stages import NumpyStages

#: Fewest rows a strip gets: thinner strips cost more in seams than they gain.
MIN_STRIP_ROWS = 32
#: Fewest pixels a strip gets: handing a strip to another thread and waiting for it
#: costs about as much as labeling this many pixels (binary and tau images on 2 cores).
MIN_STRIP_PIXELS = 1 << 15
#: Fewest components (over the strips of a batch) whose per-component passes use every thread.
SPREAD_COMPONENTS = 50_000
#: Largest working array kept for the next call of a thread (scratch).
SCRATCH_LIMIT = 1 << 30

# Threads besides the caller's that run the kernels (they release the GIL), made on first use.
_workers: list[ThreadPoolExecutor] = []
_workers_lock = threading.Lock()


@dataclass
class Labeled:
    """What labeling a batch gives besides its labels: per image, the statistics
    of the kept components, K before min-area, and the label images too wide
    for uint16 (as uint32, by index; backends.base)."""

    tables: list[StatsTable]
    components: list[int]
    wide: dict[int, np.ndarray] = field(default_factory=dict)


def pool_size() -> int:
    """The threads of numba's pool (NUMBA_NUM_THREADS, by default the cores)."""
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


def engine_threads(threads: int) -> int:
    """The threads the engine can use: `threads`, at most numba's pool size."""
    return max(1, min(threads, pool_size()))


def label_batch(batch: np.ndarray, params: LabelParams, threads: int, out: np.ndarray) -> Labeled:
    """Label the (N, H, W) numpy batch into `out` (uint32, or uint16 when narrowed).

    The batch is cut into strips for `threads` threads (plan), which run on
    at most pool_size() threads. Morphology and smoothing
    (contract.stages) decide the labels; statistics always read the original
    values.
    """
    return _label_batch(batch, params, threads, out)


def spread(kernel: Callable[..., None], tasks: int, threads: int, *args: object) -> None:
    """kernel(*args, lo, hi) over contiguous ranges lo..hi-1 of the tasks, on up to
    engine_threads(threads) threads: this one and the workers' (the kernels release
    the GIL). Every task writes only its own part of the arrays, so the ranges
    change no result."""
    parts = 1 if threads <= 1 else min(engine_threads(threads), tasks)
    if parts <= 1:
        kernel(*args, 0, tasks)
        return
    ranges = list(pairwise(tasks * i // parts for i in range(parts + 1)))
    futures = [_pool().submit(kernel, *args, lo, hi) for lo, hi in ranges[1:]]
    try:
        kernel(*args, *ranges[0])
    finally:
        wait(futures)
    for future in futures:
        future.result()


def _pool() -> ThreadPoolExecutor:
    """The engine's worker threads: pool_size() - 1 of them, the caller being the last."""
    with _workers_lock:
        if not _workers:
            _workers.append(ThreadPoolExecutor(max(1, pool_size() - 1), "gccl-cpu"))
        return _workers[0]


class _Scratch(threading.local):
    """One thread's working arrays, kept between calls: fresh memory costs a page
    fault per 4 KiB touched, as much as labeling a sparse image."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}


_scratch = _Scratch()


def empty_plain(shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """np.empty in plain 4 KiB pages, private to this process.

    numpy asks for huge pages from 4 MiB up, and a huge page's first touch
    clears all of it: a working array sized for the worst case but touched
    sparsely (a record per label) then costs twice the time per byte that
    labeling touches. Arrays that are written whole (the labels) are better
    in numpy's memory, which the allocator also recycles between calls.
    """
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size < 4 << 20:
        return np.empty(shape, dtype)
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux
        memory.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(memory, dtype).reshape(shape)


def scratch(name: str, shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """An uninitialized working array (never one a result keeps), reusing this
    thread's last one of that name when it is large enough."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    kept = _scratch.arrays.get(name)
    if kept is None or kept.nbytes < size:
        kept = empty_plain((max(size, 1),), np.uint8)
        if size <= SCRATCH_LIMIT:
            _scratch.arrays[name] = kept
    return kept[:size].view(dtype).reshape(shape)


def label_image(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, StatsTable, int]:
    """Label one (H, W) image: (labels uint32, stats of kept components, K before min-area)."""
    labels = np.empty((1, *values.shape), np.uint32)
    labeled = label_batch(values[np.newaxis], params, pool_size(), labels)
    return labels[0], labeled.tables[0], labeled.components[0]


def raster_components(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, int]:
    """Dense labels 1..K of one image in raster order, and K (no min-area)."""
    labels, _, count = label_image(values, replace(params, min_area=0))
    return labels, count


def foreground_rule(dtype: np.dtype, params: LabelParams) -> tuple[int, float]:
    """contract.params.foreground_mask as (rule, a) for the kernels, which compare in float64.

    float64 holds every value of a supported dtype exactly, so the comparison
    there is the one foreground_mask makes natively or in float64.
    """
    if params.threshold is not None:
        rule = kernels.FG_BELOW if params.invert else kernels.FG_ABOVE
        return rule, float(params.threshold)
    if params.background is None:
        return kernels.FG_ALL, 0.0
    target = params.background
    if params.invert:
        target = -target if dtype.kind == "f" else dtype_max(dtype) - target
    return kernels.FG_NOT, float(target)


def plan(count: int, height: int, width: int, threads: int) -> np.ndarray:
    """Tasks (image, first row, end row): the same strips for every image of the batch."""
    strips = max(
        1,
        min(
            -(-threads // max(count, 1)),
            height // MIN_STRIP_ROWS,
            height * width // MIN_STRIP_PIXELS,
        ),
    )
    cuts = [round(height * i / strips) for i in range(strips + 1)]
    strip_rows = list(pairwise(cuts))
    return np.array([(n, r0, r1) for n in range(count) for r0, r1 in strip_rows], np.int64)


def _numbers(values: np.ndarray) -> np.ndarray:
    """Values as the kernels read them: 1-bit as bytes 0/1."""
    return values.view(np.uint8) if values.dtype == np.bool_ else values


def _inputs(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, LabelParams, np.ndarray]:
    """The image the kernels label, its parameters, and the values the statistics
    read (contract.stages.label_input, image by image)."""
    if not has_stages(params):
        return values, params, values
    staged = [label_input(image, params, np, NumpyStages()) for image in values]
    image = np.ascontiguousarray(np.stack([image for image, _, _ in staged]))
    read = np.ascontiguousarray(np.stack([read for _, _, read in staged]))
    return image, staged[0][1], read


def _label_batch(batch: np.ndarray, params: LabelParams, threads: int, out: np.ndarray) -> Labeled:
    values = np.ascontiguousarray(canonical_bools(batch))
    count, height, width = values.shape
    if count == 0:
        return Labeled([], [])
    image, label_params, values = _inputs(values, params)
    rule, a = foreground_rule(image.dtype, label_params)
    image, numbers = _numbers(image), _numbers(values)
    binary = label_params.tau is None
    tau = 0.0 if label_params.tau is None else float(label_params.tau)
    eight = label_params.connectivity == 8
    floating = values.dtype.kind == "f"

    # Provisional labels live in the output when it is uint32, else in a scratch image.
    in_place = out.dtype == np.uint32 and out.flags.c_contiguous
    prov = out.view(np.int32) if in_place else scratch("prov", values.shape, np.int32)
    parent = scratch(
        "parent",
        (count, height * width + 1),
        np.int64 if height * width >= 2**31 - 1 else np.int32,
    )
    parent[:, 0] = 0
    tasks = plan(count, height, width, threads)
    # a binary strip makes at most one label per run, a tau strip one per pixel
    per_row = (width + 1) // 2 if binary else width
    acc_first = np.zeros(len(tasks) + 1, np.int64)
    np.cumsum((tasks[:, 2] - tasks[:, 1]) * per_row, out=acc_first[1:])
    acc = scratch("acc", (acc_first[-1], kernels.RECORD), np.int64)
    local_counts = np.empty(len(tasks), np.int64)
    lasts = np.empty(len(tasks), np.int64)
    acc32 = acc.view(np.int32)
    if binary:
        spread(
            kernels.label_binary, len(tasks), threads,
            image, numbers, prov, parent, tasks, acc_first, acc, acc32, local_counts, lasts,
            eight, rule, a,
        )  # fmt: skip
    else:
        spread(
            kernels.label_tau, len(tasks), threads,
            image, numbers, prov, parent, tasks, acc_first, acc, acc32, local_counts, lasts,
            eight, rule, a, tau,
        )  # fmt: skip

    first = np.zeros(len(tasks) + 1, np.int64)  # slot first[t] is task t's background
    np.cumsum(local_counts + 1, out=first[1:])
    image_tasks = np.arange(count + 1, dtype=np.int64) * (len(tasks) // count)
    forest = np.arange(first[-1], dtype=np.int64)
    components = np.empty(count, np.int64)
    # the per-component passes, image by image, on one thread unless there are many components
    post = threads if first[-1] >= SPREAD_COMPONENTS else 1
    if binary:
        spread(
            kernels.merge_seams, count, post,
            prov, parent, tasks, first, image_tasks, forest, components, eight,
        )  # fmt: skip
    else:
        spread(
            kernels.merge_seams_tau, count, post,
            image, prov, parent, tasks, first, image_tasks, forest, components, eight, tau,
        )  # fmt: skip
    component_first = np.zeros(count + 1, np.int64)
    np.cumsum(components, out=component_first[1:])
    stats = scratch("stats", (component_first[-1], kernels.RECORD), np.int64)
    spread(
        kernels.reduce_stats, count, post,
        acc, acc32, acc_first, first, tasks, image_tasks, forest, component_first,
        stats, stats.view(np.int32), floating,
    )  # fmt: skip
    mean = (
        _float_means(stats, numbers, prov, parent, tasks, first, forest, component_first, threads)
        if floating
        else np.zeros(0)
    )
    kept_id = scratch("kept_id", (len(stats),), np.int64)
    kept = np.empty(count, np.int64)
    spread(
        kernels.keep_components, count, post, stats, component_first, params.min_area, kept_id, kept
    )
    kept_first = np.zeros(count + 1, np.int64)
    np.cumsum(kept, out=kept_first[1:])
    ints = np.empty((5, int(kept_first[-1])), np.int64)
    floats = np.empty((5, int(kept_first[-1])), np.float64)
    spread(
        kernels.kept_columns, count, post,
        stats, stats.view(np.int32), component_first, kept_id, kept_first, floating, mean, ints,
        floats,
    )  # fmt: skip
    tables = [_table(ints[:, lo:hi], floats[:, lo:hi], floating) for lo, hi in pairwise(kept_first)]

    wide: dict[int, np.ndarray] = {}
    write = (prov, parent, tasks, first, forest, component_first, kept_id, lasts)
    if out.dtype == np.uint16:
        too_many = kept > NARROW_LIMIT
        spread(kernels.write_labels, len(tasks), threads, *write, out, ~too_many)
        if too_many.any():
            spread(kernels.write_labels, len(tasks), threads, *write, prov, too_many)
            wide = {int(n): prov[n].view(np.uint32).copy() for n in np.flatnonzero(too_many)}
    else:
        spread(kernels.write_labels, len(tasks), threads, *write, prov, np.ones(count, bool))
        if not in_place:
            out[...] = prov.view(np.uint32)
    return Labeled(tables, [int(c) for c in components], wide)


def _table(ints: np.ndarray, floats: np.ndarray, floating: bool) -> StatsTable:
    """The StatsTable of kernels.kept_columns' columns (views of them)."""
    area, x, y, width, height = ints
    centroid_x, centroid_y, mean, v_min, v_max = floats
    return StatsTable(
        area, x, y, width, height, centroid_x, centroid_y, mean, v_min, v_max, not floating
    )


def _float_means(
    stats: np.ndarray,
    numbers: np.ndarray,
    prov: np.ndarray,
    parent: np.ndarray,
    tasks: np.ndarray,
    first: np.ndarray,
    forest: np.ndarray,
    component_first: np.ndarray,
    threads: int,
) -> np.ndarray:
    """The mean of every component of a float batch (contract.stats' rule).

    One more pass over the pixels: each value's term needs its component's
    shift, which needs the component's area and largest finite |v|.
    """
    area = stats[:, 0]
    shift = float_sum_shift(stats[:, 3].view(np.float64), area)
    slot_component = np.repeat(component_first[tasks[:, 0]] - 1, np.diff(first)) + forest
    background = forest == 0
    slot_shift = (
        shift[np.where(background, 0, slot_component)] if len(shift) else np.zeros_like(forest)
    )
    sums = np.empty(len(forest), np.int64)
    spread(
        kernels.float_terms,
        len(tasks),
        threads,
        numbers,
        prov,
        parent,
        tasks,
        first,
        slot_shift,
        sums,
    )
    total = np.zeros(len(area), np.int64)
    np.add.at(total, slot_component[~background], sums[~background])
    v_min, v_max = _from_key(stats[:, 4]), _from_key(stats[:, 5])
    return float_mean(total, shift, np.maximum(area, 1), v_max == np.inf, v_min == -np.inf)


def _from_key(keys: np.ndarray) -> np.ndarray:
    """float64 values from their kernels.order_key keys (the map is its own inverse)."""
    return (keys ^ ((keys >> 63) & 0x7FFFFFFFFFFFFFFF)).view(np.float64)
