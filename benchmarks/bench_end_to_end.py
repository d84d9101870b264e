#!/usr/bin/env python3
"""End-to-end throughput: `gccl label` against a 16-process OpenCV/cc3d pipeline.

Both sides read the same files and write the same outputs (16-bit label PNG,
statistics CSV with gccl's columns, summary.csv), and both are timed as whole
commands (a fresh Python each, start-up included), median of --repeat runs:

- depth: --depth-count 640x480 16-bit depth PNGs (copies of the ones in
  --depth-source), tau 20, min-area 50. The peer labels with cc3d's delta
  (26-connectivity on a (1, H, W) view: 8-connectivity in the plane).
- docs: --docs-count 1-bit G4 TIFF scans (copies of --docs-source), --invert.
  The peer labels with cv2.connectedComponentsWithStats.
- small: --small-count generated 8-bit PNGs of --small-size (random blobs of
  255 on 0), the defaults. The peer labels with cv2.connectedComponentsWithStats;
  with --peer-processes 1 it is a plain loop in one process (no pool).

Every run writes into a new folder (all deleted at the end: see main), and
the peer's runs alternate with gccl's (one of each configuration in turn), so
that both meet the same file system and the same load. gccl runs with
--json, and the times its first and last record lines came are reported too:
before the first is start-up, after the last the exit.
The peer is a multiprocessing Pool of --peer-processes workers with one
OpenCV thread each. Labeling's share of gccl's wall time is measured apart:
the same images, decoded beforehand and stacked in page-locked memory as
gccl's pipeline stacks them, labeled by the CUDA backend in batches of 16
(gccl's task size) with labels narrowed to 16 bits as for gccl's label PNGs,
divided by gccl's wall time. That is the second pass over the batches; the
first, which also pays each batch shape's one-time set-up, is reported too.

    python3 benchmarks/bench_end_to_end.py --depth-source DIR --docs-source DIR \\
        --work /tmp/e2e --json out.json
    python3 benchmarks/bench_end_to_end.py --jobs small --peer-processes 1 --device cpu \\
        --gccl-options "" --gccl-options "--no-fsync"
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from ccl_cli.contract.stats import CSV_COLUMNS
from ccl_cli.run.summary import SUMMARY_COLUMNS

ROOT = Path(__file__).resolve().parent.parent
JOBS = {
    "depth": (["--tau", "20", "--min-area", "50"], "depth.png"),
    "docs": (["--invert"], "tif"),
    "small": ([], "png"),
}


def replicate(source: Path, pattern: str, count: int, folder: Path) -> list[Path]:
    """`count` copies of the files of `source` matching *pattern, round robin, in `folder`."""
    originals = sorted(source.glob(f"*.{pattern}"))
    if not originals:
        raise SystemExit(f"no *.{pattern} in {source}")
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        original = originals[i % len(originals)]
        path = folder / f"{i:05}-{original.name}"
        if not path.exists():
            shutil.copyfile(original, path)
        paths.append(path)
    return paths


def generate_small(count: int, size: int, folder: Path) -> list[Path]:
    """`count` 8-bit PNGs of size x size: random blobs of 255 on 0 (made once)."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = folder / f"{i:05}.png"
        if not path.exists():
            cv2.imwrite(str(path), ((rng.random((size, size)) < 0.4) * 255).astype(np.uint8))
        paths.append(path)
    return paths


# --- the peer: one process per core, OpenCV and cc3d -----------------------------------


def _peer_init() -> None:
    import cv2

    cv2.setNumThreads(1)


