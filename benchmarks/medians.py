"""Median timings shared by the benchmark scripts (imported by name: `from medians import ...`)."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any


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


def cpu_times_ms(run: Callable[[], object], repeat: int, warmup: int = 1) -> list[float]:
    """Wall times of run() over `repeat` calls after `warmup` calls, in ms."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append((time.perf_counter() - began) * 1e3)
    return times


def cpu_median_ms(run: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Median wall time of run() over `repeat` calls after `warmup` calls, in ms."""
    return statistics.median(cpu_times_ms(run, repeat, warmup))


def kernel_breakdown(run: Callable[[], object], repeat: int) -> dict[str, float]:
    """Median ms per gccl kernel name (summed over its launches in one run) over `repeat`
    runs, by CUDA events around each launch."""
    import cupy

    from ccl_cli.backends.cuda import loader

    real = loader.Kernels.launch
    samples: dict[str, list[float]] = defaultdict(list)
    current: dict[str, list[tuple[Any, Any]]] = defaultdict(list)

    def timed(self: Any, name: str, grid: int, block: tuple, args: tuple) -> None:
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        real(self, name, grid, block, args)
        stop.record()
        current[name].append((start, stop))

    loader.Kernels.launch = timed  # type: ignore[method-assign]
    try:
        for _ in range(repeat):
            current.clear()
            run()
            cupy.cuda.get_current_stream().synchronize()
            for name, events in current.items():
                samples[name].append(sum(cupy.cuda.get_elapsed_time(a, b) for a, b in events))
    finally:
        loader.Kernels.launch = real  # type: ignore[method-assign]
    return {name: statistics.median(v) for name, v in samples.items()}
