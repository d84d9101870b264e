"""CPU backend speed against OpenCV (binary) and cc3d (tau), medians in milliseconds.

    .venv/bin/python benchmarks/bench_cpu.py [--data ../shared/data] [--repeat 7]

Cases: a 4000x3000 random mask (density 0.5), a real document scan (ink as
foreground), and a real depth frame tiled to 4000x3000 (tau 20, 4-connectivity).
OpenCV runs connectedComponentsWithStats (labels and stats, CV_32S, all its
threads); cc3d runs connected_components with delta (labels only).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import cc3d
import cv2
import imageio.v3 as iio
import numpy as np
import tifffile

from ccl_cli.backends.cpu.labels import label_image
from ccl_cli.contract.params import LabelParams

SHAPE = (3000, 4000)


def medians_ms(
    ours: Callable[[], object], peer: Callable[[], object], repeat: int
) -> tuple[float, float]:
    """Median wall times of `ours` and `peer` in ms, after a warm-up of each.

    The two alternate, so that load from other processes hits both alike.
    """
    ours()
    peer()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for run, out in ((ours, times[0]), (peer, times[1])):
            start = time.perf_counter()
            run()
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3


def tiled(frame: np.ndarray) -> np.ndarray:
    """`frame` repeated to fill SHAPE."""
    reps = (-(-SHAPE[0] // frame.shape[0]), -(-SHAPE[1] // frame.shape[1]))
    return np.ascontiguousarray(np.tile(frame, reps)[: SHAPE[0], : SHAPE[1]])


def binary_cases(data: Path) -> dict[str, np.ndarray]:
    """Named boolean masks: random and a document scan (tifffile's stored bit: ink = 1)."""
    rng = np.random.default_rng(0)
    cases = {"random 4000x3000 d=0.5": rng.random(SHAPE) < 0.5}
    scans = sorted((data / "docs").glob("*.tif"))
    if scans:
        cases[f"scan {scans[0].name}"] = tifffile.imread(scans[0]).astype(bool)
    return cases


def cases(data: Path) -> list[tuple[str, str, Callable[[], object], Callable[[], object]]]:
    """(case, peer name, our run, the peer's run) for every benchmark case."""
    out = []
    for name, mask in binary_cases(data).items():
        as_uint8 = mask.astype(np.uint8)
        for connectivity in (8, 4):
            out.append(
                (
                    f"{name}, {connectivity}-conn",
                    "OpenCV",
                    partial(label_image, as_uint8, LabelParams(connectivity=connectivity)),
                    partial(
                        cv2.connectedComponentsWithStats,
                        as_uint8,
                        connectivity=connectivity,
                        ltype=cv2.CV_32S,
                    ),
                )
            )
    frames = sorted((data / "depth").glob("*.png"))
    if frames:
        depth = tiled(iio.imread(frames[0]))
        out.append(
            (
                f"depth {frames[0].name} tiled, tau 20, 4-conn",
                "cc3d",
                partial(label_image, depth, LabelParams(tau=20, connectivity=4)),
                partial(cc3d.connected_components, depth, delta=20, connectivity=4),
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).parents[2] / "shared/data")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{'case':<50} {'peer':<7} {'gccl cpu':>9} {'peer':>9} {'ratio':>6}")
    for case, peer_name, ours, peer in cases(args.data):
        ours_ms, peer_ms = medians_ms(ours, peer, args.repeat)
        print(
            f"{case:<50} {peer_name:<7} {ours_ms:>8.1f}  {peer_ms:>8.1f}  {ours_ms / peer_ms:>5.2f}"
        )


if __name__ == "__main__":
    main()
