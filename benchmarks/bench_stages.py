"""Morphology and smoothing kernels on a 4000x3000 image against a device-to-device copy.

    python3 benchmarks/bench_stages.py [--repeat 50] [--group 20]

The yardstick: a plain device-to-device copy of the bytes a kernel reads and
writes, against morphology (N=1) and smoothing (R <= 3). Morphology N=8
(one launch of the multi-step kernel) is compared with the copy of one
iteration's bytes: how many iterations' worth of traffic its eight cost. The
copy moves (read + written) / 2 bytes, so it reads and writes as many bytes
as the kernel.
Bytes per pixel: morphology reads and writes a 1-byte mask; smoothing reads
the values and the mask and writes the float64 labeling input. Times are
medians of CUDA events after warm-up, data already on the device, in two
forms: one launch between two events (which also counts the host's launch
latency, a few µs, for the kernel and the copy alike), and `--group` launches
back to back between two events divided by their number (the device time of
one launch). The `stage` column is the whole StageOps call (allocations from
CuPy's pool included). The kernels and their arguments come from
backends/cuda/stages.py's morph_launch / smooth_launch, so they are the ones the stages run.
"""

from __future__ import annotations

import argparse

import cupy
import numpy as np
from medians import gpu_median_ms

from ccl_cli.backends.cuda import loader
from ccl_cli.backends.cuda import stages as cuda_stages
from ccl_cli.contract.stages import smooth_weights

SHAPE = (1, 3000, 4000)  # (N, H, W)


def timings(run, repeat: int, group: int) -> tuple[float, float]:
    """(median ms of one run(), median ms per run() of `group` back-to-back runs)."""
    single = gpu_median_ms(run, repeat)

    def runs() -> None:
        for _ in range(group):
            run()

    return single, gpu_median_ms(runs, repeat) / group


def launch_timings(launch: cuda_stages.Launch, repeat: int, group: int) -> tuple[float, float]:
    """timings() of one kernel launch."""
    kernels = loader.device_kernels(0)
    return timings(lambda: kernels.launch(*launch), repeat, group)


def copy_timings(nbytes: int, repeat: int, group: int) -> tuple[float, float]:
    """timings() of one device-to-device copy of `nbytes`."""
    src, dst = cupy.empty(nbytes, cupy.uint8), cupy.empty(nbytes, cupy.uint8)
    src.fill(1)
    return timings(lambda: dst.data.copy_from_device_async(src.data, nbytes), repeat, group)


def row(name: str, kernel: tuple[float, float], stage_ms: float, moved: int, args) -> str:
    copy = copy_timings(moved // 2, args.repeat, args.group)
    return (
        f"| {name} | {kernel[0] * 1e3:.1f} | {copy[0] * 1e3:.1f} | {kernel[0] / copy[0]:.2f}x | "
        f"{kernel[1] * 1e3:.1f} | {copy[1] * 1e3:.1f} | {kernel[1] / copy[1]:.2f}x | "
        f"{stage_ms * 1e3:.1f} | {moved / 2**20:.1f} | {moved / kernel[1] / 1e9:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--group", type=int, default=20, help="launches per back-to-back timing")
    args = parser.parse_args()
    rng = np.random.default_rng(6)
    n, height, width = SHAPE
    pixels = n * height * width
    ops = cuda_stages.CudaStages()
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {height}x{width}")
    print(
        "| case | kernel µs | copy µs | kernel/copy "
        f"| kernel µs (x{args.group}) | copy µs (x{args.group}) | kernel/copy (x{args.group}) "
        "| stage µs | MiB read+written | TB/s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    mask = cupy.asarray(rng.random(SHAPE) < 0.5)
    source, target = mask.view(cupy.uint8), cupy.empty(SHAPE, cupy.uint8)
    for op in ("erode", "dilate"):
        for connectivity in (8, 4):
            for steps in (1, 8):  # one iteration; the most one launch does
                launch = cuda_stages.morph_launch(source, target, op, connectivity, steps)
                kernel = launch_timings(launch, args.repeat, args.group)
                stage = gpu_median_ms(
                    lambda op=op, c=connectivity, s=steps: ops.morph(mask, op, s, c), args.repeat
                )
                label = f"{op} N={steps}, {connectivity}-conn ({launch[0]})"
                print(row(label, kernel, stage, 2 * pixels, args))

    # A depth-like uint16 surface with 10% nodata holes, and a float32 one.
    yy, xx = np.mgrid[0:height, 0:width]
    surface = (
        2000 + 500 * np.sin(xx / 300.0) * np.cos(yy / 200.0) + rng.normal(0, 3, (height, width))
    )
    holes = rng.random((height, width)) < 0.1
    for dtype in (np.uint16, np.float32):
        values = cupy.asarray(np.where(holes, 0, surface).astype(dtype)[None])
        valid = values != 0
        out = cupy.empty(SHAPE, cupy.float64)
        for kind in ("box", "binomial"):
            for radius in (1, 2, 3):
                weights = smooth_weights(kind, radius)
                launch = cuda_stages.smooth_launch(values, valid.view(cupy.uint8), out, weights)
                kernel = launch_timings(launch, args.repeat, args.group)
                stage = gpu_median_ms(
                    lambda v=values, m=valid, w=weights: ops.smooth(v, m, w), args.repeat
                )
                moved = pixels * (np.dtype(dtype).itemsize + 1 + 8)
                label = f"smooth {kind}:{radius} {np.dtype(dtype).name} ({launch[0]})"
                print(row(label, kernel, stage, moved, args))


if __name__ == "__main__":
    main()
