"""The CPU engine for volumes: compiled loops (ccl_cli/native/src/volume_*.c, in the extension
module ccl_cli.native.gccl_cpu) over slabs of planes, on every core.

Each volume of a batch (N, D, H, W) is cut into slabs along z, enough to keep the
threads busy. Slabs are labeled at once (runs and their union-find), their seams joined,
and every label volume written in one more pass that also gathers the statistics; the
order of the labels and every statistic are those of the README's contract whatever the
slabs and the threads (native/src/volume.h says why). This module plans the slabs,
holds the working arrays and hands ranges of slabs or volumes to the engine's threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ...contract.cleaning import selects
from ...contract.params import LabelParams, canonical_bools
from ...contract.stages import has_stages, label_input, smooth_problem
from ...contract.stats import (
    StatsTable,
    empty_table,
    float_mean,
    float_sum_shift,
    nan_extremes,
)
from ...native import gccl_cpu
from .labels import (
    PIXEL_TYPES,
    SPREAD_COMPONENTS,
    foreground_rule,
    renumber_kept,
    spread,
    tasks_of,
)
from .scratch import bound_volume_blocks, scratch
from .stages import NumpyStages

#: Most voxels of a slab: its labels are 32-bit, one at most per voxel.
SLAB_VOXELS = 2**31 - 2
#: Fewest voxels a slab gets: handing a slab to another thread and joining its seam
#: costs about as much as labeling this many voxels.
MIN_SLAB_VOXELS = 1 << 18
#: The largest label a uint32 label volume holds.
LABEL_LIMIT = 2**32 - 1


@dataclass
class VolumesLabeled:
    """What labeling a batch of volumes gives besides its labels: per volume, the
    statistics of the kept components (None when not asked for), K before min-area and
    K' after it."""

    tables: list[StatsTable] | None
    components: list[int]
    kept: list[int]