def _peer_one(job: tuple[str, str, str]) -> list[object]:
    """Label one file as gccl would and write the same three kinds of output.

    Statistics come from the labelers' own C code where they have them
    (cv2's stats and centroids, cc3d.statistics), the rest from numpy/scipy.
    """
    import cc3d
    import cv2
    from scipy import ndimage

    kind, path, out = job
    started = time.perf_counter()
    if kind == "depth":
        values = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        raw = cc3d.connected_components(
            values[np.newaxis], connectivity=26, delta=20, out_dtype=np.uint32
        )[0]
        count = int(raw.max())
        area = np.bincount(raw.ravel(), minlength=count + 1)
        keep = area >= 50
        keep[0] = False
        lookup = np.zeros(count + 1, np.uint32)
        lookup[keep] = np.arange(1, int(keep.sum()) + 1)
        labels = lookup[raw]
        kept = int(keep.sum())
        stats = cc3d.statistics(labels)
        area = stats["voxel_counts"][1:]
        boxes = [
            (b[1].start, b[0].start, b[1].stop, b[0].stop) for b in stats["bounding_boxes"][1:]
        ]
        cy, cx = stats["centroids"][1:, 0], stats["centroids"][1:, 1]
        index = np.arange(1, kept + 1)
        sums = np.bincount(labels.ravel(), values.ravel().astype(np.float64), kept + 1)[1:]
        mean = sums / np.maximum(area, 1)
        low = ndimage.minimum(values, labels, index)
        high = ndimage.maximum(values, labels, index)
    elif kind == "small":
        values = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        mask = (values != 0).astype(np.uint8)
        count, labels, cv_stats, centroids = cv2.connectedComponentsWithStats(mask, 8, cv2.CV_32S)
        count = kept = count - 1
        x, y, w, h, area = (cv_stats[1:, i] for i in range(5))
        boxes = list(zip(x, y, x + w, y + h, strict=True))
        cx, cy = centroids[1:, 0], centroids[1:, 1]
        mean = np.full(kept, 255.0)  # every foreground pixel is 255
        low = high = np.full(kept, 255)
    else:
        values = cv2.imread(path, cv2.IMREAD_GRAYSCALE)
        if values is None:  # an OpenCV built without CCITT: tifffile decodes it
            import tifffile

            values = tifffile.imread(path)
        mask = (values == 0).astype(np.uint8)  # ink (MinIsWhite reads as 0) is foreground
        count, labels, cv_stats, centroids = cv2.connectedComponentsWithStats(mask, 8, cv2.CV_32S)
        count = kept = count - 1
        x, y, w, h, area = (cv_stats[1:, i] for i in range(5))
        boxes = list(zip(x, y, x + w, y + h, strict=True))
        cx, cy = centroids[1:, 0], centroids[1:, 1]
        mean = low = high = np.zeros(kept)  # every ink pixel is 0
    stem = Path(path).name.rsplit(".", 1)[0]
    cv2.imwrite(f"{out}/{stem}.labels.png", labels.astype(np.uint16))
    rows = [",".join(CSV_COLUMNS)]
    for i in range(kept):
        x0, y0, x1, y1 = boxes[i]
        rows.append(
            f"{i + 1},{area[i]},{x0},{y0},{x1 - x0},{y1 - y0},{float(cx[i])!r},{float(cy[i])!r},"
            f"{float(mean[i])!r},{low[i]:g},{high[i]:g}"
        )
    Path(f"{out}/{stem}.stats.csv").write_text("\n".join(rows) + "\n")
    height, width = labels.shape
    seconds = time.perf_counter() - started
    return [path, "", width, height, str(values.dtype), count, kept, "ok", "", seconds]


