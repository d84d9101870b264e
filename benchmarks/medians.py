"""Median timings shared by the benchmark scripts (imported by name: `from medians import ...`)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def gpu_median_ms(run: Callable[[], object], repeat: int, warmup: int = 5) -> float:
    """Median of `repeat` CUDA-event timings of run() after `warmup` calls, in ms."""
    import cupy

    for _ in range(warmup):
        run()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for _ in range(repeat):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def cpu_median_ms(run: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Median wall time of run() over `repeat` calls after `warmup` calls, in ms."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append((time.perf_counter() - began) * 1e3)
    return statistics.median(times)