def plan(count: int, depth: int, height: int, width: int, threads: int) -> np.ndarray:
    """Tasks (volume, first plane, end plane): the same slabs for every volume."""
    plane = height * width
    if plane > SLAB_VOXELS:
        raise ValueError(
            f"a volume's plane may hold at most {SLAB_VOXELS} voxels, got {height}x{width}"
        )
    slabs = max(
        -(-threads // max(count, 1)) if depth * plane >= 2 * MIN_SLAB_VOXELS else 1,
        -(-depth // (SLAB_VOXELS // plane)),  # each slab holds at most SLAB_VOXELS
    )
    slabs = min(slabs, depth)
    cuts = [round(depth * i / slabs) for i in range(slabs + 1)]
    return tasks_of(count, cuts)


def _inputs(values: np.ndarray, params: LabelParams) -> tuple[np.ndarray, LabelParams, np.ndarray]:
    """The volumes the engine labels, their parameters, and the values the statistics read
    (contract.stages.label_input, volume by volume)."""
    if not has_stages(params):
        return values, params, values
    staged = [label_input(volume, params, np, NumpyStages()) for volume in values]
    image = np.ascontiguousarray(np.stack([image for image, _, _ in staged]))
    read = np.ascontiguousarray(np.stack([read for _, _, read in staged]))
    return image, staged[0][1], read


def label_volumes(
    batch: np.ndarray,
    params: LabelParams,
    threads: int,
    out: np.ndarray,
    statistics: bool = True,
    zeroed: bool = False,
) -> VolumesLabeled:
    """Label the (N, D, H, W) numpy batch of volumes into `out` (uint32, C-contiguous).

    zeroed: `out` is all 0 already (np.zeros: its pages are mapped as they are first
    written), so the background is not written: a sparse volume touches few of them.

    The volumes are cut into slabs for `threads` threads (plan). Morphology and
    smoothing (contract.stages) decide the labels; statistics always read the original
    values; min_area, max_area and largest keep components as in 2-D (contract.cleaning).
    Volumes of no voxels return at once. Raises MemoryError where the engine runs out of
    memory, ValueError where a volume has more than 2**32 - 1 kept components (uint32
    labels cannot hold them), fill_holes is asked for (holes are filled in images only) or
    a binomial smoothing too wide for volumes (contract.stages.smooth_problem).
    """
    if params.fill_holes:
        raise ValueError("fill_holes fills the holes of 2-D images, not of volumes")
    problem = smooth_problem(params.smooth, params.rank)
    if problem:
        raise ValueError(problem)
    count, depth, height, width = batch.shape
    if depth * height * width == 0 or count == 0:  # nothing to label, whatever the extents
        tables = [empty_table(batch.dtype.kind != "f", 3) for _ in range(count)]
        return VolumesLabeled(tables if statistics else None, [0] * count, [0] * count)
    values = np.ascontiguousarray(canonical_bools(batch))
    image, label_params, values = _inputs(values, params)
    rule, rule_value = foreground_rule(image.dtype, label_params)
    image, numbers = _numbers(image), _numbers(values)
    floating = values.dtype.kind == "f"
    tasks = plan(count, depth, height, width, threads)
    volumes = gccl_cpu.Volumes(
        count=count,
        depth=depth,
        height=height,
        width=width,
        image_type=PIXEL_TYPES[image.dtype],
        value_type=PIXEL_TYPES[numbers.dtype],
        rule=rule,
        connectivity=label_params.connectivity,
        tau_mode=label_params.tau is not None,
        floating=floating,
        min_area=params.min_area,
        statistics=statistics,
        selecting=selects(params),
        zeroed=zeroed,
        rule_value=rule_value,
        tau=0.0 if label_params.tau is None else float(label_params.tau),
        relative=float(label_params.tau_relative),
        quadratic=float(label_params.tau_quadratic),
        image=image,
        values=numbers,
        tasks=tasks,
        slabs=np.zeros(len(tasks) * gccl_cpu.SLAB_WORDS, np.int64),
        labels=out,
    )
    try:
        return _label(volumes, tasks, params, threads, floating, statistics)
    finally:
        spread(volumes.free, len(tasks), 1)


def _label(
    volumes: gccl_cpu.Volumes,
    tasks: np.ndarray,
    params: LabelParams,
    threads: int,
    floating: bool,
    statistics: bool,
) -> VolumesLabeled:
    """The engine's passes over the slabs of `volumes` (label_volumes)."""
    count = int(volumes.count)
    local_counts = np.empty(len(tasks), np.int64)
    volumes.local_counts = local_counts
    bound_volume_blocks()
    spread(volumes.label_slabs, len(tasks), threads)

    first = np.zeros(len(tasks) + 1, np.int64)  # slot first[t] is slab t's background
    np.cumsum(local_counts + 1, out=first[1:])
    components = np.empty(count, np.int64)
    volumes.first = first
    volumes.volume_tasks = np.arange(count + 1, dtype=np.int64) * (len(tasks) // count)
    volumes.forest = scratch("volume-forest", (int(first[-1]),), np.int64)
    volumes.components = components
    volumes.components_before = np.empty(len(tasks), np.int64)
    spread(volumes.merge_seams, count, threads)

    component_first = np.zeros(count + 1, np.int64)
    np.cumsum(components, out=component_first[1:])
    total = max(int(component_first[-1]), 1)
    kept = np.empty(count, np.int64)
    area = scratch("volume-area", (total,), np.int64)
    magnitude = scratch("volume-magnitude", (total if floating else 1,), np.int64)
    volumes.component_first, volumes.component_area = component_first, area
    volumes.component_magnitude = magnitude
    volumes.kept_id, volumes.kept = scratch("volume-kept-id", (total,), np.int64), kept
    spread(volumes.keep, count, threads)
    if selects(params):
        every = int(component_first[-1])
        renumber_kept(area[:every], component_first, params, volumes.kept_id[:every], kept)
    if kept.max(initial=0) > LABEL_LIMIT:
        raise ValueError(
            f"a volume has {int(kept.max())} components, more than uint32 labels can number "
            f"({LABEL_LIMIT}); min_area can drop the small ones"
        )
    shift = float_sum_shift(magnitude.view(np.float64), area) if floating and statistics else None
    volumes.shift = shift
    kept_first = np.zeros(count + 1, np.int64)
    np.cumsum(kept, out=kept_first[1:])
    rows = int(kept_first[-1])
    if not statistics:
        spread(volumes.write, len(tasks), threads)
        return VolumesLabeled(None, components.tolist(), kept.tolist())

    words = gccl_cpu.VOLUME_RECORD_BYTES // 8
    volumes.records = scratch("volume-records", (int(first[-1]) * words,), np.int64, dense=True)
    volumes.kept_first = kept_first
    volumes.kept_slot = scratch("volume-kept-slot", (rows,), np.int64)
    ints = np.empty((7, rows), np.int64)
    floats = np.empty((6, rows), np.float64)
    sums = np.empty(rows if floating else 0, np.int64)
    volumes.ints, volumes.floats, volumes.sums = ints, floats, sums
    spread(volumes.write, len(tasks), threads)
    spread(volumes.gather, count, threads)
    spread(volumes.columns, rows, threads if rows >= SPREAD_COMPONENTS else 1)
    if shift is not None:  # float volumes: kept rows are the kept components in order
        every = int(component_first[-1])
        kept_shift = shift[:every][volumes.kept_id[:every] > 0]
        v_min, v_max = floats[4], floats[5]
        floats[3] = float_mean(sums, kept_shift, ints[0], v_min, v_max)
    tables = [_table(ints[:, lo:hi], floats[:, lo:hi], floating) for lo, hi in pairwise(kept_first)]
    return VolumesLabeled(tables, components.tolist(), kept.tolist())


def _numbers(values: np.ndarray) -> np.ndarray:
    """Values as the engine reads them: 1-bit as bytes 0/1."""
    return values.view(np.uint8) if values.dtype == np.bool_ else values


def _table(ints: np.ndarray, floats: np.ndarray, floating: bool) -> StatsTable:
    """The StatsTable of gccl_volume_columns' columns (views of them)."""
    area, x, y, z, width, height, depth = ints
    centroid_x, centroid_y, centroid_z, mean, v_min, v_max = floats
    if floating:
        nan_extremes(v_min, v_max)
    table = StatsTable(
        area, x, y, width, height, centroid_x, centroid_y, mean, v_min, v_max, not floating
    )
    table.z, table.depth, table.centroid_z = z, depth, centroid_z
    return table
