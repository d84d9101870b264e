"""What one call of the CPU engine costs on small images, medians in microseconds.

    .venv/bin/python benchmarks/bench_cpu_call.py [--repeat 2000] [--rounds 7] [--json OUT]

Cases: 64x64 and 640x480 random masks (density 0.5, 8-connectivity) and a 64x64 and a
640x480 uint16 ramp with noise in tau mode (tau 20, min-area 50). Each case is timed as
CpuBackend.label on a batch of one image (one thread, and every core) and as
`ccl_cli.label` on the image (device cpu): on small images the fixed cost of a call (the
Python around the engine, the binding, the engine's set-up) is most of it. A round times
`--repeat` calls back to back and gives the mean per call, in wall time and in the calling
thread's CPU time (which a shared machine's other processes disturb less; with one thread
it is all of the call's work); the report gives each case's median over `--rounds` rounds
and their range.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

import ccl_cli
from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import LabelParams


def cases() -> list[tuple[str, np.ndarray, LabelParams, dict]]:
    """(name, image, params for the backend, keywords for ccl_cli.label)."""
    rng = np.random.default_rng(3)
    found = []
    for height, width in ((64, 64), (480, 640)):
        mask = (rng.random((height, width)) < 0.5).astype(np.uint8)
        found.append((f"binary {width}x{height}", mask, LabelParams(), {}))
        ramp = np.add.outer(np.arange(height) * 7, np.arange(width) * 3) + 500
        depth = (ramp + rng.integers(0, 15, (height, width))).astype(np.uint16)
        params = LabelParams(tau=20, min_area=50)
        found.append((f"tau {width}x{height}", depth, params, {"tau": 20, "min_area": 50}))
    return found


def per_call_us(
    run: Callable[[], object], repeat: int, rounds: int
) -> tuple[list[float], list[float]]:
    """Mean wall and thread-CPU microseconds per call of `rounds` rounds of `repeat` calls
    (after warm-up)."""
    for _ in range(min(repeat, 50)):
        run()
    wall, cpu = [], []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.thread_time()
        for _ in range(repeat):
            run()
        cpu.append((time.thread_time() - start_cpu) / repeat * 1e6)
        wall.append((time.perf_counter() - start) / repeat * 1e6)
    return wall, cpu


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", help="write the rounds of every case here")
    args = parser.parse_args()
    one, every = CpuBackend(threads=1), CpuBackend()
    records = []
    for name, image, params, keywords in cases():
        batch = image[np.newaxis]
        repeat = args.repeat if image.size <= 4096 else max(1, args.repeat // 20)
        runs: dict[str, Callable[[], object]] = {
            "backend, 1 thread": lambda b=batch, p=params: one.label(b, p),
            "backend, all threads": lambda b=batch, p=params: every.label(b, p),
            "ccl_cli.label": lambda i=image, k=keywords: ccl_cli.label(i, device="cpu", **k),
        }
        for how, run in runs.items():
            wall, cpu = per_call_us(run, repeat, args.rounds)
            records.append({"case": name, "call": how, "wall_us": wall, "thread_cpu_us": cpu})
            print(f"{name:16} {how:22} wall {spread(wall)}  cpu {spread(cpu)} us", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(records, handle, indent=1)


if __name__ == "__main__":
    main()
