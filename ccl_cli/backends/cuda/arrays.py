"""The host side of src/arrays.cu: the array plumbing of the labeling paths in fatbin kernels.

CuPy compiles its elementwise kernels (copies of strided views, comparisons,
casts, `where`) on first use, which is slow on a fresh machine and needs
NVRTC; these do the same few operations from the shipped fatbin. Every
function queues work on the current stream and never waits.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...contract.params import LabelParams, dtype_max, stored_threshold
from .kernel_names import kernel_name
from .loader import KERNEL_SUFFIX, LAYOUT, device_kernels, import_cupy

_THREADS = 256
_MAX_BLOCKS = 1 << 16  # grid-stride kernels: enough blocks to fill any device

# foreground.cuh rule kinds.
_FG_BACKGROUND, _FG_ALL = LAYOUT["GCCL_FG_BACKGROUND"], LAYOUT["GCCL_FG_ALL"]
_FG_ABOVE, _FG_BELOW = LAYOUT["GCCL_FG_ABOVE"], LAYOUT["GCCL_FG_BELOW"]


def contiguous(values: Any) -> Any:
    """`values` (a CuPy (N, H, W) batch, any strides) as a C-contiguous batch with
    booleans stored as bytes 0/1: `values` itself where it already is one of
    another dtype, else a copy (gccl_gather_*)."""
    cupy = import_cupy()
    dtype = np.dtype(values.dtype)
    if values.flags.c_contiguous and dtype != np.bool_:
        return values
    out = cupy.empty(values.shape, cupy.uint8 if dtype == np.bool_ else dtype)
    _gather(values, out)
    return out.view(cupy.bool_) if dtype == np.bool_ else out


def contiguous_volumes(values: Any) -> Any:
    """`values` (a CuPy (N, D, H, W) batch of volumes, any strides) as `contiguous` makes
    a batch of images: each volume gathered as a batch of D planes."""
    cupy = import_cupy()
    dtype = np.dtype(values.dtype)
    if values.flags.c_contiguous and dtype != np.bool_:
        return values
    out = cupy.empty(values.shape, cupy.uint8 if dtype == np.bool_ else dtype)
    for volume, target in zip(values, out, strict=True):
        _gather(volume, target)
    return out.view(cupy.bool_) if dtype == np.bool_ else out


def _gather(values: Any, out: Any) -> None:
    """Copy the (N, H, W) view `values` into the contiguous `out` (gccl_gather_*;
    booleans as bytes 0/1 into a uint8 `out`)."""
    dtype = np.dtype(values.dtype)
    n, height, width = values.shape
    rows = n * height
    if rows * width:
        name = (
            kernel_name("gccl_gather_bool")
            if dtype == np.bool_
            else kernel_name("gccl_gather_b{itemsize}", itemsize=dtype.itemsize)
        )
        threads = min(_THREADS, -(-width // 32) * 32)
        args = (
            values,
            out,
            np.uint64(rows),
            np.uint32(height),
            np.uint32(width),
            *(np.int64(s) for s in values.strides),
        )
        device_kernels(values.device.id).launch(name, min(rows, _MAX_BLOCKS), (threads,), args)


def copy_of(array: Any) -> Any:
    """A new contiguous copy of the contiguous CuPy `array`, by a device-to-device copy on
    the current stream (no kernel)."""
    cupy = import_cupy()
    out = cupy.empty(array.shape, array.dtype)
    if array.nbytes:
        stream = cupy.cuda.get_current_stream()
        out.data.copy_from_device_async(array.data, array.nbytes, stream)
    return out


def narrowed(labels: Any) -> Any:
    """Contiguous u32 labels as a new u16 array (the caller knows they fit)."""
    cupy = import_cupy()
    out = cupy.empty(labels.shape, cupy.uint16)
    elementwise(
        labels, kernel_name("gccl_narrow_u16"), (labels, out, np.uint64(labels.size)), labels.size
    )
    return out


def keep_area(area: Any, min_area: int, max_area: int | None, keep: Any) -> None:
    """keep[i] = min_area <= area[i] <= max_area (None: no upper bound), as u32 0/1
    (contiguous u64 `area`, u32 `keep`)."""
    count = area.size
    high = np.uint64(np.iinfo(np.uint64).max if max_area is None else max_area)
    args = (area, np.uint64(min_area), high, keep, np.uint64(count))
    elementwise(area, kernel_name("gccl_keep_area"), args, count)


def foreground(values: Any, params: LabelParams) -> Any:
    """The foreground mask (params.foreground_mask) of a contiguous batch, as CuPy bools."""
    cupy = import_cupy()
    mask = cupy.empty(values.shape, cupy.uint8)
    dtype = np.dtype(values.dtype)
    storage = values.view(cupy.uint8) if dtype == np.bool_ else values
    args = (storage, mask, np.uint64(values.size), *rule_args(params, dtype))
    elementwise(
        values,
        kernel_name("gccl_foreground_{dtype}", dtype=KERNEL_SUFFIX[dtype]),
        args,
        values.size,
    )
    return mask.view(cupy.bool_)


def clear_nan(mask: Any, values: Any) -> Any:
    """`mask` (contiguous bools) without the NaN pixels of the float batch `values` (in place)."""
    cupy = import_cupy()
    name = kernel_name("gccl_clear_nan_{dtype}", dtype=KERNEL_SUFFIX[np.dtype(values.dtype)])
    elementwise(values, name, (values, mask.view(cupy.uint8), np.uint64(values.size)), values.size)
    return mask


def masked_float64(numbers: Any, mask: Any) -> Any:
    """float64 batch: the contiguous `numbers` where the bool `mask` holds, NaN elsewhere."""
    cupy = import_cupy()
    out = cupy.empty(numbers.shape, cupy.float64)
    name = kernel_name("gccl_masked_f64_{dtype}", dtype=KERNEL_SUFFIX[np.dtype(numbers.dtype)])
    args = (numbers, mask.view(cupy.uint8), out, np.uint64(numbers.size))
    elementwise(numbers, name, args, numbers.size)
    return out


def fill_added(values: Any, readings: Any, mask: Any, radius: int) -> Any:
    """contract.stages.fill_added of a contiguous batch, the added pixels being `mask`
    and not `readings` (contiguous bools): a new array (gccl_fill_added_*)."""
    cupy = import_cupy()
    dtype = np.dtype(values.dtype)
    out = cupy.empty(values.shape, dtype)
    height, width = values.shape[-2:]
    low = int(np.iinfo(dtype).min) if dtype.kind == "i" else 0
    args = (
        values,
        readings.view(cupy.uint8),
        mask.view(cupy.uint8),
        out,
        np.uint32(height),
        np.uint32(width),
        np.uint64(values.size),
        np.int32(radius),
        np.int64(low),
    )
    elementwise(
        values,
        kernel_name("gccl_fill_added_{dtype}", dtype=KERNEL_SUFFIX[dtype]),
        args,
        values.size,
    )
    return out


@functools.lru_cache(maxsize=256)
def rule_args(params: LabelParams, dtype: np.dtype) -> tuple[Any, ...]:
    """foreground.cuh's ForegroundRule as kernel arguments (made once per rule and dtype:
    a call on a small image is launch-bound)."""
    value = 0.0
    threshold = stored_threshold(dtype, params)
    if threshold is not None:
        kind, value = (_FG_BELOW if params.invert else _FG_ABOVE), float(threshold)
    elif params.background is None:
        kind = _FG_ALL
    else:
        kind, value = _FG_BACKGROUND, float(params.background)
    invert_max = 0.0 if dtype.kind == "f" else float(dtype_max(dtype))
    return (np.int32(kind), np.float64(value), np.int32(params.invert), np.float64(invert_max))


def elementwise(like: Any, name: str, args: tuple[Any, ...], count: int) -> None:
    """Launch the grid-stride kernel `name` over `count` elements on `like`'s device."""
    blocks = min(-(-count // _THREADS), _MAX_BLOCKS)
    device_kernels(like.device.id).launch(name, blocks, (_THREADS,), args)
