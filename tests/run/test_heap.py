"""A run keeps the memory it frees for its next images (run/heap.py)."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

#: Page faults of a second 24 MiB buffer after the first was freed (a fresh Python).
SECOND_BUFFER_FAULTS = """
import resource, sys
if sys.argv[1] == "keep":
    from ccl_cli.run.heap import keep_freed_memory
    keep_freed_memory()
size = 24 << 20
first = bytearray(size)  # zeroed: every page touched
del first
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
second = bytearray(size)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", SECOND_BUFFER_FAULTS, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(done.stdout)


@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallopt"), reason="needs glibc's mallopt")
def test_freed_memory_is_reused_without_new_page_faults() -> None:
    pages = (24 << 20) // 4096
    assert _faults("default") > pages // 2  # glibc handed the first buffer back
    assert _faults("keep") < pages // 20  # kept: the second lands in touched memory
