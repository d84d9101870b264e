"""One GPU against every GPU of the host on a compute-bound job (issue 5's --devices goal).

The inputs are already decoded (numpy batches in memory, as from .npy files), so
the time is the backend's: copies in, kernels, copies out, statistics tables.
Wall clock around MultiDeviceBackend.label vs CudaBackend.label, median of
--repeat calls after one warm-up. Prints a markdown table.

    python3 benchmarks/bench_multi_gpu.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ccl_cli.backends import make_backend
from ccl_cli.backends.base import Backend
from ccl_cli.params import LabelParams


def median_seconds(backend: Backend, batch: np.ndarray, params: LabelParams, repeat: int) -> float:
    """Median wall-clock seconds of backend.label(batch) after one warm-up call."""
    backend.label(batch, params)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        backend.label(batch, params)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def depth_tiles(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` 4000x3000 uint16 images of 300x400 plateaus plus noise: few, large components."""
    plateaus = np.add.outer(np.arange(3000) // 300 * 500, np.arange(4000) // 400 * 700)
    noise = rng.integers(0, 8, (count, 3000, 4000))
    return (1000 + plateaus + noise).astype(np.uint16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = {
        "64 x 1920x1080 random d=0.5, 8-conn": (
            (rng.random((64, 1080, 1920)) < 0.5).astype(np.uint8),
            LabelParams(),
        ),
        "32 x 1920x1080 uint16 ramps, tau 4, 8-conn, min-area 20": (
            (np.cumsum(rng.integers(0, 3, (32, 1080, 1920)), axis=2) % 4000).astype(np.uint16),
            LabelParams(tau=4, min_area=20),
        ),
        "16 x 4000x3000 uint16 depth-like tiles, tau 20, 8-conn, min-area 50": (
            depth_tiles(rng, 16),
            LabelParams(tau=20, min_area=50),
        ),
    }
    one = make_backend("cuda", None, print)
    every = make_backend("cuda", None, print, devices="all")
    print(f"devices: {every.name}")
    print("| case | 1 GPU ms | all GPUs ms | speed-up | identical |")
    print("| --- | --- | --- | --- | --- |")
    for name, (batch, params) in cases.items():
        single = median_seconds(one, batch, params, args.repeat)
        multi = median_seconds(every, batch, params, args.repeat)
        same = np.array_equal(one.label(batch, params).labels, every.label(batch, params).labels)
        print(
            f"| {name} | {single * 1e3:.1f} | {multi * 1e3:.1f} | {single / multi:.2f}x | {same} |"
        )


if __name__ == "__main__":
    main()
