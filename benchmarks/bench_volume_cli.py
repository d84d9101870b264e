"""Volume files end to end: the whole `gccl label` command against its read + write floor and
against a multi-process cc3d script doing the same job, medians in seconds.

    .venv/bin/python benchmarks/bench_volume_cli.py [--side 512] [--masks 100]
        [--mask-shape 256x256x128] [--processes 16] [--device auto] [--repeat 3]
        [--work DIR] [--json OUT]

    2-core machine:  ... --side 256 --masks 10 --processes 2

Cases (generated once into --work, reused when already there):
- stack: a SIDE^3 uint8 TIFF z-stack (ImageJ), CT-like: a smooth random field (noise at 1/8 of
  the resolution, zoomed linearly) at 30..230 with +-8 voxel noise; `--threshold T` (T: the
  field's 80th percentile) keeps bright inclusions, and the noise at their borders gives the
  small specks a real scan has. Command: `gccl label stack.tif --volume --threshold T
  --connectivity 26 --out OUT --device DEVICE` (labels as a TIFF stack, statistics CSV).
- masks: a folder of MASKS uint8 NIfTI masks (.nii.gz) of the --mask-shape (x, y, z), a few
  smooth blobs each. Command: `gccl label masks/ --out OUT --device DEVICE` (26-connectivity,
  the volumes' default; labels as .nii.gz, statistics CSVs).

Columns:
- gccl s: the command (`python -m ccl_cli label ...`) in a subprocess, start to exit, each run
  into a fresh --out.
- floor s: the same files read and an equally sized label file written, in this process
  (no interpreter start): tifffile.imread of the stack and tifffile.imwrite of gccl's labels
  (its dtype, zlib level 1 as gccl writes); nibabel load + get the data of each mask and
  nibabel save of its labels (uint16 .nii.gz), one file after another.
- floor command s: the same as a Python script, start to exit (`--script floor-...`; it loads
  the labels from .npy files first, counted: 32 MB a 256^3 uint16 volume, a few ms each from
  the page cache): the floor a user's own script has.
- cc3d-script s: `--script` mode of this file in a subprocess, start to exit: a
  multiprocessing Pool of --processes over the files, each read (tifffile / nibabel),
  thresholded (the stack), labeled by cc3d.connected_components (26), measured by
  cc3d.statistics (voxels, bounding box, centroid: fewer columns than gccl's, which add the
  intensity mean/min/max) into a CSV, and its labels written (TIFF as gccl writes it,
  uint16 .nii.gz through nibabel). Its component counts are checked against gccl's.
Goal: gccl at most 1.5x the floor, and faster than the cc3d script. The commands run with
Python's bytecode cached (command_env) after one untimed run of each.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path

import numpy as np

GOAL_RATIO = 1.5


# --- inputs ---------------------------------------------------------------------------------


def smooth_field(shape: tuple[int, ...], seed: int, coarse: int = 8) -> np.ndarray:
    """A smooth random field in [0, 1] of `shape`: uniform noise at 1/coarse resolution,
    zoomed linearly (float32)."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    small = rng.random(tuple(max(2, -(-n // coarse)) for n in shape), np.float32)
    field = ndimage.zoom(small, [n / s for n, s in zip(shape, small.shape, strict=True)], order=1)
    field = field[tuple(slice(0, n) for n in shape)]
    low, high = float(field.min()), float(field.max())
    return (field - low) / max(high - low, 1e-6)


def make_stack(path: Path, side: int) -> int:
    """Write the CT-like uint8 stack (if not there); the threshold T its command takes."""
    import tifffile

    field = smooth_field((side, side, side), 1)
    threshold = int(30 + 200 * float(np.quantile(field[::4, ::4, ::4], 0.8)))
    if not path.exists():
        noise = np.random.default_rng(2).integers(-8, 9, field.shape, dtype=np.int16)
        values = np.clip(30 + 200 * field + noise, 0, 255).astype(np.uint8)
        part = path.with_suffix(".part")
        tifffile.imwrite(part, values, imagej=True, metadata={"axes": "ZYX"})
        part.rename(path)
    return threshold


