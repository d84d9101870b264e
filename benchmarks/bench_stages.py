"""Morphology and smoothing kernels on a 4000x3000 image against a device-to-device copy.

    python3 benchmarks/bench_stages.py [--repeat 50]

Issue 6's goal: morphology (N=1) and smoothing (R <= 3) each within 2x of a
plain device-to-device copy of the bytes they read and write. The copy moves
(read + written) / 2 bytes, so it reads and writes as many bytes as the kernel.
Bytes per pixel: morphology reads and writes a 1-byte mask; smoothing reads
the values and the mask and writes the float64 labeling input. Times are
medians of CUDA events after warm-up, data already on the device; the
`stage` column is the whole StageOps call (allocations from CuPy's pool included).
"""

from __future__ import annotations

import argparse

import cupy
import numpy as np
from medians import gpu_median_ms

from ccl_cli.backends import cuda as backend
from ccl_cli.backends import cuda_stages
from ccl_cli.stages import smooth_weights

SHAPE = (1, 3000, 4000)  # (N, H, W)


def launch_ms(name: str, grid: int, block: tuple[int, ...], args: tuple, repeat: int) -> float:
    """Median time of one launch of kernel `name`."""
    kernels = backend._kernels(0)
    return gpu_median_ms(lambda: kernels.launch(name, grid, block, args), repeat)


def copy_ms(nbytes: int, repeat: int) -> float:
    """Median time of one device-to-device copy of `nbytes`."""
    src, dst = cupy.empty(nbytes, cupy.uint8), cupy.empty(nbytes, cupy.uint8)
    src.fill(1)
    return gpu_median_ms(lambda: dst.data.copy_from_device_async(src.data, nbytes), repeat)


def row(name: str, kernel_ms: float, stage_ms: float, moved: int, repeat: int) -> str:
    reference = copy_ms(moved // 2, repeat)
    return (
        f"| {name} | {kernel_ms * 1e3:.1f} | {stage_ms * 1e3:.1f} | {moved / 2**20:.1f} | "
        f"{reference * 1e3:.1f} | {kernel_ms / reference:.2f}x | "
        f"{moved / kernel_ms / 1e9:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(6)
    n, height, width = SHAPE
    pixels = n * height * width
    ops = cuda_stages.CudaStages()
    print(f"{cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {height}x{width}")
    print("| case | kernel µs | stage µs | MiB read+written | copy µs | kernel/copy | TB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")

    mask = cupy.asarray(rng.random(SHAPE) < 0.5)
    source, target = mask.view(cupy.uint8), cupy.empty(SHAPE, cupy.uint8)
    tiles_x = -(-width // cuda_stages._MORPH_TILE[0])
    tiles = tiles_x * -(-height // cuda_stages._MORPH_TILE[1])
    geometry = (np.uint32(height), np.uint32(width), np.uint32(tiles_x), np.uint32(tiles))
    for op in ("erode", "dilate"):
        for connectivity in (8, 4):
            kernel = launch_ms(
                f"gccl_{op}_{connectivity}",
                n * tiles,
                cuda_stages._MORPH_THREADS,
                (source, target, *geometry),
                args.repeat,
            )
            stage = gpu_median_ms(
                lambda op=op, c=connectivity: ops.morph(mask, op, 1, c), args.repeat
            )
            print(row(f"{op} N=1, {connectivity}-conn", kernel, stage, 2 * pixels, args.repeat))

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
                accumulator = cuda_stages._accumulator(np.dtype(dtype), weights)
                name = f"gccl_smooth_{backend._SUFFIX[np.dtype(dtype)]}_{accumulator}"
                side = cuda_stages._SMOOTH_TILE
                smooth_tiles_x = -(-width // side)
                smooth_tiles = smooth_tiles_x * -(-height // side)
                launch_args = (
                    values,
                    valid.view(cupy.uint8),
                    out,
                    cupy.asarray(np.array(weights, np.int32)),
                    np.int32(radius),
                    np.uint32(height),
                    np.uint32(width),
                    np.uint32(smooth_tiles_x),
                    np.uint32(smooth_tiles),
                )

                kernel = launch_ms(
                    name, n * smooth_tiles, cuda_stages._SMOOTH_THREADS, launch_args, args.repeat
                )
                stage = gpu_median_ms(
                    lambda v=values, m=valid, w=weights: ops.smooth(v, m, w), args.repeat
                )
                moved = pixels * (np.dtype(dtype).itemsize + 1 + 8)
                label = f"smooth {kind}:{radius} {np.dtype(dtype).name} ({accumulator})"
                print(row(label, kernel, stage, moved, args.repeat))


if __name__ == "__main__":
    main()
