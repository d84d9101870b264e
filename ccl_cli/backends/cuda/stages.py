"""The CUDA backend's StageOps: host side of cuda/morphology.cu and cuda/smooth.cu (volumes:
volume_stages.py).

Arrays are contiguous CuPy batches (N, H, W) on the current device; the
results equal the numpy versions of backends/cpu/stages.py bit for bit. `morph_launch` and
`smooth_launch` say which kernel runs with which grid and arguments, so the
benchmark (benchmarks/bench_stages.py) times exactly what the stages launch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...contract.params import LabelParams
from . import arrays, volume_stages
from .kernel_names import kernel_name
from .loader import GEOMETRY, KERNEL_SUFFIX, device_kernels, import_cupy

#: A kernel launch: (name, blocks, threads per block, arguments).
Launch = tuple[str, int, tuple[int, ...], tuple[Any, ...]]

# The kernels' geometry (geometry.cuh).
_MORPH_STRIP_W = GEOMETRY["GCCL_MORPH_STRIP_W"]  # columns per warp of morphology.cu
_MORPH_ROWS = {  # rows per warp, by access width (bytes)
    16: GEOMETRY["GCCL_MORPH_ROWS"],
    4: GEOMETRY["GCCL_MORPH_ROWS"],
    1: GEOMETRY["GCCL_MORPH_ROWS_BYTES"],
}
_MORPH_WARPS = GEOMETRY["GCCL_MORPH_WARPS"]  # warps per block
_MORPH_MAX_STEPS = GEOMETRY["GCCL_MORPH_MAX_STEPS"]  # iterations per multi-step launch, at most
_MORPH_STEP_W = GEOMETRY["GCCL_MORPH_STEP_W"]  # output columns per warp of the multi-step kernels
_SMOOTH_STRIP_W = GEOMETRY["GCCL_SMOOTH_STRIP_W"]  # output columns per warp of the strip kernels
_SMOOTH_WARPS = GEOMETRY["GCCL_SMOOTH_STRIP_WARPS"]
_SMOOTH_STRIP_RADIUS = GEOMETRY["GCCL_SMOOTH_STRIP_RADIUS"]  # largest radius of the strip kernels
_SMOOTH_TILE = GEOMETRY["GCCL_SMOOTH_TILE"]  # output pixels per tile side (shared-tile kernels)
_SMOOTH_THREADS = (GEOMETRY["GCCL_SMOOTH_THREADS_X"], GEOMETRY["GCCL_SMOOTH_THREADS_Y"])
#: Output rows per warp of the strip kernels, at most (strip_rows; a host choice).
_SMOOTH_MAX_ROWS = 32
_INT32_LIMIT = 2**31


class CudaStages:
    """Morphology, smoothing and mask kernels for ccl_cli.contract.stages.label_input."""

    def foreground(self, values: Any, params: LabelParams) -> Any:
        return arrays.foreground(values, params)

    def clear_nan(self, mask: Any, values: Any) -> Any:
        return arrays.clear_nan(mask, values)

    def masked_float64(self, numbers: Any, mask: Any) -> Any:
        return arrays.masked_float64(numbers, mask)

    def fill_added(self, values: Any, readings: Any, mask: Any, radius: int, rank: int) -> Any:
        if rank == 3:
            return volume_stages.fill_added(values, readings, mask, radius)
        return arrays.fill_added(values, readings, mask, radius)

    def morph(self, mask: Any, op: str, iterations: int, connectivity: int) -> Any:
        """`mask` eroded or dilated `iterations` times: one launch per
        _MORPH_MAX_STEPS iterations (morph_launch), ping-ponging between two buffers.

        Few launches matter beyond the kernels' speed: the host's time per
        launch limits how small a batch's chunks can be (CudaBackend.label_steps).
        """
        if LabelParams(connectivity=connectivity).rank == 3:
            return volume_stages.morph(mask, op, iterations, connectivity)
        cupy = import_cupy()
        source = cupy.ascontiguousarray(mask).view(cupy.uint8)
        if iterations == 0:
            return source.view(cupy.bool_)
        kernels = device_kernels(mask.device.id)
        launches = -(-iterations // _MORPH_MAX_STEPS)
        buffers = [cupy.empty_like(source) for _ in range(min(launches, 2))]
        for index, first in enumerate(range(0, iterations, _MORPH_MAX_STEPS)):
            steps = min(_MORPH_MAX_STEPS, iterations - first)
            target = buffers[index % 2]
            kernels.launch(*morph_launch(source, target, op, connectivity, steps))
            source = target
        return source.view(cupy.bool_)

    def smooth(self, values: Any, mask: Any, weights: tuple[int, ...], rank: int = 2) -> Any:
        """float64 batch: smoothed values on `mask`, NaN off it (stages.smooth_numpy)."""
        if rank == 3:
            return volume_stages.smooth(values, mask, weights)
        cupy = import_cupy()
        values = cupy.ascontiguousarray(values)
        out = cupy.empty(values.shape, cupy.float64)
        launch = smooth_launch(values, cupy.ascontiguousarray(mask).view(cupy.uint8), out, weights)
        device_kernels(values.device.id).launch(*launch)
        return out


def morph_launch(source: Any, target: Any, op: str, connectivity: int, steps: int = 1) -> Launch:
    """`steps` (1 .. _MORPH_MAX_STEPS) erosions or dilations of the uint8 batch `source`
    into `target` (same shape), in one launch.

    The kernel's access width (16, 4 or 1 bytes) is the widest that divides the
    row length and both buffers' addresses. One step runs the one-iteration
    kernel, more the multi-step one (morphology.cu), whose strips write fewer
    columns (their halo is as deep as its largest step count).
    """
    if not 1 <= steps <= _MORPH_MAX_STEPS:
        raise ValueError(f"one launch does 1 to {_MORPH_MAX_STEPS} morphology steps, not {steps}")
    n, height, width = _batch_shape(source)
    access = _access_width(width, source, target)
    several = steps > 1
    strips_x = -(-width // (_MORPH_STEP_W if several else _MORPH_STRIP_W))
    strips = strips_x * -(-height // _MORPH_ROWS[access])
    warps = n * strips
    geometry = (np.uint32(v) for v in (height, width, strips_x, strips, n))
    args = (source, target, *geometry, *((np.uint32(steps),) if several else ()))
    fields = {"op": op, "connectivity": connectivity, "access": access}
    if several:
        name = kernel_name("gccl_{op}_{connectivity}_n_b{access}", **fields)
    else:
        name = kernel_name("gccl_{op}_{connectivity}_b{access}", **fields)
    return name, -(-warps // _MORPH_WARPS), (32 * _MORPH_WARPS,), args


def smooth_launch(
    values: Any, mask: Any, out: Any, weights: tuple[int, ...], rows: int | None = None
) -> Launch:
    """Smoothing of the contiguous batch `values` over the uint8 `mask` into float64 `out`.

    Radii up to 3 run the warp-strip kernels (vector loads where rows are
    aligned), each warp `rows` output rows (by default strip_rows' choice for
    this device); larger radii the shared-tile ones.
    The strip kernels' exact shortcuts (smooth.cu) hold for box and binomial
    weights: the outer two are 1, none is above 20.
    """
    n, height, width = _batch_shape(values)
    dtype = np.dtype(values.dtype)
    radius = len(weights) // 2
    accumulator = _accumulator(dtype, weights)
    # The strip kernels sum 8- and 16-bit integers in int32 (always safe for R <= 3).
    narrow_int = dtype.kind != "f" and dtype.itemsize <= 2
    if radius > _SMOOTH_STRIP_RADIUS or (narrow_int and accumulator != "i32"):
        tiles_x = -(-width // _SMOOTH_TILE)
        tiles = tiles_x * -(-height // _SMOOTH_TILE)
        args = (
            values,
            mask,
            out,
            import_cupy().asarray(np.array(weights, np.int32)),
            np.int32(radius),
            *(np.uint32(v) for v in (height, width, tiles_x, tiles)),
        )
        name = kernel_name(
            "gccl_smooth_{dtype}_{accumulator}", dtype=KERNEL_SUFFIX[dtype], accumulator=accumulator
        )
        return name, n * tiles, _SMOOTH_THREADS, args
    if weights[0] != 1 or weights[-1] != 1 or max(weights) > 20:  # box and binomial are
        raise ValueError(f"the strip kernels need outer weights 1, all <= 20: {weights}")
    name = kernel_name("gccl_smooth_{dtype}_r{radius}", dtype=KERNEL_SUFFIX[dtype], radius=radius)
    strips_x = -(-width // _SMOOTH_STRIP_W)
    if rows is None:
        kernels = device_kernels(values.device.id)
        blocks = kernels.resident_blocks(name, 32 * _SMOOTH_WARPS) * kernels.multiprocessors
        rows = strip_rows(height, n * strips_x, blocks * _SMOOTH_WARPS, radius)
    strips = strips_x * -(-height // rows)
    padded = (*weights, *(0,) * (2 * _SMOOTH_STRIP_RADIUS + 1 - len(weights)))
    vec = (
        width % 4 == 0
        and values.data.ptr % min(16, 4 * dtype.itemsize) == 0
        and mask.data.ptr % 4 == 0
        and out.data.ptr % 16 == 0
    )
    args = (
        values,
        mask,
        out,
        *(np.int32(w) for w in padded),
        *(np.uint32(v) for v in (height, width, rows, strips_x, strips, n)),
        np.int32(vec),
    )
    return name, -(-(n * strips) // _SMOOTH_WARPS), (32 * _SMOOTH_WARPS,), args


def strip_rows(height: int, columns: int, wave: int, radius: int) -> int:
    """Output rows per warp of a strip kernel for `columns` warp columns (images times
    strips across) of `height` rows, where one wave of the device holds `wave` warps.

    Each strip also reads 2R rows above and below its own (about half a row's work
    each), and a wave that is only partly filled takes as long as a full one, so
    the choice minimizes (waves, rounded up) x (rows + R) over 1 .. _SMOOTH_MAX_ROWS.
    """

    def cost(rows: int) -> tuple[int, int]:
        warps = columns * -(-height // rows)
        return -(-warps // wave) * (rows + radius), rows

    return min(cost(rows) for rows in range(1, _SMOOTH_MAX_ROWS + 1))[1]


def _access_width(width: int, *arrays: Any) -> int:
    """16, 4 or 1: the widest access (bytes) that divides a byte row and every address."""
    for access in (16, 4):
        if width % access == 0 and all(a.data.ptr % access == 0 for a in arrays):
            return access
    return 1


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
