"""--polygons speed on document scans, against cv2.findContours on the CPU, and what it adds
to a whole `gccl label` run.

    python3 benchmarks/bench_polygons.py [SCAN ...] [--repeat N] [--gpu-only] [--json OUT.json]
    python3 benchmarks/bench_polygons.py --runs N [--device cpu|cuda] [--package DIR] [SCAN ...]

Scans are read with ccl_cli.io.images.read_image and labeled with --invert
semantics (ink is foreground), 8-connectivity; default: the scans of
../shared/data/docs. Medians per scan, in ms:
  gpu outlines: labels already on the device -> canonical Outlines arrays on
    the host (backends/cuda/outlines.py's device_outlines, wall time, synchronized);
  gpu corners: of that, the parts, corner and ring-ranking kernels (with the
    wait for the corner count; CUDA events);
  gpu parts: of those, the 4-connected parts (dense_labels of the labels, tau 0);
  geojson: encoding the Outlines as GeoJSON text (CPU, one thread; this and the next two
    columns are the calling thread's CPU time, not wall time);
  cpu outlines: the compiled tracer (ccl_cli.backends.cpu.outlines.outlines);
  cv2 contours: cv2.findContours(mask, RETR_CCOMP, CHAIN_APPROX_SIMPLE) on
    the binary mask (its outlines follow pixel centres, not corners, and do not
    split components by label: the reference point, not the same output).
Without CuPy or a GPU the GPU columns are left out; --gpu-only leaves out the
CPU ones (cv2.findContours alone takes seconds on some scans). The GPU outlines
are checked against the CPU outlines either way.

With --runs N: `gccl label SCANS --invert --out TMP -q --device DEVICE` as a user runs it,
N times without and N times with --polygons (alternating), each in a process of its own:
medians of the wall time and of the CPU time (user + system, all threads), and the peak
resident memory. --package DIR runs the ccl_cli of another checkout (an older commit, for
a before-and-after on the same machine).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from medians import cpu_median_ms, gpu_median_ms

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.cpu.outlines import outlines
from ccl_cli.contract.params import LabelParams
from ccl_cli.io.decode import read_image
from ccl_cli.io.geojson import geojson

SHARED_DOCS = Path(__file__).resolve().parents[2] / "shared" / "data" / "docs"
PARAMS = LabelParams(invert=True, connectivity=8, polygons=True)


def gpu_columns(labels: np.ndarray, count: int, want: Any, repeat: int) -> dict[str, float]:
    """GPU timings of one labeled scan; checks the GPU outlines equal the CPU ones."""
    try:
        import cupy

        from ccl_cli.backends.cuda.labels import dense_labels
        from ccl_cli.backends.cuda.outlines import PART_PARAMS, device_corners, device_outlines
    except ImportError:
        return {}
    device = cupy.asarray(labels[np.newaxis])
    parts = cupy.empty_like(device)

    def end_to_end() -> Any:
        result = device_outlines(device, [count])
        cupy.cuda.get_current_stream().synchronize()
        return result

    got = end_to_end()[0]
    if not got.equals(want):
        raise SystemExit("GPU outlines differ from the CPU outlines")
    return {
        "gpu outlines": cpu_median_ms(end_to_end, repeat, warmup=3),
        "gpu corners": gpu_median_ms(
            lambda: device_corners(device, np.array([0, count])), repeat, warmup=1
        ),
        "gpu parts": gpu_median_ms(
            lambda: dense_labels(device, PART_PARAMS, parts), repeat, warmup=1
        ),
    }


def thread_median_ms(run: Callable[[], object], repeat: int) -> float:
    """Median CPU time of this thread over `repeat` calls of run() after one, in ms: the CPU
    columns run on the calling thread, and its CPU time is what a loaded machine disturbs
    least."""
    run()
    times = []
    for _ in range(repeat):
        began = time.thread_time()
        run()
        times.append((time.thread_time() - began) * 1e3)
    return statistics.median(times)


def bench(path: Path, repeat: int, gpu_only: bool = False) -> dict[str, Any]:
    """Every column for one scan (only the GPU ones with gpu_only)."""
    import cv2

    values = read_image(path)
    result = CpuBackend().label(values[np.newaxis], PARAMS)
    labels, count = result.labels[0], len(result.tables[0])
    assert result.polygons is not None
    want = result.polygons[0]
    mask = (labels > 0).astype(np.uint8)
    row: dict[str, Any] = {
        "scan": path.name,
        "size": f"{labels.shape[1]}x{labels.shape[0]}",
        "components": count,
        "vertices": len(want.vertices),
    }
    row.update(gpu_columns(labels, count, want, repeat))
    if gpu_only:
        return row
    row["geojson"] = thread_median_ms(lambda: geojson(want), repeat)
    row["cpu outlines"] = thread_median_ms(lambda: outlines(labels, count), repeat)
    row["cv2 contours"] = thread_median_ms(
        lambda: cv2.findContours(mask, cv2.RETR_CCOMP, cv2.CHAIN_APPROX_SIMPLE), repeat
    )
    return row


def whole_run(scans: list[Path], options: list[str], package: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, peak resident bytes) of one `gccl label` of the scans."""
    out = Path(tempfile.mkdtemp(prefix="bench-polygons-"))
    # The package first, then what the caller's path holds (wheels installed with --target).
    path = os.pathsep.join(filter(None, [str(package), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "ccl_cli", "label", *map(str, scans), "--invert"]
    command += ["--out", str(out / "o"), "-q", *options]
    measure = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:]).returncode\n"
        "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(code, use.ru_utime + use.ru_stime, use.ru_maxrss)\n"
    )
    try:
        began = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-c", measure, *command], capture_output=True, text=True, env=env
        )
        wall = time.perf_counter() - began
    finally:
        shutil.rmtree(out)
    code, cpu, kilobytes = result.stdout.split()
    if code != "0":
        raise SystemExit(f"gccl label exited {code}: {result.stderr}")
    return wall, float(cpu), int(kilobytes) * 1024


