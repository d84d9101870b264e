"""CPU backend speed against OpenCV and cc3d, medians in milliseconds.

    .venv/bin/python benchmarks/bench_cpu.py [--data ../shared/data] [--repeat 9]
        [--threads N] [--json out.json]

Cases: 4000x3000 random masks (density 0.5, 8- and 4-connectivity; density
0.1, 8), every document scan of DATA/docs (*.tif, ink as foreground,
8-connectivity), and a depth frame of DATA/depth tiled to 4000x3000 (uint16,
tau 20, 8-connectivity, min-area 50). gccl is CpuBackend.label on a batch of
one image: labels, statistics and min-area. OpenCV runs
connectedComponentsWithStats (labels and stats, CV_32S, all its threads; no
tau mode); cc3d runs connected_components (labels only, one thread; delta 20
with 4-connectivity for the depth case). The runs alternate, so that load
from other processes hits every engine alike. The first gccl call of each
case (its working arrays grown to the case's size) is reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import LabelParams

SHAPE = (3000, 4000)


def tiled(frame: np.ndarray) -> np.ndarray:
    """`frame` repeated to fill SHAPE."""
    reps = (-(-SHAPE[0] // frame.shape[0]), -(-SHAPE[1] // frame.shape[1]))
    return np.ascontiguousarray(np.tile(frame, reps)[: SHAPE[0], : SHAPE[1]])


def ink(path: Path) -> np.ndarray:
    """The ink of a 1-bit scan as uint8 0/1, whichever way the TIFF stores it."""
    import tifffile

    with tifffile.TiffFile(path) as tif:
        stored = tif.pages[0].asarray().astype(bool)
        min_is_white = tif.pages[0].photometric == tifffile.PHOTOMETRIC.MINISWHITE
    return (stored if min_is_white else ~stored).astype(np.uint8)


def cases(data: Path) -> list[tuple[str, np.ndarray, LabelParams]]:
    """(name, image, params) of every case whose data is present."""
    rng = np.random.default_rng(0)
    dense = (rng.random(SHAPE) < 0.5).astype(np.uint8)
    out = [
        ("random 4000x3000 d=0.5, 8-conn", dense, LabelParams(connectivity=8)),
        ("random 4000x3000 d=0.5, 4-conn", dense, LabelParams(connectivity=4)),
        (
            "random 4000x3000 d=0.1, 8-conn",
            (rng.random(SHAPE) < 0.1).astype(np.uint8),
            LabelParams(connectivity=8),
        ),
    ]
    for scan in sorted((data / "docs").glob("*.tif")):
        image = ink(scan)
        name = f"scan {scan.name} {image.shape[1]}x{image.shape[0]}, 8-conn"
        out.append((name, image, LabelParams(connectivity=8)))
    frames = sorted((data / "depth").glob("*.png"))
    if frames:
        import imageio.v3 as iio

        depth = tiled(iio.imread(frames[0]))
        params = LabelParams(tau=20, connectivity=8, min_area=50)
        out.append(
            (f"depth {frames[0].name} tiled 4000x3000, tau 20, 8-conn, min-area 50", depth, params)
        )
    return out


def peers(image: np.ndarray, params: LabelParams, threads: int) -> dict[str, Callable[[], object]]:
    """The other engines' runs of one case, those installed and able to run it."""
    runs: dict[str, Callable[[], object]] = {}
    try:
        import cv2

        cv2.setNumThreads(threads)
        if params.tau is None:
            runs["opencv"] = lambda: cv2.connectedComponentsWithStats(
                image, connectivity=params.connectivity, ltype=cv2.CV_32S
            )
    except ImportError:
        pass
    try:
        import cc3d

        if params.tau is None:
            runs["cc3d"] = lambda: cc3d.connected_components(
                image, connectivity=params.connectivity
            )
        else:
            runs["cc3d"] = lambda: cc3d.connected_components(image, delta=20, connectivity=4)
    except ImportError:
        pass
    return runs


def measure(runs: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """Median wall time of every run in ms, after one warm-up call each, alternating."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).parents[2] / "shared/data")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    backend = CpuBackend(args.threads)
    results = []
    print(f"{'case':<72} {'first':>7} {'gccl':>8} {'opencv':>8} {'cc3d':>8} {'x opencv':>8}")
    for name, image, params in cases(args.data):
        batch = image[np.newaxis]
        start = time.perf_counter()
        backend.label(batch, params)
        first_ms = (time.perf_counter() - start) * 1e3
        runs = {"gccl": lambda b=batch, p=params: backend.label(b, p)}
        runs.update(peers(image, params, args.threads))
        ms = measure(runs, args.repeat)
        speedup = ms["opencv"] / ms["gccl"] if "opencv" in ms else None
        cells = [f"{ms[k]:>8.1f}" if k in ms else f"{'-':>8}" for k in ("gccl", "opencv", "cc3d")]
        ratio = f"{speedup:>8.2f}" if speedup is not None else f"{'-':>8}"
        print(f"{name:<72} {first_ms:>7.0f} {' '.join(cells)} {ratio}")
        results.append({"case": name, "first_call_ms": first_ms, "median_ms": ms})
    if args.json:
        machine = {
            "cpu_count": os.cpu_count(),
            "threads": args.threads,
            "platform": platform.platform(),
        }
        document = {"repeat": args.repeat, "machine": machine, "cases": results}
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
