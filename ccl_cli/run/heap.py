"""The C heap of a run: freed memory kept for the next image instead of handed back.

Memory the kernel hands a process is cleared at its first touch (2 MiB at once for
numpy arrays of 4 MiB and more, which numpy asks to be huge pages). glibc hands a
freed block back at once when it was mapped on its own (from 128 KiB up, a limit
it raises to the largest block freed, up to 32 MiB), and trims the top of a heap
that holds more than twice that free: so a run's batches of large images kept
landing in fresh memory, and clearing it was a quarter of the CPU time of a run
of document scans on the 2-core machine. A run fixes both thresholds instead:
blocks of up to MMAP_THRESHOLD come from the heaps, and up to TRIM_THRESHOLD of
free memory stays there for the next batch. Elsewhere than glibc nothing changes.
"""

from __future__ import annotations

import ctypes
import functools

#: mallopt's parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Largest block taken from a heap rather than mapped on its own (glibc's ceiling).
MMAP_THRESHOLD = 32 << 20
#: Free memory a heap keeps at its top.
TRIM_THRESHOLD = 256 << 20


@functools.cache
def keep_freed_memory() -> None:
    """Fix glibc's thresholds for this process (and the processes it forks later)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc
        return
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
