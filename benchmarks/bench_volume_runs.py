#!/usr/bin/env python3
"""Volume inputs on the command line: what they cost 2-D runs, and a volume run's peak memory.

1. 2-D start-up and runs unchanged: `gccl --help` and `gccl label` of one small PNG, whole
   commands in a fresh Python each, median of --repeat runs, for each checkout given with
   --checkout (e.g. the main branch's and this one's): PYTHONPATH points at it, so its
   `ccl_cli` is the one imported. The checkouts' runs alternate, so that both meet the same
   load.
2. A --size^3 volume run's peak memory: `gccl label vol.npy --device cpu` of a random binary
   uint8 volume of density --density (26-connectivity, statistics, a .labels.npy written),
   its maximum resident set size (getrusage of the child) against the volume's values plus
   its uint32 labels.

    python3 benchmarks/bench_volume_runs.py --checkout /work/main --checkout . --work /tmp/vr
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image


def timed(command: list[str], checkout: Path, cwd: Path) -> float:
    """Seconds of one whole command with `checkout` on PYTHONPATH (it must exit 0)."""
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - started


def peak_rss_bytes(command: list[str], checkout: Path, cwd: Path) -> tuple[int, float]:
    """(maximum resident set size of the child in bytes, seconds) of one command run in a
    child of a fresh helper process, so that RUSAGE_CHILDREN sees only it."""
    helper = (
        "import resource, subprocess, sys, time, json\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
        "s = time.perf_counter() - t\n"
        "print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, s]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(checkout.resolve())}
    done = subprocess.run(
        [sys.executable, "-c", helper, *command],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    kib, seconds = json.loads(done.stdout)
    return int(kib) * 1024, float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", action="append", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/bench_volume_runs"))
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--density", type=float, default=0.3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = args.work
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rng = np.random.default_rng(0)
    Image.fromarray(((rng.random((480, 640)) < 0.4) * 255).astype(np.uint8)).save(work / "a.png")
    volume = (rng.random((args.size,) * 3) < args.density).astype(np.uint8)
    np.save(work / "vol.npy", volume)
    gccl = [sys.executable, "-m", "ccl_cli"]
    times: dict[str, dict[str, list[float]]] = {
        str(c): {"help": [], "png": []} for c in args.checkout
    }
    for run in range(args.repeat):
        for checkout in args.checkout:
            key = str(checkout)
            times[key]["help"].append(timed([*gccl, "--help"], checkout, work))
            out = work / f"out-{run}-{abs(hash(key))}"
            label = [*gccl, "label", "a.png", "--out", str(out), "--quiet", "--device", "cpu"]
            times[key]["png"].append(timed(label, checkout, work))
            shutil.rmtree(out)
    report: dict[str, object] = {"repeat": args.repeat, "machine": os.uname().nodename}
    for key, measured in times.items():
        medians = {name: statistics.median(values) for name, values in measured.items()}
        spread = {name: (min(values), max(values)) for name, values in measured.items()}
        report[key] = {"median_s": medians, "min_max_s": spread}
        print(
            f"{key}: gccl --help median {medians['help']:.3f} s "
            f"({spread['help'][0]:.3f}-{spread['help'][1]:.3f}); one 640x480 PNG "
            f"{medians['png']:.3f} s ({spread['png'][0]:.3f}-{spread['png'][1]:.3f})"
        )
    checkout = args.checkout[-1]
    command = [*gccl, "label", "vol.npy", "--out", str(work / "vol-out"), "--quiet"]
    peaks = [peak_rss_bytes([*command, "--device", "cpu"], checkout, work) for _ in range(3)]
    peak = statistics.median(p for p, _ in peaks)
    seconds = statistics.median(s for _, s in peaks)
    floor = volume.nbytes + 4 * volume.size
    print(
        f"{checkout}: {args.size}^3 uint8 volume (d={args.density}), --device cpu: peak RSS "
        f"{peak / 2**20:.0f} MiB = {peak / floor:.2f}x its values + uint32 labels "
        f"({floor / 2**20:.0f} MiB), {seconds:.2f} s (median of 3)"
    )
    report["volume"] = {"size": args.size, "peak_rss": peak, "floor": floor, "seconds": seconds}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
