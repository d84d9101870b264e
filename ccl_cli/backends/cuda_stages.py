"""The CUDA backend's StageOps: host side of cuda/morphology.cu and cuda/smooth.cu.

Arrays are contiguous CuPy batches (N, H, W) on the current device; the
results equal ccl_cli.stages' numpy versions bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .cuda import _SUFFIX, _import_cupy, _kernels

# Geometry shared with the .cu files.
_MORPH_TILE = (128, 16)  # pixels (w, h) per block of morphology.cu
_MORPH_THREADS = (32, 8)
_SMOOTH_TILE = 32  # output pixels per tile side in smooth.cu
_SMOOTH_THREADS = (32, 8)
_INT32_LIMIT = 2**31


class CudaStages:
    """Morphology and smoothing kernels for ccl_cli.stages.label_input."""

    def morph(self, mask: Any, op: str, iterations: int, connectivity: int) -> Any:
        """`mask` eroded or dilated `iterations` times: one launch per iteration."""
        cupy = _import_cupy()
        n, height, width = _batch_shape(mask)
        tiles_x = -(-width // _MORPH_TILE[0])
        tiles = tiles_x * -(-height // _MORPH_TILE[1])
        kernels = _kernels(mask.device.id)
        source = cupy.ascontiguousarray(mask).view(cupy.uint8)
        buffers = [cupy.empty_like(source), cupy.empty_like(source)]
        geometry = (np.uint32(height), np.uint32(width), np.uint32(tiles_x), np.uint32(tiles))
        for step in range(iterations):
            target = buffers[step % 2]
            name = f"gccl_{op}_{connectivity}"
            kernels.launch(name, n * tiles, _MORPH_THREADS, (source, target, *geometry))
            source = target
        return source.view(cupy.bool_)

    def smooth(self, values: Any, mask: Any, weights: tuple[int, ...]) -> Any:
        """float64 batch: smoothed values on `mask`, NaN off it (stages.smooth_numpy)."""
        cupy = _import_cupy()
        n, height, width = _batch_shape(values)
        dtype = np.dtype(values.dtype)
        tiles_x = -(-width // _SMOOTH_TILE)
        tiles = tiles_x * -(-height // _SMOOTH_TILE)
        out = cupy.empty(values.shape, cupy.float64)
        args = (
            cupy.ascontiguousarray(values),
            cupy.ascontiguousarray(mask).view(cupy.uint8),
            out,
            cupy.asarray(np.array(weights, np.int32)),
            np.int32(len(weights) // 2),
            np.uint32(height),
            np.uint32(width),
            np.uint32(tiles_x),
            np.uint32(tiles),
        )
        name = f"gccl_smooth_{_SUFFIX[dtype]}_{_accumulator(dtype, weights)}"
        _kernels(values.device.id).launch(name, n * tiles, _SMOOTH_THREADS, args)
        return out


def _accumulator(dtype: np.dtype, weights: tuple[int, ...]) -> str:
    """f64 for floats; i32 where 2S + 3W cannot overflow it (S the weighted sum, W the
    weight total), else i64 (|S| < 2**60: stages.MAX_SMOOTH_RADIUS)."""
    if dtype.kind == "f":
        return "f64"
    if dtype.itemsize > 2:
        return "i64"
    info = np.iinfo(dtype)
    total = sum(weights) ** 2
    largest = max(-int(info.min), int(info.max))
    return "i32" if 2 * total * largest + 3 * total < _INT32_LIMIT else "i64"


def _batch_shape(array: Any) -> tuple[int, int, int]:
    """(N, H, W) of a batch, or (1, H, W) of a single image."""
    height, width = array.shape[-2:]
    return int(np.prod(array.shape[:-2], dtype=np.int64)), int(height), int(width)