def make_masks(folder: Path, count: int, shape: tuple[int, int, int]) -> None:
    """Write `count` NIfTI masks (x, y, z) = shape, a few smooth blobs each (if not there)."""
    import nibabel as nib

    folder.mkdir(parents=True, exist_ok=True)
    affine = np.diag([0.8, 0.8, 1.5, 1.0])
    for n in range(count):
        path = folder / f"mask_{n:03d}.nii.gz"
        if path.exists():
            continue
        field = smooth_field(shape, 100 + n, coarse=32)
        mask = (field > 0.75).astype(np.uint8)
        part = folder / f".mask_{n:03d}.part.nii.gz"
        nib.save(nib.Nifti1Image(mask, affine), part)
        part.rename(path)


# --- the cc3d script (run as `--script`, in its own process) -------------------------------


def _tiff_options(dtype: np.dtype) -> dict[str, object]:
    """tifffile.imwrite options as gccl writes a label stack (io/volumes/tiff_stack.py)."""
    return {
        "photometric": "minisblack",
        "compression": "zlib",
        "compressionargs": {"level": 1},
        "maxworkers": max(1, min(8, os.cpu_count() or 1)),
        "imagej": dtype == np.uint16,
        "ome": dtype != np.uint16,
        "metadata": {"axes": "ZYX"},
    }


def _label_and_measure(mask: np.ndarray, stats_path: Path) -> tuple[np.ndarray, int]:
    """cc3d labels (uint16 when they fit) and their statistics CSV."""
    import cc3d

    labels, count = cc3d.connected_components(mask, connectivity=26, return_N=True)
    found = cc3d.statistics(labels)
    boxes = np.array(
        [[s.start for s in box] + [s.stop for s in box] for box in found["bounding_boxes"][1:]],
        np.int64,
    ).reshape(-1, 2 * labels.ndim)
    table = np.column_stack(
        [np.arange(1, count + 1), found["voxel_counts"][1:], boxes, found["centroids"][1:]]
    )
    np.savetxt(stats_path, table, delimiter=",", fmt="%.17g", header="label,voxels,box,centroid")
    dtype = np.uint16 if count <= 65535 else np.uint32
    return labels.astype(dtype, copy=False), int(count)


def _script_tiff(job: tuple[str, str, int]) -> int:
    import tifffile

    source, out, threshold = job
    values = tifffile.imread(source)
    stem = Path(out) / Path(source).stem
    labels, count = _label_and_measure(values > threshold, stem.with_suffix(".stats.csv"))
    tifffile.imwrite(f"{stem}.labels.tif", labels, **_tiff_options(labels.dtype))  # type: ignore[arg-type]
    return count


def _script_nifti(job: tuple[str, str, int]) -> int:
    import nibabel as nib

    source, out, _ = job
    image = nib.load(source)
    mask = np.asanyarray(image.dataobj) != 0
    stem = Path(out) / Path(source).name.removesuffix(".nii.gz")
    labels, count = _label_and_measure(mask, Path(f"{stem}.stats.csv"))
    nib.save(nib.Nifti1Image(labels, image.affine, image.header), f"{stem}.labels.nii.gz")
    return count


def run_script(kind: str, inputs: list[str], out: str, threshold: int, processes: int) -> None:
    """The cc3d script: every input on a Pool of `processes`; prints the components. The floor
    as a command (kind floor-tiff, floor-nifti): `out` holds the labels of input n as n.npy,
    written to a file there after the inputs are read."""
    if kind.startswith("floor-"):
        labels = [np.load(Path(out) / f"{n}.npy") for n in range(len(inputs))]
        target = Path(out) / ("floor.tif" if kind == "floor-tiff" else "floor.nii.gz")
        floor_io(kind.removeprefix("floor-"), inputs, labels, target)
        return
    os.makedirs(out, exist_ok=True)
    work = _script_tiff if kind == "tiff" else _script_nifti
    with Pool(processes) as pool:
        counts = pool.map(work, [(path, out, threshold) for path in inputs], chunksize=1)
    print(sum(counts))


# --- measurements ----------------------------------------------------------------------------


