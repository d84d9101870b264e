"""One GPU against every GPU of the host (--devices), on batches from light to compute-bound.

The inputs are already decoded (numpy batches in memory, as from .npy files) and
stacked in the backend's page-locked memory, as gccl's pipeline stacks them, so
the time is the backend's: copies in, kernels, copies out, statistics tables.
Labels come back narrowed to 16 bits (those of images with too many components
for 16 bits as uint32), as `gccl label` asks for its PNG label images. The
GPUs get the hardware work queues the environment asks for (CUDA's default 8,
or CUDA_DEVICE_MAX_CONNECTIONS), one GPU and all alike. One table, in markdown.

Each batch is split over the GPUs (wall clock around MultiDeviceBackend.label vs
CudaBackend.label, median of --repeat calls after one warm-up), as `gccl label
--devices all` and `ccl_cli.label` run it; the copy ceilings of the host are measured
first, as they bound every case.

--json PATH also writes the table and the copy ceilings as JSON.

    python3 benchmarks/bench_multi_gpu.py --repeat 5 --json multi.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from ccl_cli.backends import make_backend
from ccl_cli.backends.base import Backend
from ccl_cli.backends.multi import MultiDeviceBackend
from ccl_cli.contract.params import LabelParams


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


def copy_ceiling(devices: int, nbytes: int = 1 << 30) -> tuple[float, float, float, float]:
    """GB/s of copies of `nbytes` between GPUs and page-locked memory, the best of
    three each: device to host from one GPU, and from every GPU at once; both ways
    at once (the bytes of both directions together) on one GPU, and on every GPU.

    Batches go up and labels come back (2 or 4 bytes a pixel), so these copies
    bound the speed of every case of this benchmark; when all GPUs together copy
    little faster than one, the host (its memory, the PCIe topology), not the
    GPUs, limits the speed-up.
    """
    import cupy

    from ccl_cli.backends.cuda.pinned import pinned_empty

    device_side, host_side, streams = [], [], []
    for device in range(devices):
        with cupy.cuda.Device(device):
            device_side.append((cupy.ones(nbytes, cupy.uint8), cupy.empty(nbytes, cupy.uint8)))
            streams.append(tuple(cupy.cuda.Stream(non_blocking=True) for _ in range(2)))
        host_side.append(tuple(pinned_empty((nbytes,), np.dtype(np.uint8)) for _ in range(2)))

    def copy(count: int, both_ways: bool) -> float:
        started = time.perf_counter()
        for device in range(count):
            (source, target), (down, up) = device_side[device], streams[device]
            with cupy.cuda.Device(device):
                source.get(stream=down, out=host_side[device][0], blocking=False)
                if both_ways:
                    target.set(host_side[device][1], stream=up)
        for pair in streams[:count]:
            for stream in pair:
                stream.synchronize()
        return count * nbytes * (2 if both_ways else 1) / (time.perf_counter() - started) / 1e9

    copy(devices, True)  # warm-up
    best = [
        max(copy(count, both) for _ in range(3))
        for count, both in ((1, False), (devices, False), (1, True), (devices, True))
    ]
    return best[0], best[1], best[2], best[3]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
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
    queues = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "8 (CUDA's default)")
    print(f"devices: {every.name}; hardware work queues per device: {queues}")
    down_one, down_every, both_one, both_every = copy_ceiling(
        len(every.backends) if isinstance(every, MultiDeviceBackend) else 1
    )
    results: dict = {
        "devices": every.name,
        "work_queues": queues,
        "copy_ceiling_gb_per_s": {
            "device_to_host_one_gpu": down_one,
            "device_to_host_every_gpu": down_every,
            "both_ways_one_gpu": both_one,
            "both_ways_every_gpu": both_every,
        },
        "repeat": args.repeat,
        "one_batch": [],
    }
    print(
        f"copy ceiling, 1 GiB to or from page-locked memory: device to host {down_one:.0f} "
        f"GB/s from one GPU, {down_every:.0f} GB/s from every GPU at once; both ways at once "
        f"{both_one:.0f} GB/s on one GPU, {both_every:.0f} GB/s on every GPU (in all)"
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
        results["one_batch"].append(
            {
                "case": name,
                "one_gpu_ms": single * 1e3,
                "all_gpus_ms": multi * 1e3,
                "identical": same,
            }
        )
        print(
            f"| {name} | {single * 1e3:.1f} | {multi * 1e3:.1f} | {single / multi:.2f}x "
            f"| {narrowed} | {same} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
