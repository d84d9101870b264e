"""--polygons on the CUDA backend: outlines of a labeled batch while it is on the device.

The kernels of ccl_cli/cuda/outline.cu emit the ring corners and their ring
order (the same corners the numpy tracer of ccl_cli.polygons finds); the shared
`polygons.canonical` then orders them with CuPy on the device, and only the
canonical arrays travel to the host.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..params import LabelParams
from ..polygons import PART_CONNECTIVITY, Corners, Outlines, canonical
from .cuda import _import_cupy, _kernels, dense_labels

_THREADS = 256  # GCCL_OUTLINE_THREADS
#: The 4-connected parts of a label image: label equality, background 0.
PART_PARAMS = LabelParams(tau=0, connectivity=PART_CONNECTIVITY, background=0)


def device_outlines(labels: Any, counts: list[int]) -> list[Outlines]:
    """Outlines of components 1..counts[i] of each image of a contiguous (N, H, W) u32 batch."""
    cupy = _import_cupy()
    corners = device_corners(labels)
    return canonical(corners, counts, labels.shape[2], cupy)


def device_corners(labels: Any) -> Corners:
    """The ring corners of a labeled device batch with their ring order (device arrays)."""
    cupy = _import_cupy()
    kernels = _kernels(labels.device.id)
    _, height, width = labels.shape
    parts = cupy.empty(labels.shape, cupy.uint32)
    dense_labels(labels, PART_PARAMS, parts)
    total = labels.size
    mask = cupy.empty(total, cupy.uint8)
    count = cupy.empty(total, cupy.uint8)
    geometry = (np.uint64(total), np.uint32(height), np.uint32(width))
    grid = -(-total // _THREADS)
    kernels.launch("gccl_outline_mask", grid, (_THREADS,), (parts, *geometry, mask, count))
    scanned = cupy.cumsum(count, dtype=cupy.int64)
    corners = int(scanned[-1]) if total else 0
    x, y = cupy.empty(corners, cupy.int32), cupy.empty(corners, cupy.int32)
    image, label, part = (cupy.empty(corners, cupy.uint32) for _ in range(3))
    nxt, key = cupy.empty(corners, cupy.int64), cupy.empty(corners, cupy.int64)
    kernels.launch(
        "gccl_outline_corners",
        grid,
        (_THREADS,),
        (parts, labels, mask, scanned, *geometry, x, y, image, label, part, nxt, key),
    )
    ring, position = _rank(kernels, cupy, key, nxt)
    return Corners(image, label, part, x, y, nxt, ring, position)


def _rank(kernels: Any, cupy: Any, key: Any, nxt: Any) -> tuple[Any, Any]:
    """(ring start, steps from it) of every corner: outline.cu's pointer jumping."""
    count = len(key)
    rounds = max(1, math.ceil(math.log2(max(count, 2))))
    grid, size = -(-count // _THREADS), np.uint64(count)
    low, jump = key.copy(), nxt.copy()
    low_next, jump_next = cupy.empty_like(low), cupy.empty_like(jump)
    for _ in range(rounds):
        args = (low, jump, low_next, jump_next, size)
        kernels.launch("gccl_outline_min_jump", grid, (_THREADS,), args)
        low, low_next, jump, jump_next = low_next, low, jump_next, jump
    to_tail = cupy.empty_like(key)
    kernels.launch(
        "gccl_outline_rank_init", grid, (_THREADS,), (key, low, nxt, to_tail, jump, size)
    )
    to_tail_next = low_next  # free buffers of the same size and dtype
    for _ in range(rounds):
        args = (to_tail, jump, to_tail_next, jump_next, size)
        kernels.launch("gccl_outline_rank_jump", grid, (_THREADS,), args)
        to_tail, to_tail_next, jump, jump_next = to_tail_next, to_tail, jump_next, jump
    ring, position = cupy.empty_like(key), cupy.empty_like(key)
    kernels.launch(
        "gccl_outline_rank_finish", grid, (_THREADS,), (nxt, jump, to_tail, ring, position, size)
    )
    return ring, position
