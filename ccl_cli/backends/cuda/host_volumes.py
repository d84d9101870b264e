"""Volumes in host memory labeled on a CUDA device (the Python API's device='cuda').

A batch whose labeling fits the device budget (slabs.device_budget) goes up whole and is
labeled as a device batch (device.py's volume_table and volume_counts), its labels copied
back into the caller's array. Otherwise each volume goes alone: one that fits as a batch
of one, a larger one in slabs of planes (slabs.py) whose values go up slab by slab and
whose labels come back to host memory as each slab finishes, so a volume larger than the
device's memory is labeled with the same bytes as one pass.
"""

from __future__ import annotations

import numpy as np

from ...contract.params import LabelParams
from ...contract.stats import StatsTable
from . import device, slabs, volumes
from .loader import import_cupy


def label_host_volumes(
    batch: np.ndarray, params: LabelParams, labels: np.ndarray, statistics: bool, index: int
) -> tuple[list[StatsTable] | None, list[int]]:
    """Label the numpy batch of volumes (N, D, H, W) on CUDA device `index` into `labels`
    (uint32, C-contiguous, same shape). Returns the statistics of each volume's kept
    components (None without `statistics`) and K' per volume. The call waits for the
    device."""
    cupy = import_cupy()
    batch = np.ascontiguousarray(batch)
    n, depth, height, width = batch.shape
    voxels = depth * height * width
    per_voxel = slabs.voxel_bytes(batch.dtype, params, uploaded=True)
    with cupy.cuda.Device(index):
        budget = slabs.device_budget(index)
        fits = volumes.fits_one_piece(batch.shape, params) and voxels * per_voxel <= budget
        if fits and n * voxels * per_voxel <= budget:
            return _in_one_piece(batch, params, labels, statistics)
        tables: list[StatsTable] = []
        kept: list[int] = []
        for i in range(n):
            if fits:
                volume_tables, volume_kept = _in_one_piece(
                    batch[i : i + 1], params, labels[i : i + 1], statistics
                )
                tables += volume_tables or []
                kept += volume_kept
                continue
            halo = slabs.halo_planes(params)
            plan = slabs.plan_slabs(depth, height * width, per_voxel, budget, halo)
            source = slabs.HostVolume(batch[i], labels[i])
            result = slabs.label_in_slabs(source, params, statistics, plan)
            kept.append(result.kept)
            if statistics:
                words = result.table.get()
                integer = batch.dtype.kind != "f"
                tables.append(volumes.table_view(words, result.kept, integer).copy())
    return (tables if statistics else None), kept


def _in_one_piece(
    batch: np.ndarray, params: LabelParams, labels: np.ndarray, statistics: bool
) -> tuple[list[StatsTable] | None, list[int]]:
    """label_host_volumes of a batch that fits the device: uploaded whole, labeled as a
    device batch, its labels copied back."""
    cupy = import_cupy()
    values = cupy.asarray(batch)
    out = cupy.empty(batch.shape, cupy.uint32)
    tables = None
    if statistics:
        table, counts = device.volume_table(values, params, out)
        tables = table.to_numpy()
    else:
        counts = cupy.empty(len(batch), cupy.uint32)
        device.volume_counts(values, params, out, counts)
    out.get(out=labels)
    return tables, [int(k) for k in counts.get()]
