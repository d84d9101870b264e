"""--polygons on the CUDA backend: outlines of a labeled batch while it is on the device.

The kernels of ccl_cli/backends/cuda/src/outline.cu trace the same ring corners as the
CPU's tracer (ccl_cli/native/src/outline.c) and put them in the canonical order that
`contract.outlines.Outlines` defines, with two sorts of packed 64-bit keys (CuPy's
radix sort): parts by (feature, part), then rings by (canonical part, start
vertex). Only the canonical arrays travel to the host, in one pinned copy.
A batch costs about 15 kernel launches plus log2(corners) rounds of pointer
jumping, and a few waits for the device: the corner count, the ring count,
the two sorts, the copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...contract.outlines import PART_CONNECTIVITY, Outlines, split_batch
from ...contract.params import LabelParams
from .kernel_names import kernel_name
from .labels import dense_labels
from .loader import CHUNK, CHUNK_THREADS, GEOMETRY, device_kernels, import_cupy

_THREADS = GEOMETRY["GCCL_OUTLINE_THREADS"]
#: The 4-connected parts of a label image: label equality, background 0.
PART_PARAMS = LabelParams(tau=0, connectivity=PART_CONNECTIVITY, background=0)


@dataclass
class DeviceCorners:
    """The ring corners of a batch with their ring order (device arrays, outline.cu's layout).

    x, y: the corner (int32); part, feature: global part and component index
    (uint32, image-major); next: index of the ring's next corner; low: start
    vertex key << 32 | steps to the start (uint64). parts: parts per image.
    """

    x: Any
    y: Any
    part: Any
    feature: Any
    next: Any
    low: Any
    parts: np.ndarray


def device_outlines(labels: Any, counts: list[int]) -> list[Outlines]:
    """Outlines of components 1..counts[i] of each image of a contiguous (N, H, W) u32 batch."""
    label_base = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=label_base[1:])
    corners = device_corners(labels, label_base)
    if len(corners.x) == 0:  # no components at all
        return [Outlines.empty() for _ in counts]
    vertices, rings, parts, features, areas = _canonical(corners, int(label_base[-1]))
    return split_batch(vertices, rings, parts, features, areas, label_base)


def device_corners(labels: Any, label_base: np.ndarray) -> DeviceCorners:
    """The ring corners of a labeled device batch, ranked; components label_base[i] + 1..
    label_base[i + 1] are image i's labels 1..K_i (the batch's feature numbering)."""
    cupy = import_cupy()
    kernels = device_kernels(labels.device.id)
    n, height, width = labels.shape
    parts = cupy.empty(labels.shape, cupy.uint32)
    components = dense_labels(labels, PART_PARAMS, parts)
    total = labels.size
    chunks = -(-total // CHUNK)
    mask = cupy.empty(total, cupy.uint8)
    before = cupy.empty(total, cupy.uint16)
    chunk_counts = cupy.empty(chunks + 1, cupy.int64)
    geometry = (np.uint64(total), np.uint32(height), np.uint32(width))
    mask_args = (parts, *geometry, mask, before, chunk_counts)
    kernels.launch(kernel_name("gccl_outline_mask"), chunks, (CHUNK_THREADS,), mask_args)
    chunk_first = cupy.cumsum(chunk_counts)
    corner_count, part_counts = _to_host(cupy, chunk_first[-1:], components)
    count = int(corner_count[0])
    part_base = np.zeros(n + 1, np.int64)
    np.cumsum(part_counts, out=part_base[1:])
    bases = cupy.asarray(np.stack([part_base[:-1], label_base[:-1]], axis=1).astype(np.uint64))
    x, y = cupy.empty(count, cupy.int32), cupy.empty(count, cupy.int32)
    part, feature = cupy.empty(count, cupy.uint32), cupy.empty(count, cupy.uint32)
    nxt, jump = cupy.empty(count, cupy.int64), cupy.empty(count, cupy.int64)
    low = cupy.empty(count, cupy.uint64)
    inputs = (parts, labels, mask, before, chunk_first, bases, *geometry)
    outputs = (x, y, part, feature, nxt, jump, low)
    kernels.launch(
        kernel_name("gccl_outline_corners"), -(-total // _THREADS), (_THREADS,), inputs + outputs
    )
    # Pointer jumping: after r rounds each corner has seen the 2^r corners from it
    # on, and 2^r >= count covers the longest ring.
    jump_next, low_next = cupy.empty_like(jump), cupy.empty_like(low)
    size = np.uint64(count)
    for round_ in range((count - 1).bit_length() if count else 0):
        args = (jump, low, jump_next, low_next, size, np.uint64(1 << round_))
        kernels.launch(kernel_name("gccl_outline_jump"), -(-count // _THREADS), (_THREADS,), args)
        jump, jump_next, low, low_next = jump_next, jump, low_next, low
    return DeviceCorners(x, y, part, feature, nxt, low, part_counts.astype(np.int64))


def _canonical(
    corners: DeviceCorners, features: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(vertices, ring_offsets, part_offsets, feature_offsets, areas) of the batch, on the host.

    The order is Outlines': rings by (feature, part, start vertex), where parts
    of a feature go in raster order of their first pixel, which is the order
    of their global part index (see gccl_outline_parts and gccl_outline_rank).
    """
    cupy = import_cupy()
    c = corners
    kernels = device_kernels(c.x.device.id)
    count, parts = len(c.x), int(c.parts.sum())
    grid, size = -(-count // _THREADS), np.uint64(count)
    part_keys = cupy.empty(parts, cupy.uint64)
    ring_keys = cupy.empty(count // 4, cupy.uint64)  # a ring has at least 4 corners
    rings_found = cupy.zeros(1, cupy.uint64)
    kernels.launch(
        kernel_name("gccl_outline_starts"),
        grid,
        (_THREADS,),
        (c.low, c.part, c.feature, size, part_keys, ring_keys, rings_found),
    )
    rings = int(_to_host(cupy, rings_found)[0][0])
    sorted_parts = cupy.sort(part_keys)
    rank = cupy.empty(parts, cupy.uint32)
    feature_offsets = cupy.full(features + 1, -1, cupy.int64)  # -1: a feature without outline
    kernels.launch(
        kernel_name("gccl_outline_parts"),
        -(-parts // _THREADS),
        (_THREADS,),
        (sorted_parts, np.uint64(parts), np.uint64(features), rank, feature_offsets),
    )
    ring_keys = ring_keys[:rings]
    ring_args = (ring_keys, rank, np.uint64(rings))
    kernels.launch(
        kernel_name("gccl_outline_ring_keys"), -(-rings // _THREADS), (_THREADS,), ring_args
    )
    sorted_rings = cupy.sort(ring_keys)
    ring_of = cupy.empty(count, cupy.int64)
    ends = cupy.empty(rings + 1, cupy.int64)
    part_offsets = cupy.empty(parts + 1, cupy.int64)
    inputs = (c.low, c.next, c.part, rank, sorted_rings, size, np.uint64(rings), np.uint64(parts))
    kernels.launch(
        kernel_name("gccl_outline_rank"), grid, (_THREADS,), (*inputs, ring_of, ends, part_offsets)
    )
    ring_offsets = cupy.cumsum(ends)
    vertices = cupy.empty((count, 2), cupy.int32)
    twice_area = cupy.zeros(features, cupy.uint64)
    kernels.launch(
        kernel_name("gccl_outline_vertices"),
        grid,
        (_THREADS,),
        (c.x, c.y, c.next, c.low, c.feature, ring_of, ring_offsets, size, vertices, twice_area),
    )
    host = _to_host(cupy, vertices, ring_offsets, part_offsets, feature_offsets, twice_area)
    vertices, ring_offsets, part_offsets, feature_offsets, twice = host
    return vertices, ring_offsets, part_offsets, feature_offsets, twice.view(np.int64) // 2


def _to_host(cupy: Any, *arrays: Any) -> list[np.ndarray]:
    """Host copies of device arrays: pinned buffers, asynchronous copies, one wait."""
    import cupyx

    host = [cupyx.empty_pinned(a.shape, a.dtype) for a in arrays]
    for array, out in zip(arrays, host, strict=True):
        array.get(out=out, blocking=False)
    cupy.cuda.get_current_stream().synchronize()
    return host