def command_env(work: Path) -> dict[str, str]:
    """The environment of the timed commands: Python's bytecode cached (in work/pycache) as an
    installed package has it, even where PYTHONDONTWRITEBYTECODE is set (a checkout run so
    compiles every module of gccl at each start: 0.2 s on the 2-core dev machine)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    return env


def timed_command(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Seconds from start to exit of `command`, and what it printed; raises on failure."""
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout


def gccl_components(out: Path) -> int:
    """The components of a gccl run, from its summary.csv."""
    import csv

    with open(out / "summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    if any(row["status"] != "ok" for row in rows):
        raise RuntimeError(f"gccl failed on an input: {rows}")
    return sum(int(row["components"]) for row in rows)


def measure_case(
    name: str,
    gccl_args: list[str],
    floor: Callable[[Path], tuple[float, float]],
    script: list[str],
    work: Path,
    repeat: int,
) -> dict[str, object]:
    """gccl, its floor and the cc3d script on one case, `repeat` runs each, alternating, after
    one untimed run of each (bytecode cached, files in the page cache)."""
    result: dict[str, object] = {"case": name}
    gccl_times, floor_times, floor_commands, script_times = [], [], [], []
    components: dict[str, int] = {}
    env = command_env(work)
    gccl = [sys.executable, "-m", "ccl_cli", "label", *gccl_args, "--quiet", "--out"]
    for n in range(-1, repeat):
        out = work / f"gccl-{n + 1}"
        seconds, _ = timed_command([*gccl, str(out)], env)
        components["gccl"] = gccl_components(out)
        floor_seconds, floor_command = floor(out)
        shutil.rmtree(out)
        out = work / f"cc3d-{n + 1}"
        script_seconds, printed = timed_command([*script, "--out", str(out)], env)
        components["cc3d"] = int(printed.split()[-1])
        shutil.rmtree(out)
        if n >= 0:
            gccl_times.append(seconds)
            floor_times.append(floor_seconds)
            floor_commands.append(floor_command)
            script_times.append(script_seconds)
    if components["gccl"] != components["cc3d"]:
        raise RuntimeError(f"{name}: gccl finds {components['gccl']}, cc3d {components['cc3d']}")
    result.update(
        gccl_s=statistics.median(gccl_times),
        floor_s=statistics.median(floor_times),
        floor_command_s=statistics.median(floor_commands),
        cc3d_script_s=statistics.median(script_times),
        gccl_runs=gccl_times,
        floor_runs=floor_times,
        floor_command_runs=floor_commands,
        cc3d_script_runs=script_times,
        components=components["gccl"],
    )
    result["ratio"] = result["gccl_s"] / result["floor_s"]  # type: ignore[operator]
    result["command_ratio"] = result["gccl_s"] / result["floor_command_s"]  # type: ignore[operator]
    return result


def floor_io(kind: str, inputs: list[str], labels: list[np.ndarray], target: Path) -> None:
    """The floor's work: read every input and write its labels as an equally sized label
    file (the stack: tifffile, as gccl writes it; masks: nibabel, uint16 .nii.gz)."""
    if kind == "tiff":
        import tifffile

        for source, volume in zip(inputs, labels, strict=True):
            tifffile.imread(source)
            tifffile.imwrite(target, volume, **_tiff_options(volume.dtype))  # type: ignore[arg-type]
        return
    import nibabel as nib

    for source, volume in zip(inputs, labels, strict=True):
        image = nib.load(source)
        np.asanyarray(image.dataobj)
        nib.save(nib.Nifti1Image(volume, image.affine, image.header), target)


def floor_of(
    kind: str, inputs: list[Path], work: Path, me: list[str], env: dict[str, str]
) -> Callable[[Path], tuple[float, float]]:
    """The floor of a gccl run into `out`: its labels read back (untimed) and written by
    floor_io after reading the inputs, in this process and as a command (`--script floor`,
    start to exit, the labels given as .npy files it loads)."""

    def floor(out: Path) -> tuple[float, float]:
        import nibabel as nib
        import tifffile

        labels = []
        for source in inputs:
            if kind == "tiff":
                labels.append(tifffile.imread(out / f"{source.stem}.labels.tif"))
            else:
                name = source.name.removesuffix(".nii.gz")
                labels.append(np.asanyarray(nib.load(out / f"{name}.labels.nii.gz").dataobj))
        names = [str(path) for path in inputs]
        target = work / ("floor.tif" if kind == "tiff" else "floor.nii.gz")
        began = time.perf_counter()
        floor_io(kind, names, labels, target)
        in_process = time.perf_counter() - began
        stored = work / "floor-labels"
        stored.mkdir(exist_ok=True)
        for n, volume in enumerate(labels):
            np.save(stored / f"{n}.npy", volume)
        command = [*me, "--script", f"floor-{kind}", "--out", str(stored), *names]
        as_command, _ = timed_command(command, env)
        target.unlink()
        shutil.rmtree(stored)
        return in_process, as_command

    return floor


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", type=int, default=512, help="the stack is SIDE^3 (512)")
    parser.add_argument("--masks", type=int, default=100, help="NIfTI masks (100)")
    parser.add_argument("--mask-shape", default="256x256x128", help="x, y, z of a mask")
    parser.add_argument("--processes", type=int, default=16, help="the cc3d script's Pool (16)")
    parser.add_argument("--device", default="auto", help="gccl label --device (auto)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per column (3)")
    parser.add_argument(
        "--gccl-options", default="", help="more gccl label options, e.g. --no-fsync (none)"
    )
    parser.add_argument("--cases", default="stack,masks", help="stack, masks or both")
    parser.add_argument("--work", type=Path, help="where inputs and outputs go (a temp folder)")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument(
        "--script", choices=("tiff", "nifti", "floor-tiff", "floor-nifti"), help=argparse.SUPPRESS
    )
    parser.add_argument("--threshold", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("inputs", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.script:
        run_script(args.script, args.inputs, args.out, args.threshold, args.processes)
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="gccl-volume-cli-"))
    work.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, str(Path(__file__).resolve())]
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    results = []
    if "stack" in cases:
        stack = work / f"stack_{args.side}.tif"
        threshold = make_stack(stack, args.side)
        results.append(
            measure_case(
                f"stack {args.side}^3 uint8 TIFF, threshold {threshold}, 26c",
                [
                    str(stack),
                    "--volume",
                    "--threshold",
                    str(threshold),
                    "--connectivity",
                    "26",
                    "--device",
                    args.device,
                    *args.gccl_options.split(),
                ],
                floor_of("tiff", [stack], work, me, command_env(work)),
                [
                    *me,
                    "--script",
                    "tiff",
                    "--threshold",
                    str(threshold),
                    "--processes",
                    str(args.processes),
                    str(stack),
                ],
                work,
                args.repeat,
            )
        )
    if "masks" in cases:
        shape = tuple(int(n) for n in args.mask_shape.lower().split("x"))
        assert len(shape) == 3, "--mask-shape is XxYxZ"
        folder = work / f"masks_{args.masks}_{args.mask_shape}"
        make_masks(folder, args.masks, shape)  # type: ignore[arg-type]
        masks = sorted(folder.glob("mask_*.nii.gz"))[: args.masks]
        results.append(
            measure_case(
                f"{args.masks} NIfTI masks {args.mask_shape} (.nii.gz), 26c",
                [str(folder), "--device", args.device, *args.gccl_options.split()],
                floor_of("nifti", masks, work, me, command_env(work)),
                [*me, "--script", "nifti", "--processes", str(args.processes), *map(str, masks)],
                work,
                args.repeat,
            )
        )
    load = os.getloadavg()[0]
    print(
        f"machine: {machine()}, load average {load:.1f}; gccl --device {args.device} "
        f"{args.gccl_options}; cc3d "
        f"script on {args.processes} processes; medians of {args.repeat} runs\n"
    )
    print(
        "| case | gccl s | floor s | ratio | floor command s | ratio | cc3d-script s | components |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| {r['case']} | {r['gccl_s']:.2f} | {r['floor_s']:.2f} | {r['ratio']:.2f}x "
            f"| {r['floor_command_s']:.2f} | {r['command_ratio']:.2f}x "
            f"| {r['cc3d_script_s']:.2f} | {r['components']} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"machine": machine(), "results": results}, indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
