"""The CPU labeling engine: compiled loops (ccl_cli/native/src/engine.c, in the extension
module ccl_cli.native.gccl_cpu) over row strips, on every core.

Each image of a batch is cut into row strips, enough to keep the threads busy
(one strip per image when the batch has as many images as threads). Strips
are labeled at once (labels and per-run statistics in one pass), their seams
joined, and every label image written in one more pass; the order of the
labels and every statistic are those of the README's contract whatever the
strips and the threads (native/src/engine.h says why). This module plans the strips,
holds the working arrays and hands ranges of strips or images to the engine's threads
(native/src/pool.c).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import pairwise

import numpy as np

from ...contract.cleaning import fill_holes, kept_components, selects
from ...contract.params import (
    LabelParams,
    canonical_bools,
    dtype_max,
    stored_threshold,
    tau_tolerance,
)
from ...contract.stages import has_stages, label_input
from ...contract.stats import (
    StatsTable,
    empty_table,
    float_mean,
    float_sum_shift,
    nan_extremes,
)
from ...native import gccl_cpu
from ..base import NARROW_LIMIT, usable_cores
from .scratch import scratch
from .stages import NumpyStages

#: Fewest rows a strip gets: thinner strips cost more in seams than they gain.
MIN_STRIP_ROWS = 32
#: Fewest pixels a strip gets: handing a strip to another thread and waiting for it
#: costs about as much as labeling this many pixels (binary and tau images).
MIN_STRIP_PIXELS = 1 << 15
#: Fewest components (over the strips of a batch) whose per-component passes use every thread.
SPREAD_COMPONENTS = 50_000
#: Most pixels labeled at once: a larger batch goes in chunks of whole images, so that
#: the working arrays (8 bytes and more per pixel) stay small enough to be reused.
CHUNK_PIXELS = 1 << 24

#: A statistics record's int64 columns (engine.h's gccl_record), and where its fields are.
RECORD = gccl_cpu.RECORD_BYTES // 8
COLUMN = gccl_cpu.RECORD_COLUMNS
#: Pixel types of the engine (engine.h's enum gccl_type); 1-bit images are read as bytes.
PIXEL_TYPES = {np.dtype(name): code for name, code in gccl_cpu.PIXEL_TYPES.items()}
#: Foreground rules (engine.h's enum gccl_rule): every non-NaN pixel, v != rule_value,
#: v > rule_value, v < rule_value.
RULES = gccl_cpu.FOREGROUND_RULES

# The process whose helper threads these are (a forked child starts its own), and how many.
_helpers = [0, 0]
_helpers_lock = threading.Lock()


@dataclass
class Labeled:
    """What labeling a batch gives besides its labels: per image, the statistics
    of the kept components (None where they were not asked for), K before min-area,
    K' after it, and the label images too wide for uint16 (as uint32, by index;
    backends.base)."""

    tables: list[StatsTable] | None
    components: list[int]
    kept: np.ndarray
    wide: dict[int, np.ndarray] = field(default_factory=dict)


@functools.cache
def _cores() -> int:
    return usable_cores()


#: This thread's cap on the engine's threads (threads_at_most); unset: none.
_cap = threading.local()


def pool_size() -> int:
    """The threads the engine runs on at most: the cores this process may use, or fewer
    where the calling thread set a cap (threads_at_most)."""
    cap = getattr(_cap, "threads", None)
    return _cores() if cap is None else max(1, min(cap, _cores()))


@contextmanager
def threads_at_most(count: int) -> Iterator[None]:
    """Calls of the engine from this thread use at most `count` threads meanwhile: a caller
    that itself runs on one of several threads (a Dask worker's task) takes its share of
    the cores, not all of them."""
    before = getattr(_cap, "threads", None)
    _cap.threads = count if before is None else min(count, before)
    try:
        yield
    finally:
        _cap.threads = before


def engine_threads(threads: int) -> int:
    """The threads the engine can use: `threads`, at most pool_size()."""
    return max(1, min(threads, pool_size()))


def label_batch(
    batch: np.ndarray,
    params: LabelParams,
    threads: int,
    out: np.ndarray,
    statistics: bool = True,
) -> Labeled:
    """Label the (N, H, W) numpy batch into `out` (uint32, or uint16 when narrowed).

    The batch is cut into strips for `threads` threads (plan), which run on
    at most pool_size() threads. Morphology and smoothing
    (contract.stages) decide the labels; statistics always read the original
    values. A batch of more than CHUNK_PIXELS is labeled in chunks of images.
    Without `statistics` no table is made (Labeled.tables is None), only the counts.
    Images of no pixels return at once, whatever their other extent.
    """
    count, height, width = batch.shape
    if count == 0 or height * width == 0:
        tables = [empty_table(batch.dtype.kind != "f") for _ in range(count)]
        return Labeled(tables if statistics else None, [0] * count, np.zeros(count, np.int64))
    per = max(1, CHUNK_PIXELS // (height * width))
    if count <= per:
        return _label_batch(batch, params, threads, out, statistics)
    chunks = [
        (
            start,
            _label_batch(
                batch[start : start + per], params, threads, out[start : start + per], statistics
            ),
        )
        for start in range(0, count, per)
    ]
    return Labeled(
        [table for _, chunk in chunks for table in chunk.tables or ()] if statistics else None,
        [components for _, chunk in chunks for components in chunk.components],
        np.concatenate([chunk.kept for _, chunk in chunks]),
        {start + n: wide for start, chunk in chunks for n, wide in chunk.wide.items()},
    )


def spread(entry: Callable[[int, int], None], tasks: int, threads: int) -> None:
    """An entry point of a Batch or Volumes over contiguous ranges of the tasks, on up to
    engine_threads(threads) threads: this one and the engine's helpers (native/src/pool.c).
    Every task writes only its own part of the arrays, so the ranges change no result.
    An entry that ran out of memory raises MemoryError."""
    parts = 1 if threads <= 1 else min(engine_threads(threads), tasks)
    if parts > 1:
        start_helpers(parts - 1)
    entry(tasks, max(parts, 1))


def start_helpers(count: int) -> None:
    """Have at least `count` of the engine's helper threads in this process (daemons,
    each in gccl_help for good with the GIL released): as many as a call asked for, so
    that no more threads poll for jobs than the jobs use."""
    with _helpers_lock:
        if _helpers[0] != os.getpid():  # a forked child has none of its parent's
            _helpers[:] = [os.getpid(), 0]
        for _ in range(_helpers[1], count):
            threading.Thread(target=gccl_cpu.run_helper, name="gccl-cpu", daemon=True).start()
            _helpers[1] += 1


def label_image(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, StatsTable, int]:
    """Label one (H, W) image: (labels uint32, stats of kept components, K before min-area)."""
    labels = np.empty((1, *values.shape), np.uint32)
    labeled = label_batch(values[np.newaxis], params, pool_size(), labels)
    assert labeled.tables is not None
    return labels[0], labeled.tables[0], labeled.components[0]


def raster_components(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, int]:
    """Dense labels 1..K of one image in raster order, and K (no min-area)."""
    labels, _, count = label_image(values, replace(params, min_area=0))
    return labels, count


def foreground_rule(dtype: np.dtype, params: LabelParams) -> tuple[int, float]:
    """contract.params.foreground_mask as (rule, rule_value) for the engine, which compares
    in float64.

    float64 holds every value of a supported dtype exactly, so the comparison
    there is the one foreground_mask makes natively or in float64.
    """
    threshold = stored_threshold(dtype, params)
    if threshold is not None:
        rule = RULES["below"] if params.invert else RULES["above"]
        return rule, float(threshold)
    if params.background is None:
        return RULES["all"], 0.0
    target = params.background
    if params.invert:
        target = -target if dtype.kind == "f" else dtype_max(dtype) - target
    return RULES["not"], float(target)


@functools.lru_cache(maxsize=16)
def reach_table(dtype: np.dtype, tau: float, relative: float, quadratic: float) -> np.ndarray:
    """The reach of every value v of an 8- or 16-bit integer dtype under a growing
    tolerance, at v - the dtype's minimum (engine.h's `reaches`): the largest integer
    difference within tau_tolerance(|v|), at most the dtype's span. Made once per
    tolerance, so that the engine looks a pixel's reach up instead of computing it."""
    info = np.iinfo(dtype)
    values = np.arange(int(info.min), int(info.max) + 1, dtype=np.float64)
    limit = tau_tolerance(np.abs(values), tau, relative, quadratic)
    span = float(info.max) - float(info.min)
    reach = np.where(limit >= span, span, np.where(limit > 0, np.floor(limit), 0))
    table = reach.astype(np.int32)
    table.flags.writeable = False
    return table


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
    return tasks_of(count, cuts)


