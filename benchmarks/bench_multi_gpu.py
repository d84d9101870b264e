"""One GPU against every GPU of the host on a compute-bound job (issue 5's --devices goal).

The inputs are already decoded (numpy batches in memory, as from .npy files) and
stacked in the backend's page-locked memory, as gccl's pipeline stacks them, so
the time is the backend's: copies in, kernels, copies out, statistics tables.
Labels come back narrowed to 16 bits (those of images with too many components
for 16 bits as uint32), as `gccl label` asks for its PNG label images.
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
    backend.label(batch, params, narrow=True)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        backend.label(batch, params, narrow=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def depth_tiles(rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` 4000x3000 uint16 images of 300x400 plateaus plus noise: few, large components."""
    plateaus = np.add.outer(np.arange(3000) // 300 * 500, np.arange(4000) // 400 * 700)
    noise = rng.integers(0, 8, (count, 3000, 4000))
    return (1000 + plateaus + noise).astype(np.uint16)


def copy_ceiling(devices: int, nbytes: int = 1 << 30) -> tuple[float, float]:
    """GB/s of device-to-host copies into page-locked memory: from one GPU, and from all at once.

    Labels are 2 or 4 bytes a pixel, so these copies bound the speed of every
    case of this benchmark; when all GPUs together copy little faster than one, the host
    (memory, PCIe topology), not the GPUs, limits the speed-up.
    """
    import cupy

    from ccl_cli.backends.cuda import pinned_empty

    sources, targets, streams = [], [], []
    for device in range(devices):
        with cupy.cuda.Device(device):
            sources.append(cupy.ones(nbytes, cupy.uint8))
            streams.append(cupy.cuda.Stream(non_blocking=True))
        targets.append(pinned_empty((nbytes,), np.dtype(np.uint8)))

    def copy(count: int) -> float:
        started = time.perf_counter()
        for device in range(count):
            with cupy.cuda.Device(device):
                sources[device].get(stream=streams[device], out=targets[device], blocking=False)
        for stream in streams[:count]:
            stream.synchronize()
        return count * nbytes / (time.perf_counter() - started) / 1e9

    copy(devices)  # warm-up
    return max(copy(1) for _ in range(3)), max(copy(devices) for _ in range(3))


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
        "same, with --open 2 and --smooth binomial:3 (more work per byte)": (
            depth_tiles(rng, 16),
            LabelParams(tau=20, min_area=50, morphology=(("open", 2),), smooth=("binomial", 3)),
        ),
        "same, with --open 8 --close 8 --smooth binomial:7 (compute-bound)": (
            depth_tiles(rng, 16),
            LabelParams(
                tau=20,
                min_area=50,
                morphology=(("open", 8), ("close", 8)),
                smooth=("binomial", 7),
            ),
        ),
    }
    one = make_backend("cuda", None, print)
    every = make_backend("cuda", None, print, devices="all")
    print(f"devices: {every.name}")
    one_gbs, every_gbs = copy_ceiling(len(getattr(every, "backends", [every])))
    print(
        f"copy ceiling, 1 GiB device-to-host into page-locked memory: one GPU {one_gbs:.0f} GB/s, "
        f"every GPU at once {every_gbs:.0f} GB/s together"
    )
    print("| case | 1 GPU ms | all GPUs ms | speed-up | 16-bit labels | identical |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (generated, params) in cases.items():
        batch = one.empty_batch(generated.shape, generated.dtype)
        batch[...] = generated
        single = median_seconds(one, batch, params, args.repeat)
        multi = median_seconds(every, batch, params, args.repeat)
        mine, theirs = (b.label(batch, params, narrow=True) for b in (one, every))
        same = sorted(mine.wide) == sorted(theirs.wide) and all(
            np.array_equal(mine.image(i), theirs.image(i)) for i in range(len(batch))
        )
        narrowed = f"{len(batch) - len(mine.wide)}/{len(batch)}"
        print(
            f"| {name} | {single * 1e3:.1f} | {multi * 1e3:.1f} | {single / multi:.2f}x "
            f"| {narrowed} | {same} |"
        )


if __name__ == "__main__":
    main()