def peer_main(kind: str, folder: str, out: str, processes: int) -> None:
    """The peer command: every file of `folder` through a Pool, then summary.csv."""
    import multiprocessing

    paths = sorted(str(p) for p in Path(folder).iterdir())
    Path(out).mkdir(parents=True, exist_ok=True)
    jobs = [(kind, p, out) for p in paths]
    if processes == 1:  # the plain loop a user writes first
        rows = [_peer_one(job) for job in jobs]
    else:
        with multiprocessing.get_context("fork").Pool(processes, _peer_init) as pool:
            rows = pool.map(_peer_one, jobs, chunksize=4)
    with open(f"{out}/summary.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SUMMARY_COLUMNS)
        writer.writerows(rows)


# --- timing ------------------------------------------------------------------------------


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one command (which must succeed)."""
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-2000:]}"
        )
    return seconds


def timed_records(command: list[str], env: dict[str, str]) -> tuple[float, float, float]:
    """(wall, first, last) seconds of a gccl command run with --json: when it exited, and
    when its first and last record line came (start-up and exit are the rest)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(
            [*command, "--json"], env=env, stdout=subprocess.PIPE, stderr=errors, text=True
        )
        assert process.stdout is not None
        stamps = [time.perf_counter() - started for line in process.stdout if line.startswith("{")]
        code = process.wait()
        seconds = time.perf_counter() - started
        if code != 0 or not stamps:
            errors.seek(0)
            raise SystemExit(f"{' '.join(command)} failed ({code}):\n{errors.read()[-2000:]}")
    return seconds, stamps[0], stamps[-1]


def kept_counts(out: Path) -> dict[str, int]:
    """kept per input stem, from a summary.csv."""
    with open(out / "summary.csv", newline="") as handle:
        return {Path(row["path"]).name: int(row["kept"]) for row in csv.DictReader(handle)}


def labeling_seconds(kind: str, paths: list[Path]) -> tuple[float, float]:
    """Seconds the CUDA backend takes to label `paths` (decoded beforehand) in tasks of 16:
    the first pass over every batch, then a second pass.

    The first pass also pays what a run pays once per batch shape (page-locked
    and device memory of a new size, first launches); the second is the
    steady state that labeling costs per image.
    """
    from ccl_cli.backends.cuda.backend import CudaBackend
    from ccl_cli.config import resolve
    from ccl_cli.io.decode import read_image

    flags = {"depth": {"tau": 20, "min_area": 50}, "docs": {"invert": True}}.get(kind, {})
    params = resolve([], flags).params
    decoded = [read_image(path) for path in paths]
    backend = CudaBackend()
    groups: dict[tuple, list[np.ndarray]] = {}
    for values in decoded:
        groups.setdefault((values.shape, values.dtype.str), []).append(values)
    batches = [
        np.stack(chunk, out=backend.empty_batch((len(chunk), *chunk[0].shape), chunk[0].dtype))
        for g in groups.values()
        for chunk in (g[i : i + 16] for i in range(0, len(g), 16))
    ]
    backend.label(batches[0][:1], params, narrow=True)  # CuPy's one-time imports

    def one_pass() -> float:
        started = time.perf_counter()
        for batch in batches:
            backend.label(batch, params, narrow=True)  # 16-bit labels, as for gccl's PNGs
        return time.perf_counter() - started

    return one_pass(), one_pass()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--depth-source", type=Path, help="depth PNGs (the depth job)")
    parser.add_argument("--docs-source", type=Path, help="G4 TIFF scans (the docs job)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/gccl-e2e"))
    parser.add_argument("--depth-count", type=int, default=1000)
    parser.add_argument("--docs-count", type=int, default=200)
    parser.add_argument("--small-count", type=int, default=5000)
    parser.add_argument("--small-size", type=int, default=32)
    parser.add_argument("--peer-processes", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", default="depth,docs", help="which jobs, comma-separated")
    parser.add_argument(
        "--gccl-options",
        action="append",
        default=None,
        help="extra gccl options of one configuration, quoted (repeatable)",
    )
    parser.add_argument(
        "--device",
        default="auto",
        help="gccl's --device, the command's own default (cpu: no labeling share)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    configurations = args.gccl_options or [""]
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    sources = {"depth": args.depth_source, "docs": args.docs_source}
    counts = {"depth": args.depth_count, "docs": args.docs_count}
    results = []
    # Every run writes into a new folder, and the outputs are deleted only at the end: an
    # ext4 file system without a journal makes creating files slow for a minute or more
    # after many were deleted (it passes over the inodes just freed), which a user's job
    # does not pay; deleting between runs would time that recovery, not gccl.
    outputs = (args.work / "peer", args.work / "gccl")
    for folder in outputs:
        shutil.rmtree(folder, ignore_errors=True)
    for kind in args.jobs.split(","):
        options, pattern = JOBS[kind]
        folder = args.work / "in" / kind
        if kind == "small":
            paths = generate_small(args.small_count, args.small_size, folder)
        elif sources[kind] is None:
            raise SystemExit(f"the {kind} job needs --{kind}-source")
        else:
            paths = replicate(sources[kind], pattern, counts[kind], folder)
        peer_out = args.work / "peer" / kind
        peer = [
            sys.executable,
            __file__,
            "--peer",
            kind,
            str(folder),
            str(peer_out),
            str(args.peer_processes),
        ]
        outs = [args.work / "gccl" / kind / str(index) for index in range(len(configurations))]
        commands = [
            [
                sys.executable,
                "-m",
                "ccl_cli",
                "label",
                str(folder),
                "--out",
                str(out),
                "-q",
                "--device",
                args.device,
                *options,
                *extra.split(),
            ]
            for out, extra in zip(outs, configurations, strict=True)
        ]
        peer_runs: list[float] = []
        runs: list[list[tuple[float, float, float]]] = [[] for _ in configurations]
        for repeat in range(args.repeat):  # alternated, each into a new folder (main)
            peer_out = args.work / "peer" / kind / str(repeat)
            peer[-2] = str(peer_out)
            peer_runs.append(timed(peer, env))
            outs = [args.work / "gccl" / kind / f"{i}-{repeat}" for i in range(len(configurations))]
            for out, command, times in zip(outs, commands, runs, strict=True):
                command[command.index("--out") + 1] = str(out)
                times.append(timed_records(command, env))
        peer_seconds = statistics.median(peer_runs)
        row = {
            "job": kind,
            "images": len(paths),
            "peer_seconds": peer_seconds,
            "peer_runs_seconds": peer_runs,
            "peer_images_per_s": len(paths) / peer_seconds,
            "gccl": [],
        }
        peer_kept = kept_counts(peer_out)
        for out, extra, times in zip(outs, configurations, runs, strict=True):
            wall, first, last = (statistics.median(run[i] for run in times) for i in range(3))
            mismatched = [
                name for name, kept in kept_counts(out).items() if peer_kept[name] != kept
            ]
            row["gccl"].append(
                {
                    "options": extra,
                    "seconds": wall,
                    "runs_seconds": [run[0] for run in times],
                    "first_record_seconds": first,
                    "last_record_seconds": last,
                    "images_per_s": len(paths) / wall,
                    "speedup": peer_seconds / wall,
                    "kept_mismatches": len(mismatched),
                }
            )
        best = min(row["gccl"], key=lambda g: g["seconds"])
        if args.device != "cpu":
            row["labeling_first_pass_seconds"], row["labeling_seconds"] = labeling_seconds(
                kind, paths
            )
            row["labeling_share"] = row["labeling_seconds"] / best["seconds"]
        results.append(row)
        print(
            f"{kind}: {len(paths)} images; peer ({args.peer_processes} processes) "
            f"{peer_seconds:.2f} s = {row['peer_images_per_s']:.0f} images/s "
            f"(runs {min(peer_runs):.2f}-{max(peer_runs):.2f} s)"
        )
        for g in row["gccl"]:
            print(
                f"  gccl {g['options'] or '(defaults)':40s} {g['seconds']:.2f} s "
                f"(runs {min(g['runs_seconds']):.2f}-{max(g['runs_seconds']):.2f} s) = "
                f"{g['images_per_s']:.0f} images/s = {g['speedup']:.2f}x peer; first/last "
                f"image done at {g['first_record_seconds']:.2f}/{g['last_record_seconds']:.2f} s; "
                f"kept differs on {g['kept_mismatches']} file(s)"
            )
        if "labeling_share" in row:
            print(
                f"  labeling (CUDA backend, batches of 16): {row['labeling_seconds']:.3f} s = "
                f"{100 * row['labeling_share']:.1f}% of the fastest gccl wall time "
                f"(first pass, with each shape's one-time set-up: "
                f"{row['labeling_first_pass_seconds']:.3f} s)"
            )
    for folder in outputs:
        shutil.rmtree(folder, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--peer":
        peer_main(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
