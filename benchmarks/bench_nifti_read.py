"""Reading .nii.gz masks on threads: gccl's reader (ccl_cli.io.volumes.read_volume, one pass,
zlib inflating without the GIL) against the way it read before, nibabel.load's
dataobj.get_unscaled() after a gzip.open of the header (Python's gzip copying under the GIL).

    .venv/bin/python benchmarks/bench_nifti_read.py [--files 20] [--repeat 5] [--shape 128,256,256]

The files: `--files` uint8 masks of (z, y, x) `--shape`, each a few smooth blobs (ellipsoids
of random centres and radii), saved by nibabel as .nii.gz. Each timing reads every file once
on a ThreadPoolExecutor of 1 and of 2 threads (as `gccl label` reads a folder); medians of
`--repeat` runs, in ms. Every value read is checked against the mask written.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nibabel
import numpy as np
from medians import cpu_times_ms

from ccl_cli.io.volumes import read_volume


def few_blobs(shape: tuple[int, int, int], seed: int) -> np.ndarray:
    """3 to 6 ellipsoids of random centres and radii (a tenth to a quarter of each axis)."""
    rng = np.random.default_rng(seed)
    z, y, x = np.ogrid[: shape[0], : shape[1], : shape[2]]
    mask = np.zeros(shape, np.uint8)
    for _ in range(int(rng.integers(3, 7))):
        centre = rng.uniform(0, 1, 3) * shape
        radii = rng.uniform(0.1, 0.25, 3) * shape
        inside = sum(
            ((axis - c) / r) ** 2 for axis, c, r in zip((z, y, x), centre, radii, strict=True)
        )
        mask[inside <= 1] = 1
    return mask


def nibabel_read(path: Path) -> np.ndarray:
    """The reading before: the header through gzip.open (bounds), the data by nibabel."""
    with gzip.open(path, "rb") as handle:
        header = nibabel.Nifti1Header.from_fileobj(handle)
    image = nibabel.load(path, mmap=False)
    raw = np.asanyarray(image.dataobj.get_unscaled())
    del header
    return np.ascontiguousarray(raw.transpose(2, 1, 0))


def gccl_read(path: Path) -> np.ndarray:
    return read_volume(path, 1 << 30).values


def median_ms(run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and spread (max - min) of `repeat` wall times of run(), in ms, after one warmup."""
    times = cpu_times_ms(run, repeat)
    return statistics.median(times), max(times) - min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shape", default="128,256,256", help="z,y,x")
    args = parser.parse_args()
    shape = tuple(int(n) for n in args.shape.split(","))
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {shape} uint8")
    with tempfile.TemporaryDirectory() as folder:
        paths, masks = [], []
        for seed in range(args.files):
            mask = few_blobs(shape, seed)  # type: ignore[arg-type]
            path = Path(folder) / f"mask{seed}.nii.gz"
            nibabel.save(nibabel.Nifti1Image(mask.transpose(2, 1, 0), np.eye(4)), path)
            paths.append(path)
            masks.append(mask)
        size = sum(path.stat().st_size for path in paths)
        print(f"{args.files} files, {size / args.files / 1e3:.0f} kB each on average")
        for read in (nibabel_read, gccl_read):
            for path, mask in zip(paths, masks, strict=True):
                assert np.array_equal(read(path), mask), (read.__name__, path)
        print("| reader | threads | median ms | spread ms |")
        print("|---|---|---|---|")
        for threads in (1, 2):
            with ThreadPoolExecutor(threads) as pool:
                for read in (nibabel_read, gccl_read):
                    median, spread = median_ms(
                        lambda read=read: list(pool.map(read, paths)), args.repeat
                    )
                    print(f"| {read.__name__} | {threads} | {median:.0f} | {spread:.0f} |")


if __name__ == "__main__":
    main()