def tasks_of(count: int, cuts: list[int]) -> np.ndarray:
    """Tasks (item, start, end): the parts between consecutive `cuts` of each of `count`
    images or volumes, in order."""
    tasks = np.empty((count, len(cuts) - 1, 3), np.int64)
    tasks[:, :, 0] = np.arange(count)[:, None]
    tasks[:, :, 1] = cuts[:-1]
    tasks[:, :, 2] = cuts[1:]
    return tasks.reshape(-1, 3)


def _numbers(values: np.ndarray) -> np.ndarray:
    """Values as the engine reads them: 1-bit as bytes 0/1."""
    return values.view(np.uint8) if values.dtype == np.bool_ else values


def _inputs(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, LabelParams, np.ndarray]:
    """The image the engine labels, its parameters, and the values the statistics
    read (contract.stages.label_input, image by image)."""
    if not has_stages(params):
        return values, params, values
    staged = [label_input(image, params, np, NumpyStages()) for image in values]
    image = np.ascontiguousarray(np.stack([image for image, _, _ in staged]))
    read = np.ascontiguousarray(np.stack([read for _, _, read in staged]))
    return image, staged[0][1], read


def _label_batch(
    batch: np.ndarray,
    params: LabelParams,
    threads: int,
    out: np.ndarray,
    statistics: bool = True,
    read: np.ndarray | None = None,
) -> Labeled:
    """label_batch of one chunk of images of at least a pixel each; read: the values the
    statistics read, where they are not the batch's own (the filled labels' statistics,
    _filled)."""
    values = np.ascontiguousarray(canonical_bools(batch))
    count, height, width = values.shape
    if height * width >= 2**31 - 1:
        raise ValueError(f"an image may hold at most 2**31 - 2 pixels, got {height}x{width}")
    image, label_params, values = _inputs(values, params)
    if read is not None:
        values = read
    rule, rule_value = foreground_rule(image.dtype, label_params)
    image, numbers = _numbers(image), _numbers(values)
    floating = values.dtype.kind == "f"
    binary = label_params.tau is None
    job = gccl_cpu.Batch(
        count=count,
        height=height,
        width=width,
        image_type=PIXEL_TYPES[image.dtype],
        value_type=PIXEL_TYPES[numbers.dtype],
        rule=rule,
        connectivity=label_params.connectivity,
        tau_mode=not binary,
        floating=floating,
        min_area=params.min_area,
        label_bytes=out.itemsize,
        rule_value=rule_value,
        tau=0.0 if label_params.tau is None else float(label_params.tau),
        relative=label_params.tau_relative,
        quadratic=label_params.tau_quadratic,
        image=image,
        values=numbers,
    )
    grows = label_params.tau_relative > 0 or label_params.tau_quadratic > 0
    if grows and image.dtype.kind in "ui" and image.dtype.itemsize <= 2:
        job.reaches = reach_table(
            image.dtype,
            float(label_params.tau or 0),
            label_params.tau_relative,
            label_params.tau_quadratic,
        )

    # Provisional labels live in the output when it is uint32, else in a scratch image.
    in_place = out.dtype == np.uint32 and out.flags.c_contiguous
    prov = out.view(np.int32) if in_place else scratch("prov", values.shape, np.int32)
    parent = scratch("parent", (count, height * width + 1), np.int32)
    parent[:, 0] = 0
    tasks = plan(count, height, width, threads)
    # a binary strip makes at most one label per run, a tau strip one per pixel
    per_row = (width + 1) // 2 if binary else width
    acc_first = np.zeros(len(tasks) + 1, np.int64)
    np.cumsum((tasks[:, 2] - tasks[:, 1]) * per_row, out=acc_first[1:])
    local_counts = np.empty(len(tasks), np.int64)
    job.prov, job.parent, job.tasks, job.acc_first = prov, parent, tasks, acc_first
    job.acc = scratch("acc", (acc_first[-1], RECORD), np.int64)
    job.local_counts, job.lasts = local_counts, np.empty(len(tasks), np.int64)
    spread(job.label_strips, len(tasks), threads)

    first = np.zeros(len(tasks) + 1, np.int64)  # slot first[t] is task t's background
    np.cumsum(local_counts + 1, out=first[1:])
    components = np.empty(count, np.int64)
    job.first, job.forest, job.components = first, np.arange(first[-1], dtype=np.int64), components
    job.image_tasks = np.arange(count + 1, dtype=np.int64) * (len(tasks) // count)
    # the per-component passes, image by image, on one thread unless there are many components
    post = threads if first[-1] >= SPREAD_COMPONENTS else 1
    spread(job.merge_seams, count, post)
    component_first = np.zeros(count + 1, np.int64)
    np.cumsum(components, out=component_first[1:])
    # each component's record, in acc: the strips' records are not read after these passes
    stats = job.acc[: component_first[-1]]
    job.component_first, job.stats = component_first, stats
    spread(job.reduce_stats, count, post)
    job.pack_stats(count, 1)
    if floating and statistics:
        job.mean = _float_means(job, threads)
    kept = np.empty(count, np.int64)
    kept_id = scratch("kept_id", (len(stats),), np.int64)
    job.kept_id, job.kept = kept_id, kept
    spread(job.keep_components, count, post)
    if selects(params):
        renumber_kept(stats[:, COLUMN["area"]], component_first, params, kept_id, kept)
    tables = _tables(job, kept, floating, post) if statistics else None

    def write(target: np.ndarray, chosen: np.ndarray) -> None:  # the final labels of chosen[n]
        job.label_bytes, job.labels, job.chosen = target.itemsize, target, chosen.view(np.uint8)
        spread(job.write_labels, len(tasks), threads)

    wide: dict[int, np.ndarray] = {}
    if out.dtype == np.uint16:
        too_many = kept > NARROW_LIMIT
        write(out, ~too_many)
        if too_many.any():
            write(prov, too_many)
            wide = {int(n): prov[n].view(np.uint32).copy() for n in np.flatnonzero(too_many)}
    else:
        write(prov, np.ones(count, bool))
        if not in_place:
            out[...] = prov.view(np.uint32)
    if params.fill_holes:
        tables = _filled(out, wide, values, params, threads, statistics)
    return Labeled(tables, components.tolist(), kept, wide)


def _tables(
    job: gccl_cpu.Batch, kept: np.ndarray, floating: bool, threads: int
) -> list[StatsTable]:
    """The statistics table of each image of `job` (its kept components' columns)."""
    kept_first = np.zeros(len(kept) + 1, np.int64)
    np.cumsum(kept, out=kept_first[1:])
    ints = np.empty((5, int(kept_first[-1])), np.int64)
    floats = np.empty((5, int(kept_first[-1])), np.float64)
    job.kept_first, job.ints, job.floats = kept_first, ints, floats
    spread(job.kept_columns, len(kept), threads)
    return [_table(ints[:, lo:hi], floats[:, lo:hi], floating) for lo, hi in pairwise(kept_first)]


def renumber_kept(
    area: np.ndarray,
    component_first: np.ndarray,
    params: LabelParams,
    kept_id: np.ndarray,
    kept: np.ndarray,
) -> None:
    """kept_id (each component's new label, 0 when removed) and kept (K' per image or
    volume) by the contract's selection (--max-area, --largest:
    contract.cleaning.kept_components)."""
    keep = kept_components(area, component_first, params)
    image = np.repeat(np.arange(len(kept)), np.diff(component_first))
    before = np.cumsum(keep) - keep  # kept components before each one, over the batch
    kept[:] = np.bincount(image[keep], minlength=len(kept))
    kept_id[:] = np.where(keep, before - (np.cumsum(kept) - kept)[image] + 1, 0)


def _filled(
    out: np.ndarray,
    wide: dict[int, np.ndarray],
    values: np.ndarray,
    params: LabelParams,
    threads: int,
    statistics: bool,
) -> list[StatsTable] | None:
    """Fill the holes of every final label image (contract.cleaning.fill_holes), and the
    statistics of the filled labels (where `statistics`).

    Those are the engine's: it labels the label image itself, equal labels joining
    across 8-neighbours (tau 0, background 0), which gives every filled component back
    under its own label (contract.cleaning), and reads `values` for the statistics.
    """
    measure = LabelParams(background=0, tau=0, connectivity=8)
    tables = []
    for n in range(len(out)):
        labels = wide.get(n, out[n])
        fill_holes(labels, params, region_labels)
        if not statistics:
            continue
        again = scratch("filled", (1, *labels.shape), np.uint32)
        measured = _label_batch(labels[None], measure, threads, again, read=values[n : n + 1])
        assert measured.tables is not None
        tables.append(measured.tables[0])
    return tables if statistics else None


def region_labels(mask: np.ndarray, connectivity: int) -> tuple[np.ndarray, int]:
    """Dense labels 1..M of the True pixels of `mask` in raster order, and M
    (contract.cleaning's RegionLabeler)."""
    labels, count = raster_components(mask, LabelParams(connectivity=connectivity))
    return labels, count


def _table(ints: np.ndarray, floats: np.ndarray, floating: bool) -> StatsTable:
    """The StatsTable of gccl_kept_columns' columns (views of them)."""
    area, x, y, width, height = ints
    centroid_x, centroid_y, mean, v_min, v_max = floats
    if floating:
        nan_extremes(v_min, v_max)
    return StatsTable(
        area, x, y, width, height, centroid_x, centroid_y, mean, v_min, v_max, not floating
    )


def _float_means(job: gccl_cpu.Batch, threads: int) -> np.ndarray:
    """The mean of every component of a float batch (contract.stats' rule).

    One more pass over the pixels: each value's term needs its component's
    shift, which needs the component's area and largest finite |v|.
    """
    stats, tasks, first = job.stats, job.tasks, job.first
    forest, component_first = job.forest, job.component_first
    area = stats[:, COLUMN["area"]]
    shift = float_sum_shift(stats[:, COLUMN["total"]].view(np.float64), area)
    slot_component = np.repeat(component_first[tasks[:, 0]] - 1, np.diff(first)) + forest
    background = forest == 0
    slot_shift = (
        shift[np.where(background, 0, slot_component)] if len(shift) else np.zeros_like(forest)
    )
    sums = np.empty(len(forest), np.int64)
    job.shift, job.sums = slot_shift, sums
    spread(job.float_terms, len(tasks), threads)
    total = np.zeros(len(area), np.int64)
    np.add.at(total, slot_component[~background], sums[~background])
    v_min, v_max = _from_key(stats[:, COLUMN["lo"]]), _from_key(stats[:, COLUMN["hi"]])
    return float_mean(total, shift, np.maximum(area, 1), v_min, v_max)


def _from_key(keys: np.ndarray) -> np.ndarray:
    """float64 values from their order keys (engine.c's order_key, its own inverse)."""
    return (keys ^ ((keys >> 63) & 0x7FFFFFFFFFFFFFFF)).view(np.float64)
