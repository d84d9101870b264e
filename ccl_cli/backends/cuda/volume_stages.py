"""The host side of src/volume_stages.cu: morphology, smoothing and the fill of added voxels
on batches of volumes (N, D, H, W), for CudaStages (stages.py) when the connectivity is a
volume's.

Arrays are contiguous CuPy arrays whose last three axes are (D, H, W); the results equal
the numpy of backends/cpu/stages.py and contract/stages.py bit for bit. Every function
queues work on the current stream and never waits.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrays import elementwise
from .kernel_names import kernel_name
from .loader import GEOMETRY, KERNEL_SUFFIX, device_kernels, import_cupy

_ROW_THREADS = GEOMETRY["GCCL_VOLUME_ROW_THREADS"]
_MAX_ROW_BLOCKS = 1 << 16  # the row kernels loop over rows: enough blocks to fill any device


def _shape(array: Any) -> tuple[int, int, int, int]:
    """(N, D, H, W) of a batch of volumes, or (1, D, H, W) of one."""
    depth, height, width = (int(side) for side in array.shape[-3:])
    return int(np.prod(array.shape[:-3], dtype=np.int64)), depth, height, width


def morph(mask: Any, op: str, iterations: int, connectivity: int) -> Any:
    """`mask` (bools) eroded or dilated `iterations` times with the element of the
    connectivity (gccl_volume_{erode,dilate}_*), one launch per step, ping-ponging
    between two buffers."""
    cupy = import_cupy()
    source = cupy.ascontiguousarray(mask).view(cupy.uint8)
    if iterations == 0:
        return source.view(cupy.bool_)
    n, depth, height, width = _shape(source)
    rows = n * depth * height
    kernels = device_kernels(mask.device.id)
    buffers = [cupy.empty_like(source) for _ in range(min(iterations, 2))]
    geometry = (np.uint32(depth), np.uint32(height), np.uint32(width), np.uint64(rows))
    for step in range(iterations):
        target = buffers[step % 2]
        name = kernel_name("gccl_volume_{op}_{connectivity}", op=op, connectivity=connectivity)
        blocks = min(rows, _MAX_ROW_BLOCKS)
        kernels.launch(name, blocks, (_ROW_THREADS,), (source, target, *geometry))
        source = target
    return source.view(cupy.bool_)


def smooth(values: Any, mask: Any, weights: tuple[int, ...]) -> Any:
    """float64 batch: the normalized convolution of `values` over `mask` on the mask, NaN
    off it (backends/cpu/stages.py's smooth_numpy with rank 3): the masked sums (float64
    for float values, int64 for integers), one pass per axis x, y, z, then the quotient."""
    cupy = import_cupy()
    values = cupy.ascontiguousarray(values)
    dtype = np.dtype(values.dtype)
    mask = cupy.ascontiguousarray(mask).view(cupy.uint8)
    sums = cupy.float64 if dtype.kind == "f" else cupy.int64
    size = values.size
    total, count = cupy.empty(values.shape, sums), cupy.empty(values.shape, sums)
    storage = values.view(cupy.uint8) if dtype == np.bool_ else values
    suffix = KERNEL_SUFFIX[dtype]
    masked = (storage, mask, total, count, np.uint64(size))
    elementwise(
        values, kernel_name("gccl_volume_smooth_masked_{dtype}", dtype=suffix), masked, size
    )
    _, depth, height, width = _shape(values)
    weights_array = cupy.asarray(np.array(weights, np.int32))
    radius = np.int32(len(weights) // 2)
    spare = (cupy.empty_like(total), cupy.empty_like(count))
    accumulator = "f64" if dtype.kind == "f" else "i64"
    name = kernel_name("gccl_volume_smooth_pass_{accumulator}", accumulator=accumulator)
    for stride, length in ((1, width), (width, height), (width * height, depth)):
        args = (total, count, *spare, np.uint64(size), np.uint64(stride), np.uint32(length))
        elementwise(values, name, (*args, weights_array, radius), size)
        (total, count), spare = spare, (total, count)
    out = cupy.empty(values.shape, cupy.float64)
    finish = (total, count, mask, out, np.uint64(size))
    elementwise(
        values, kernel_name("gccl_volume_smooth_finish_{dtype}", dtype=suffix), finish, size
    )
    return out


def fill_added(values: Any, readings: Any, mask: Any, radius: int) -> Any:
    """contract.stages.fill_added of a contiguous batch of volumes, the added voxels being
    `mask` and not `readings` (contiguous bools): a new array (gccl_volume_fill_added_*)."""
    cupy = import_cupy()
    dtype = np.dtype(values.dtype)
    out = cupy.empty(values.shape, dtype)
    _, depth, height, width = _shape(values)
    low = int(np.iinfo(dtype).min) if dtype.kind == "i" else 0
    args = (
        values,
        readings.view(cupy.uint8),
        mask.view(cupy.uint8),
        out,
        np.uint32(depth),
        np.uint32(height),
        np.uint32(width),
        np.uint64(values.size),
        np.int32(radius),
        np.int64(low),
    )
    elementwise(
        values,
        kernel_name("gccl_volume_fill_added_{dtype}", dtype=KERNEL_SUFFIX[dtype]),
        args,
        values.size,
    )
    return out
