"""Page-locked (pinned) host memory: arrays whose copies to and from a device run
asynchronously at full bus speed, and the test of whether an array already is such memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from .loader import import_cupy


def pinned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A numpy array in page-locked host memory (from CuPy's pinned pool, so reused).

    Copies between it and any device (the memory is portable under unified
    addressing) run asynchronously at full bus speed; pageable memory is
    staged through a driver buffer by the CPU. The memory goes back to the
    pool when the last view of the array is gone. Sizes are rounded up to a
    power of two: the pool reuses a block only for the same size, and
    page-locking new memory costs far more than the copies it speeds up.
    """
    cupy = import_cupy()
    count = int(np.prod(shape, dtype=np.int64))
    size = max(1, count * dtype.itemsize)
    memory = cupy.cuda.alloc_pinned_memory(1 << (size - 1).bit_length())
    return np.frombuffer(memory, dtype, count).reshape(shape)


def page_locked(cupy: Any, array: np.ndarray) -> bool:
    """Whether `array` is C-contiguous and in page-locked memory (copies need no staging)."""
    if array.size == 0 or not array.flags.c_contiguous:
        return False
    runtime = cupy.cuda.runtime
    return bool(runtime.pointerGetAttributes(array.ctypes.data).type == runtime.memoryTypeHost)
