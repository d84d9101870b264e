"""Label volumes as files: the gzip level of .nii.gz (and .nrrd) label volumes, and the writers
and readers of every volume format, medians in milliseconds on one thread.

    .venv/bin/python benchmarks/bench_volume_files.py [--repeat 5] [--shape 128,256,256]

Label volumes: bench_volumes.py's blobs (half the voxels in smooth blobs, few large components)
and pores (small balls, thousands of components), labeled with 26-connectivity, uint16.
Levels: zlib-ng through imagecodecs (what the writers use, in gzip members) against Python's
zlib (what nibabel and pynrrd write with), each with its bytes out and the ratio. Formats: the
time of encode_label_volume for an input of each format, and of read_volume of its output;
every output read back is checked against the labels.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
from bench_volumes import balls, blobs

import ccl_cli
from ccl_cli.io.volumes import (
    Geometry,
    VolumeFile,
    encode_label_volume,
    label_volume_suffix,
    read_volume,
)
from ccl_cli.io.volumes.gzip_members import gzip_members


def median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def row(cells: list[object]) -> None:
    """One row of a Markdown table."""
    print("| " + " | ".join(str(cell) for cell in cells) + " |")


def label_volumes(shape: tuple[int, int, int]) -> dict[str, np.ndarray]:
    found = {}
    for name, mask in (("blobs", blobs(shape, 1)), ("pores", balls(shape, 20000, (1, 4), 2))):
        labels, _ = ccl_cli.label(mask, connectivity=26, stats=False)
        found[name] = labels.astype(np.uint16)
        print(f"{name}: {int(labels.max())} components")
    return found


def levels(labels: np.ndarray, repeat: int) -> None:
    data = labels.tobytes()
    mb = len(data) / 1e6
    print("| codec | level | ms | MB/s | bytes | ratio |\n| --- | --- | --- | --- | --- | --- |")
    for level in (1, 2, 3, 4, 6):
        out = b"".join(gzip_members([data], level))
        ms = median_ms(lambda level=level: b"".join(gzip_members([data], level)), repeat)
        row(
            [
                "zlib-ng",
                level,
                f"{ms:.0f}",
                f"{mb / ms * 1e3:.0f}",
                len(out),
                f"{len(data) / len(out):.1f}",
            ]
        )
    for level in (1, 6):
        out = zlib.compress(data, level)
        ms = median_ms(lambda level=level: zlib.compress(data, level), repeat)
        row(
            [
                "zlib",
                level,
                f"{ms:.0f}",
                f"{mb / ms * 1e3:.0f}",
                len(out),
                f"{len(data) / len(out):.1f}",
            ]
        )


def formats(labels: np.ndarray, repeat: int, folder: Path) -> None:
    geometry = Geometry(spacing=(0.5, 0.5, 1.0), units="mm")
    kept = int(labels.max())
    print("| format | encode ms | bytes | read ms |\n| --- | --- | --- | --- |")
    for fmt in ("nifti", "nrrd", "metaimage", "tiff", "npy"):
        source = VolumeFile(labels, geometry, "npy")

        def encode(fmt: str = fmt, source: VolumeFile = source) -> bytes:
            data = encode_label_volume(labels, kept, source, fmt)
            return data if isinstance(data, bytes) else b"".join(data)

        path = folder / f"out{label_volume_suffix('npy', fmt)}"
        path.write_bytes(encode())
        if fmt == "metaimage":
            try:
                import SimpleITK  # noqa: F401
            except ImportError:
                row([fmt, f"{median_ms(encode, repeat):.0f}", path.stat().st_size, "no SimpleITK"])
                continue
        assert np.array_equal(read_volume(path, 1 << 34).values, labels), fmt
        read = median_ms(lambda path=path: read_volume(path, 1 << 34), repeat)
        print(f"| {fmt} | {median_ms(encode, repeat):.0f} | {path.stat().st_size} | {read:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--shape", default="128,256,256", help="D,H,W")
    args = parser.parse_args()
    depth, height, width = (int(n) for n in args.shape.split(","))
    shape = (depth, height, width)
    print(f"{platform.node()}, {platform.processor() or platform.machine()}, shape {shape}")
    with tempfile.TemporaryDirectory() as folder:
        for name, labels in label_volumes(shape).items():
            print(f"\n### {name}\n")
            levels(labels, args.repeat)
            print()
            formats(labels, args.repeat, Path(folder))


if __name__ == "__main__":
    main()
