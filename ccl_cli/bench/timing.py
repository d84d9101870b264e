"""Timing calls: wall clock on the CPU, CUDA events on the GPU.

A measurement makes up to `repeat` timed calls and stops early once they add
up to `budget_s` (after at least one), so slow engines cannot stretch a run;
the record keeps how many calls were made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def measure(
    call: Callable[[], object],
    on_device: bool,
    repeat: int,
    budget_s: float,
    done: list[float] | None = None,
) -> list[float]:
    """Milliseconds of each timed call, continuing the times already `done`."""
    times = list(done or [])
    while len(times) < repeat and sum(times) < budget_s * 1000:
        times.append(_device_ms(call) if on_device else timed(call)[0])
    return times


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    """(wall-clock milliseconds, result) of one call."""
    started = time.perf_counter()
    result = call()
    return (time.perf_counter() - started) * 1000, result


def _device_ms(call: Callable[[], object]) -> float:
    """GPU time between events recorded around the call (its data already there)."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    cupy.cuda.Device().synchronize()
    start.record()
    call()
    end.record()
    end.synchronize()
    return float(cupy.cuda.get_elapsed_time(start, end))
