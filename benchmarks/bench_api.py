"""The Python API on device arrays against its own kernels: wall clock and CUDA events.

    python3 benchmarks/bench_api.py [--repeat 50] [--json OUT.json]

Cases (random masks already on the device, d = 0.5, medians after warm-up):
  64 x 1920x1080, 8-connectivity, a PyTorch tensor in and out: labels only
  (ccl_cli.Labeler(stats=False)), then labels + statistics on the device;
  4000x3000, 4-connectivity (CuPy and PyTorch): labels + statistics;
  4000x3000, 8-connectivity: labels only (the kernels' own time);
  one 640x480 image, labels only: the wall time of a call that is waited for,
  and the time per call of 1000 calls queued back to back.
"wall" is perf_counter around the call and a stream synchronize; "events" are
CUDA events around the call on its stream; "kernels" are CUDA events around
the kernels alone (ccl_cli.backends.cuda.labels), which the API adds its
Python work and, with statistics, its waits for the label counts to.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cupy
import numpy as np

import ccl_cli
from ccl_cli.backends.cuda import frameworks
from ccl_cli.backends.cuda import labels as cuda_labels
from ccl_cli.contract.params import LabelParams


def timings(run: Callable[[], object], stream: Any, repeat: int, warmup: int = 5) -> dict:
    """Median wall ms (call + synchronize) and CUDA-event ms of run() on `stream`."""
    for _ in range(warmup):
        run()
    stream.synchronize()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    walls, events = [], []
    for _ in range(repeat):
        began = time.perf_counter()
        start.record(stream)
        run()
        stop.record(stream)
        stream.synchronize()
        walls.append((time.perf_counter() - began) * 1e3)
        events.append(cupy.cuda.get_elapsed_time(start, stop))
    return {"wall_ms": statistics.median(walls), "events_ms": statistics.median(events)}


def kernels_ms(values: Any, params: LabelParams, stats: bool, repeat: int) -> float:
    """CUDA-event median of the kernels alone (labels, or labels + statistics)."""
    values = values if values.ndim == 3 else values[None]
    out = cupy.empty(values.shape, cupy.uint32)

    def run() -> object:
        components = cuda_labels.dense_labels(values, params, out)
        if not stats:
            return components
        label_base = cuda_labels.label_offsets(components)
        total = int(label_base[-1:].get()[0])  # it sizes the statistics
        return cuda_labels.filtered_table(values, out, label_base, total, params.min_area)

    return timings(run, cupy.cuda.get_current_stream(), repeat)["events_ms"]


def random_masks(shape: tuple[int, ...], seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)
    return cupy.asarray((rng.random(shape) < 0.5).astype(np.uint8))


def torch_case(name: str, masks: Any, connectivity: int, stats: bool, repeat: int) -> dict:
    """A PyTorch tensor in and out on torch's current stream."""
    import torch

    tensor = torch.as_tensor(masks, device="cuda")
    labeler = ccl_cli.Labeler(connectivity=connectivity, stats=stats)
    out = torch.empty(tensor.shape, dtype=torch.int32, device="cuda")
    stream = frameworks.external_stream(0, torch.cuda.current_stream().cuda_stream)
    row = {"case": name, "input": "torch", "stats": stats}
    row |= timings(lambda: labeler(tensor), stream, repeat)
    row["out_wall_ms"] = timings(lambda: labeler(tensor, out=out), stream, repeat)["wall_ms"]
    row["kernels_ms"] = kernels_ms(masks, LabelParams(connectivity=connectivity), stats, repeat)
    _, result = labeler(tensor)
    row["components"] = len(result) if stats else int(result.sum())
    return row


def cupy_case(name: str, masks: Any, connectivity: int, stats: bool, repeat: int) -> dict:
    labeler = ccl_cli.Labeler(connectivity=connectivity, stats=stats)
    stream = cupy.cuda.get_current_stream()
    row = {"case": name, "input": "cupy", "stats": stats}
    row |= timings(lambda: labeler(masks), stream, repeat)
    row["kernels_ms"] = kernels_ms(masks, LabelParams(connectivity=connectivity), stats, repeat)
    _, result = labeler(masks)
    row["components"] = len(result) if stats else int(result.sum())
    return row


def small_calls(repeat: int) -> dict:
    """One 640x480 image, labels only: a waited call, and calls queued back to back."""
    image = random_masks((480, 640), seed=3)
    labeler = ccl_cli.Labeler(stats=False)
    stream = cupy.cuda.get_current_stream()
    row = {"case": "640x480 one image", "input": "cupy", "stats": False}
    row |= timings(lambda: labeler(image), stream, repeat * 10)
    row["kernels_ms"] = kernels_ms(image, LabelParams(), False, repeat * 10)
    calls = 1000
    for _ in range(3):
        began = time.perf_counter()
        for _ in range(calls):
            labeler(image)
        stream.synchronize()
    row["queued_us_per_call"] = (time.perf_counter() - began) / calls * 1e6
    return row


def profile_small_calls() -> None:
    """Where the host time of a 640x480 labels-only call goes (cProfile, 2000 calls)."""
    import cProfile
    import pstats

    image = random_masks((480, 640), seed=3)
    labeler = ccl_cli.Labeler(stats=False)
    labeler(image)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(2000):
        labeler(image)
    profiler.disable()
    cupy.cuda.get_current_stream().synchronize()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50, help="timed runs per case")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    parser.add_argument("--profile", action="store_true", help="profile the 640x480 calls")
    args = parser.parse_args()
    batch = random_masks((64, 1080, 1920))
    big = random_masks((3000, 4000), seed=1)
    cases: list[tuple[Callable[..., dict], tuple[Any, ...]]] = []
    try:
        import torch  # noqa: F401

        cases += [
            (torch_case, ("64 x 1920x1080, 8-conn", batch, 8, False, args.repeat)),
            (torch_case, ("64 x 1920x1080, 8-conn", batch, 8, True, args.repeat)),
            (torch_case, ("4000x3000, 4-conn", big, 4, True, args.repeat)),
        ]
    except ImportError:
        print("PyTorch not installed: its cases are left out")
    cases += [
        (cupy_case, ("64 x 1920x1080, 8-conn", batch, 8, False, args.repeat)),
        (cupy_case, ("64 x 1920x1080, 8-conn", batch, 8, True, args.repeat)),
        (cupy_case, ("4000x3000, 4-conn", big, 4, True, args.repeat)),
        (cupy_case, ("4000x3000, 8-conn", big, 8, False, args.repeat)),
        (small_calls, (args.repeat,)),
    ]
    rows = []
    for case, case_args in cases:
        rows.append(case(*case_args))
        print(rows[-1], flush=True)
    print("| case | input | statistics | wall ms | events ms | kernels ms | components |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['case']} | {row['input']} | {'yes' if row['stats'] else 'no'} "
            f"| {row['wall_ms']:.3f} | {row['events_ms']:.3f} | {row['kernels_ms']:.3f} "
            f"| {row.get('components', '')} |"
        )
    small = rows[-1]
    print(f"640x480 queued back to back: {small['queued_us_per_call']:.1f} us per call")
    if args.profile:
        profile_small_calls()
    for row in rows:
        if "out_wall_ms" in row:
            print(f"{row['case']} stats={row['stats']} with out=: {row['out_wall_ms']:.3f} ms wall")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
