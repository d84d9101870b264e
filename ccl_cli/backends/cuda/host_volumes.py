"""Batches of volumes (N, D, H, W) labeled on a CUDA device: CudaBackend.label's volumes.

A device batch is labeled where it is (device.py's volume_table and volume_counts). A host
batch whose labeling fits the device budget (slabs.device_budget) goes up whole and is
labeled as a device batch, its labels copied back into the caller's array. Otherwise each
volume goes alone: one that fits as a batch of one, a larger one in slabs of planes
(slabs.py) whose values go up slab by slab and whose labels come back to host memory as
each slab finishes, so a volume larger than the device's memory is labeled with the same
bytes as one pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...contract.params import LabelParams
from ..base import BatchResult
from . import device, slabs, volumes
from .loader import import_cupy


def label_device_volumes(values: Any, params: LabelParams, statistics: bool) -> BatchResult:
    """Label the CuPy batch of volumes `values` on its device into new CuPy labels; the
    statistics come back to the host as StatsTables (the call waits for them)."""
    cupy = import_cupy()
    with values.device:
        labels = cupy.empty(values.shape, cupy.uint32)
        if statistics:
            table, _ = device.volume_table(values, params, labels)
            return BatchResult(labels, table.to_numpy(), list(table.components))
        counts = cupy.empty(len(values), cupy.uint32)
        device.volume_counts(values, params, labels, counts)
        return BatchResult(labels, [], [], counts=counts.get().astype(np.int64))


def label_host_volumes(
    batch: np.ndarray, params: LabelParams, labels: np.ndarray, statistics: bool, index: int
) -> BatchResult:
    """Label the numpy batch of volumes (N, D, H, W) on CUDA device `index` into `labels`
    (uint32, C-contiguous, same shape). The call waits for the device."""
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
        parts = []
        for i in range(n):
            if fits:
                parts.append(_in_one_piece(batch[i : i + 1], params, labels[i : i + 1], statistics))
                continue
            halo = slabs.halo_planes(params)
            plan = slabs.plan_slabs(depth, height * width, per_voxel, budget, halo)
            source = slabs.HostVolume(batch[i], labels[i])
            result = slabs.label_in_slabs(source, params, statistics, plan)
            if not statistics:
                parts.append(
                    BatchResult(labels[i : i + 1], [], [], counts=np.array([result.kept], np.int64))
                )
                continue
            words = result.table.get()
            integer = batch.dtype.kind != "f"
            table = volumes.table_view(words, result.kept, integer).copy()
            parts.append(BatchResult(labels[i : i + 1], [table], [result.components]))
    return BatchResult(
        labels,
        [table for part in parts for table in part.tables],
        [count for part in parts for count in part.components],
        counts=None if statistics else np.array([k for part in parts for k in part.kept], np.int64),
    )


def _in_one_piece(
    batch: np.ndarray, params: LabelParams, labels: np.ndarray, statistics: bool
) -> BatchResult:
    """label_host_volumes of a batch that fits the device: uploaded whole, labeled as a
    device batch, its labels copied back."""
    result = label_device_volumes(import_cupy().asarray(batch), params, statistics)
    result.labels.get(out=labels)
    result.labels = labels
    return result
