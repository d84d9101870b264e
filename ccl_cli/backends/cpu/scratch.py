"""The CPU engine's scratch memory, one owner for both engines: the working arrays the
Python side of the image and volume engines asks for by name (scratch), and the blocks
the volume engine's slabs leave in C (native/src/volume_memory.c).

Both are kept between calls: fresh memory costs a page fault per 4 KiB first touched, as
much as labeling a sparse image. What is kept is bounded, all of it together: at most
`limit()` bytes, `GCCL_SCRATCH_BYTES` from the environment (bytes; 1 GiB where unset), or
what set_scratch_limit sets (0 keeps nothing). A new array that would pass the bound
pushes out the arrays least recently used; one larger than the bound is not kept. The
volume engine's blocks get what the arrays leave of the bound, set before each of its
calls. release_scratch gives all of it back to the system (a long-running process
between jobs, a test measuring memory); the next call makes what it needs again.
"""

from __future__ import annotations

import math
import mmap
import os
import threading
from collections import OrderedDict

import numpy as np

from ...native import gccl_cpu

#: The bound where GCCL_SCRATCH_BYTES is unset.
DEFAULT_LIMIT = 1 << 30
#: The environment variable that sets the bound (bytes).
LIMIT_VARIABLE = "GCCL_SCRATCH_BYTES"

_lock = threading.Lock()
#: The kept arrays by (thread, name), least recently used first: a thread's arrays are its
#: own while it labels; a view of one it was given keeps its memory alive after it goes.
_kept: OrderedDict[tuple[int, str], np.ndarray] = OrderedDict()
_limit: list[int | None] = [None]  # None: read from the environment at first use


def limit() -> int:
    """The bound, in bytes, on the scratch memory kept between calls (module docstring)."""
    bound = _limit[0]
    if bound is None:
        text = os.environ.get(LIMIT_VARIABLE, "").strip()
        try:
            bound = max(0, int(text)) if text else DEFAULT_LIMIT
        except ValueError:
            bound = DEFAULT_LIMIT
        _limit[0] = bound
    return bound


def set_scratch_limit(bytes_kept: int) -> None:
    """Keep at most `bytes_kept` bytes of scratch memory between calls (0: none); what is
    kept beyond it now is released."""
    if isinstance(bytes_kept, bool) or not isinstance(bytes_kept, int) or bytes_kept < 0:
        raise ValueError(f"a scratch limit is a number of bytes, 0 or more, not {bytes_kept!r}")
    with _lock:
        _limit[0] = bytes_kept
        _evict(0)
        gccl_cpu.set_spare_limit(max(0, bytes_kept - _kept_bytes()))


def release_scratch() -> None:
    """Give every kept array and block back to the system (the bound stays)."""
    with _lock:
        _kept.clear()
        gccl_cpu.release_spares()


def kept_bytes() -> int:
    """The bytes kept now: the named arrays and the volume engine's blocks."""
    with _lock:
        return _kept_bytes() + gccl_cpu.spare_bytes()


def bound_volume_blocks() -> None:
    """Let the volume engine keep what the named arrays leave of the bound (before its
    calls)."""
    with _lock:
        gccl_cpu.set_spare_limit(max(0, limit() - _kept_bytes()))


def _kept_bytes() -> int:
    return sum(array.nbytes for array in _kept.values())


def _evict(room: int) -> None:
    """Drop the least recently used arrays until `room` more bytes fit the bound."""
    total = _kept_bytes()
    while _kept and total + room > limit():
        _, array = _kept.popitem(last=False)
        total -= array.nbytes


def empty_plain(shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """np.empty in plain 4 KiB pages, private to this process.

    numpy asks for huge pages from 4 MiB up, and a huge page's first touch
    clears all of it: a working array sized for the worst case but touched
    sparsely (a record per label) then costs twice the time per byte that
    labeling touches. Arrays that are written whole (the labels) are better
    in numpy's memory, which the allocator also recycles between calls.
    """
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size < 4 << 20:
        return np.empty(shape, dtype)
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux
        memory.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(memory, dtype).reshape(shape)


def scratch(
    name: str, shape: tuple[int, ...], dtype: type | np.dtype, dense: bool = False
) -> np.ndarray:
    """An uninitialized working array (never one a result keeps), reusing this thread's
    last one of that name when it is large enough, and keeping a new one within the bound.
    dense: nearly all of it is written, at places far apart, so numpy's memory (huge pages,
    fewer TLB misses) suits it better than plain pages (empty_plain)."""
    size = math.prod(shape) * np.dtype(dtype).itemsize
    key = (threading.get_ident(), name)
    with _lock:
        kept = _kept.pop(key, None)  # put back below as the most recently used
        if kept is not None and kept.nbytes >= size:
            _kept[key] = kept
            return kept[:size].view(dtype).reshape(shape)
    made = (np.empty if dense else empty_plain)((max(size, 1),), np.uint8)
    with _lock:
        if made.nbytes <= limit():
            _evict(made.nbytes)
            _kept[key] = made
    return made[:size].view(dtype).reshape(shape)