def end_to_end(scans: list[Path], runs: int, device: str, package: Path) -> None:
    """The --runs table: a run without and with --polygons, medians of `runs` each."""
    print(f"| {len(scans)} scans, --device {device} | wall s | CPU s | peak MB |")
    print("| --- | --- | --- | --- |")
    rows: dict[str, list[tuple[float, float, int]]] = {"labels": [], "--polygons": []}
    for _ in range(runs):
        for name in rows:
            extra = ["--polygons"] if name == "--polygons" else []
            rows[name].append(whole_run(scans, ["--device", device, *extra], package))
    medians = {}
    for name, times in rows.items():
        wall, cpu, peak = (statistics.median(column) for column in zip(*times, strict=True))
        medians[name] = (wall, cpu)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {peak / 1e6:.0f} |")
    (wall0, cpu0), (wall1, cpu1) = medians.values()
    print(f"| --polygons adds | {wall1 / wall0 - 1:+.0%} | {cpu1 / cpu0 - 1:+.0%} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scans", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--gpu-only", action="store_true", help="leave out the CPU columns")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--runs", type=int, help="whole gccl label runs (see above)")
    parser.add_argument("--device", default="cpu", help="with --runs: cpu or cuda")
    parser.add_argument(
        "--package",
        type=Path,
        default=Path(__file__).resolve().parents[1],
        help="with --runs: the checkout whose ccl_cli runs",
    )
    args = parser.parse_args()
    scans = args.scans or sorted(SHARED_DOCS.glob("*"))
    if args.runs:
        end_to_end(scans, args.runs, args.device, args.package)
        return
    rows = []
    for index, path in enumerate(scans):
        row = bench(path, args.repeat, args.gpu_only)
        rows.append(row)
        if index == 0:
            print("| " + " | ".join(row) + " |")
            print("|" + " --- |" * len(row))
        cells = [
            f"{value:.3f}" if isinstance(value, float) else str(value) for value in row.values()
        ]
        print("| " + " | ".join(cells) + " |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
