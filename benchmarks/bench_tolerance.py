"""Tau mode with a tolerance that grows with the values against an absolute tau, same data.

    .venv/bin/python benchmarks/bench_tolerance.py [--data ../shared/data] [--repeat 15]
        [--threads N] [--device cpu|cuda] [--json OUT]

Cases: the depth frames of DATA/depth (640x480 uint16, millimetres) as one batch, the
first frame tiled to 4000x3000, and the same batch as float32 metres; each labeled
(labels, statistics, min-area 50, 8-connectivity) with --tau 20 (absolute), --tau 5
--tau-quadratic 3.5e-6, --tau 2 --tau-relative 0.01 (in metres: a thousandth of tau and
1000 times the quadratic coefficient), and with --tau 20 --tau-relative 1e-12, whose
labels are --tau 20's: the cost of a growing tolerance alone. They alternate call by
call, so that load from other processes hits each alike. CPU: the calling thread's CPU
time with one thread (all of the work) and wall time with --threads; CUDA: wall time of
the call with a synchronize. Medians of --repeat calls after a warm-up, and their range.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ccl_cli.contract.params import LabelParams

#: name -> (tau, relative, quadratic) in millimetres.
TOLERANCES = {
    "absolute tau 20": (20, 0.0, 0.0),
    "tau 20 + relative 1e-12": (20, 1e-12, 0.0),
    "tau 5 + quadratic 3.5e-6": (5, 0.0, 3.5e-6),
    "tau 2 + relative 0.01": (2, 0.01, 0.0),
}


def params(name: str, metres: bool) -> LabelParams:
    tau, relative, quadratic = TOLERANCES[name]
    if metres:
        tau, quadratic = tau / 1000, quadratic * 1000
    return LabelParams(tau=tau, tau_relative=relative, tau_quadratic=quadratic, min_area=50)


def batches(data: Path) -> dict[str, np.ndarray]:
    import imageio.v3 as iio

    frames = [iio.imread(path) for path in sorted((data / "depth").glob("*.png"))]
    if not frames:
        raise SystemExit(f"no depth frames in {data / 'depth'}")
    reps = (-(-3000 // frames[0].shape[0]), -(-4000 // frames[0].shape[1]))
    tiled = np.ascontiguousarray(np.tile(frames[0], reps)[:3000, :4000])
    batch = np.stack(frames)
    return {
        f"{len(frames)} frames 640x480 in one batch": batch,
        "one frame tiled to 4000x3000": tiled[np.newaxis],
        f"{len(frames)} frames as float32 metres": np.where(batch > 0, batch / 1000, 0).astype(
            np.float32
        ),
    }


def timers(device: str) -> tuple[Callable[[], float], Callable[[], None]]:
    """(clock, wait): the CPU's thread clock, or CUDA's wall clock and a synchronize."""
    if device == "cpu":
        return time.thread_time, lambda: None
    import cupy

    return time.perf_counter, cupy.cuda.Device().synchronize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).parents[2] / "shared/data")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.device == "cpu":
        from ccl_cli.backends.cpu.backend import CpuBackend

        backend = CpuBackend(threads=args.threads)
    else:
        from ccl_cli.backends.cuda.backend import CudaBackend

        backend = CudaBackend()
    clock, wait = timers(args.device)
    if args.threads > 1 and args.device == "cpu":
        clock = time.perf_counter  # the helpers' time is not this thread's
    results = []
    for case, batch in batches(args.data).items():
        if args.device == "cuda":
            import cupy

            batch = cupy.asarray(batch)
        metres = batch.dtype.kind == "f"
        times: dict[str, list[float]] = {name: [] for name in TOLERANCES}
        for name in TOLERANCES:
            backend.label(batch, params(name, metres))
        wait()
        for _ in range(args.repeat):
            for name in TOLERANCES:
                start = clock()
                backend.label(batch, params(name, metres))
                wait()
                times[name].append((clock() - start) * 1e3)
        base = statistics.median(times["absolute tau 20"])
        for name, ms in times.items():
            median = statistics.median(ms)
            print(
                f"{case:<36} {name:<26} {median:9.2f} ms ({min(ms):.2f}-{max(ms):.2f})"
                f"  {median / base:5.2f}x absolute"
            )
            results.append({"case": case, "tolerance": name, "ms": ms})
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
