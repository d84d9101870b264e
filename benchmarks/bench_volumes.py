"""Volume labeling on the CPU against cc3d and scipy, medians in milliseconds.

    .venv/bin/python benchmarks/bench_volumes.py [--repeat 5] [--cases blobs,pores,...]
        [--scipy] [--large] [--json out.json]

Cases (generated, the same bytes every run): smooth blobs 512^3 (half foreground), sparse
pores 512^3 (balls of radius 2..5), random density 0.3 512^3, each with 26- and
6-connectivity; 32 volumes of 128x256x256 blobs (26); a CT-like uint16 256x512x512
(a cylinder of material on a slow ramp along z with noise and pores, 0 outside) in tau
mode, tau 20 (26 and 6); with --large, blobs 2048x1024x1024 (26; about 11 GB of labels
for each engine). gccl is ccl_cli.label on the numpy volume with stats=False (labels only,
as cc3d gives them: every core of this process) and, apart, with stats=True (labels,
statistics). cc3d runs connected_components (one thread; binary_image for masks, delta=20
for the CT volume, one call per volume of a batch); scipy (--scipy) runs ndimage.label
with generate_binary_structure(3, 1|3) on the masks. The runs alternate, so that load from
other processes hits every engine alike, and before each one as much memory as its call
allocates (traced once, untimed: labels, and for gccl+stats its tables; at least the labels
and half as much again) is touched and freed (refresh_memory); every engine's component
count is checked against gccl's, and a disagreement is printed and fails the run (exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ccl_cli

#: Each case family and what --cases names it.
FAMILIES = ("blobs", "pores", "random", "batch", "ct")


@dataclass
class Case:
    name: str
    family: str
    volume: np.ndarray  # (D, H, W), or (N, D, H, W) for a batch
    connectivity: int
    tau: float | None = None


def blobs(shape: tuple[int, int, int], seed: int, xp: Any = np) -> Any:
    """Half the voxels foreground, in smooth blobs: a sum of six random plane waves of a
    few periods across the volume, thresholded at its median; made by the array module `xp`
    (numpy, or cupy for a volume made on the device), in float32."""
    rng = np.random.default_rng(seed)
    axes = [xp.arange(n, dtype=xp.float32) / max(shape) for n in shape]
    field = xp.zeros(shape, xp.float32)
    for _ in range(6):
        k = rng.normal(0, 8, 3).astype(np.float32)
        phase = np.float32(rng.uniform(0, 2 * np.pi))
        field += xp.cos(
            k[0] * axes[0][:, None, None] + k[1] * axes[1][None, :, None] + k[2] * axes[2] + phase
        )
    return (field > xp.median(field[::4, ::4, ::4])).astype(xp.uint8)


def balls(shape: tuple[int, int, int], count: int, radii: tuple[int, int], seed: int) -> np.ndarray:
    """A mask of `count` balls of random radii at random centres (clipped at the border)."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(shape, np.uint8)
    for radius in range(radii[0], radii[1] + 1):
        d = np.arange(-radius, radius + 1)
        dz, dy, dx = np.meshgrid(d, d, d, indexing="ij")
        inside = dz**2 + dy**2 + dx**2 <= radius**2
        offsets = np.stack([dz[inside], dy[inside], dx[inside]], 1)
        centres = rng.integers(0, shape, (count // (radii[1] - radii[0] + 1), 3))
        voxels = (centres[:, None, :] + offsets[None, :, :]).reshape(-1, 3)
        voxels = voxels[((voxels >= 0) & (voxels < shape)).all(1)]
        mask[voxels[:, 0], voxels[:, 1], voxels[:, 2]] = 1
    return mask


def ct_like(shape: tuple[int, int, int], seed: int) -> np.ndarray:
    """uint16 CT-like casting: 0 outside a cylinder; inside, material of about 3000 on a ramp
    of 400 along z with +-3 noise, and pores of about 800."""
    rng = np.random.default_rng(seed)
    depth, height, width = shape
    y, x = np.ogrid[:height, :width]
    cylinder = (y - height / 2) ** 2 + (x - width / 2) ** 2 < (0.45 * min(height, width)) ** 2
    ramp = 3000 + 400 * np.arange(depth, dtype=np.float32)[:, None, None] / depth
    values = ramp + rng.integers(-3, 4, shape, dtype=np.int16)
    pores = balls(shape, 3000, (2, 6), seed + 1).astype(bool)
    values = np.where(pores, 800 + rng.integers(-3, 4, shape, dtype=np.int16), values)
    return np.where(cylinder, values, 0).astype(np.uint16)


def cases(families: tuple[str, ...], large: bool) -> list[Case]:
    """The cases of the families asked for."""
    out: list[Case] = []
    side = (512, 512, 512)
    if "blobs" in families:
        volume = blobs(side, 1)
        out += [Case("blobs 512^3", "blobs", volume, c) for c in (26, 6)]
    if "pores" in families:
        volume = balls(side, 40_000, (2, 5), 2)
        out += [Case("sparse pores 512^3", "pores", volume, c) for c in (26, 6)]
    if "random" in families:
        volume = (np.random.default_rng(3).random(side, np.float32) < 0.3).astype(np.uint8)
        out += [Case("random d=0.3 512^3", "random", volume, c) for c in (26, 6)]
    if "batch" in families:
        batch = np.stack([blobs((128, 256, 256), 10 + n) for n in range(32)])
        out.append(Case("32 x 128x256x256 blobs", "batch", batch, 26))
    if "ct" in families:
        volume = ct_like((256, 512, 512), 4)
        out += [Case("CT-like uint16 256x512x512, tau 20", "ct", volume, c, 20) for c in (26, 6)]
    if large:
        out.append(Case("blobs 2048x1024x1024", "blobs", blobs((2048, 1024, 1024), 5), 26))
    return out


def runs(case: Case, with_scipy: bool) -> dict[str, Callable[[], int]]:
    """Each engine's run of the case, returning its total component count."""
    volumes = case.volume if case.volume.ndim == 4 else case.volume[None]
    options = {"connectivity": case.connectivity, "tau": case.tau}

    def gccl() -> int:
        _, counts = ccl_cli.label(case.volume, stats=False, **options)
        return int(np.sum(counts))

    def gccl_stats() -> int:
        _, tables = ccl_cli.label(case.volume, stats=True, **options)
        return sum(len(table) for table in tables)

    out: dict[str, Callable[[], int]] = {"gccl": gccl, "gccl+stats": gccl_stats}
    try:
        import cc3d

        def with_cc3d() -> int:
            total = 0
            for volume in volumes:
                if case.tau is None:
                    _, n = cc3d.connected_components(
                        volume, connectivity=case.connectivity, binary_image=True, return_N=True
                    )
                else:
                    _, n = cc3d.connected_components(
                        volume, connectivity=case.connectivity, delta=int(case.tau), return_N=True
                    )
                total += int(n)
            return total

        out["cc3d"] = with_cc3d
    except ImportError:
        pass
    if with_scipy and case.tau is None:
        from scipy import ndimage

        structure = ndimage.generate_binary_structure(3, {6: 1, 18: 2, 26: 3}[case.connectivity])
        out["scipy"] = lambda: sum(int(ndimage.label(v, structure)[1]) for v in volumes)
    return out


def refresh_memory(size: int) -> None:
    """Touch and free `size` bytes (untimed). A virtual machine may hand memory that has been
    free for a while back to its host, which makes the next touch of it cost about 1.7 s a
    GB of system time (the dev machine does, after about 2 s); whichever engine allocates
    its labels first after another engine's long run would pay that. Touched just before,
    the pages are the guest's again for every engine alike."""
    np.ones(size, np.uint8)


def allocated(run: Callable[[], int]) -> int:
    """The most bytes a call of `run` holds at once through Python's and numpy's allocators
    (tracemalloc; an untimed call)."""
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(engines: dict[str, Callable[[], int]], repeat: int, labels: int) -> dict[str, dict]:
    """Per engine: its component count, its first call's wall time (gccl's grows its working
    arrays), and over `repeat` alternating runs the median and range of the wall time and
    the median CPU time of this process (all its threads), in ms; before each run as many
    bytes as the engine's call allocates, at least `labels`, are touched (refresh_memory)."""
    out: dict[str, dict] = {}
    for name, run in engines.items():
        start = time.perf_counter()
        out[name] = {"components": run(), "first_ms": (time.perf_counter() - start) * 1e3}
    refresh = {name: max(labels, allocated(run)) for name, run in engines.items()}
    wall: dict[str, list[float]] = {name: [] for name in engines}
    cpu: dict[str, list[float]] = {name: [] for name in engines}
    for _ in range(repeat):
        for name, run in engines.items():
            refresh_memory(refresh[name])
            start, start_cpu = time.perf_counter(), time.process_time()
            run()
            wall[name].append((time.perf_counter() - start) * 1e3)
            cpu[name].append((time.process_time() - start_cpu) * 1e3)
    for name in engines:
        out[name].update(
            median_ms=statistics.median(wall[name]),
            min_ms=min(wall[name]),
            max_ms=max(wall[name]),
            cpu_ms=statistics.median(cpu[name]),
        )
    return out


def chosen_families(parser: argparse.ArgumentParser, cases: str) -> tuple[str, ...]:
    """The families a --cases value names (comma-separated); an unknown one is the
    parser's error."""
    families = tuple(name for name in cases.split(",") if name)
    unknown = set(families) - set(FAMILIES)
    if unknown:
        parser.error(f"--cases: no {', '.join(sorted(unknown))} (of {', '.join(FAMILIES)})")
    return families


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", default=",".join(FAMILIES), help="of " + ", ".join(FAMILIES))
    parser.add_argument("--scipy", action="store_true", help="also time scipy.ndimage.label")
    parser.add_argument("--large", action="store_true", help="also blobs 2048x1024x1024")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    families = chosen_families(parser, args.cases)
    results = []
    disagreed = False
    engines = ("gccl", "gccl+stats", "cc3d", "scipy")
    print(f"{'case':<38} {'conn':>4} " + " ".join(f"{name:>10}" for name in engines), end="")
    print("  x cc3d: median (cpu)")
    for case in cases(families, args.large):
        labels = 4 * case.volume.size  # and half as much again: the working arrays
        measured = measure(runs(case, args.scipy), args.repeat, labels + labels // 2)
        counts = {name: m["components"] for name, m in measured.items()}
        wrong = {name: n for name, n in counts.items() if n != counts["gccl"]}
        disagreed |= bool(wrong)
        cells = [
            f"{measured[name]['median_ms']:>10.0f}" if name in measured else f"{'-':>10}"
            for name in engines
        ]
        ratio = "-"
        if "cc3d" in measured:
            gccl, cc3d = measured["gccl"], measured["cc3d"]
            ratio = f"{cc3d['median_ms'] / gccl['median_ms']:.2f} "
            ratio += f"({cc3d['cpu_ms'] / gccl['cpu_ms']:.2f})"
        print(f"{case.name:<38} {case.connectivity:>4} {' '.join(cells)}  {ratio}")
        if wrong:
            print(f"  COMPONENT COUNTS DIFFER: gccl {counts['gccl']}, {wrong}", file=sys.stderr)
        results.append(
            {"case": case.name, "connectivity": case.connectivity, "tau": case.tau, **measured}
        )
    if args.json:
        machine = {"cpu_count": os.cpu_count(), "platform": platform.platform()}
        document = {"repeat": args.repeat, "machine": machine, "cases": results}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    sys.exit(1 if disagreed else 0)


if __name__ == "__main__":
    main()
