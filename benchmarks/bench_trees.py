"""Whole `gccl label` runs from two or more source trees, alternating: what a piece of
machinery gains, measured by running the tree with it against a copy without it.

    .venv/bin/python benchmarks/bench_trees.py with=/tmp/a without=/tmp/b \\
        [--depth-source ../shared/data/depth] [--jobs depth,small,one] [--repeat 9]

Each tree is a checkout whose CPU engine is built in place (setup.py build_ext --inplace,
or the module copied in); it runs as `python -m ccl_cli label` with PYTHONPATH at the
tree, with this Python. Jobs: depth (--depth-count copies of the depth PNGs, --tau 20
--min-area 50), small (--small-count generated 32x32 8-bit PNGs, the defaults), one (one
depth PNG, --tau 20 --min-area 50). Every run writes into a new folder; the trees take
turns, their order swapped on every repeat, after one warm-up run each (bytecode, page
cache). Reported per job and tree: the wall time and the CPU time of the whole process
tree (this process adopts orphaned workers and waits for them, so a fork server's workers
count too), medians of --repeat runs and their range. CPU time says what the machinery
saves even where other load makes wall times spread.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: prctl's PR_SET_CHILD_SUBREAPER (Linux): orphaned descendants become this process's.
PR_SET_CHILD_SUBREAPER = 36
OPTIONS = {
    "depth": ["--tau", "20", "--min-area", "50"],
    "small": [],
    "one": ["--tau", "20", "--min-area", "50"],
}


def inputs(job: str, args: argparse.Namespace) -> Path:
    """The job's input folder or file under --work (made once)."""
    folder = args.work / "in" / job
    if job == "small":
        if not folder.exists():
            sys.path.insert(0, str(Path(__file__).parent))
            from bench_end_to_end import generate_small

            generate_small(args.small_count, 32, folder)
        return folder
    frames = sorted(args.depth_source.glob("*.png"))
    if not frames:
        raise SystemExit(f"no depth PNGs in {args.depth_source}")
    folder.mkdir(parents=True, exist_ok=True)
    count = 1 if job == "one" else args.depth_count
    for i in range(count):
        path = folder / f"{i:05}-{frames[i % len(frames)].name}"
        if not path.exists():
            shutil.copyfile(frames[i % len(frames)], path)
    return folder / f"00000-{frames[0].name}" if job == "one" else folder


def reap() -> None:
    """Wait for every descendant left (a fork server and its workers)."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def run(tree: str, source: Path, out: Path, options: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of one gccl label run."""
    env = {**os.environ, "PYTHONPATH": tree}
    command = [sys.executable, "-m", "ccl_cli", "label", str(source), "--out", str(out), "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([*command, *options], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    reap()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{tree}: {result.stderr.strip()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="NAME=PATH, two or more")
    parser.add_argument("--depth-source", type=Path, default=Path("../shared/data/depth"))
    parser.add_argument("--depth-count", type=int, default=320)
    parser.add_argument("--small-count", type=int, default=5000)
    parser.add_argument("--jobs", default="depth,small,one")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--work", type=Path, default=Path("/tmp/gccl-trees"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trees = dict(tree.split("=", 1) for tree in args.trees)
    ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    outs = args.work / "out"
    shutil.rmtree(outs, ignore_errors=True)
    runs = 0
    results = []
    for job in args.jobs.split(","):
        source = inputs(job, args)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        for tree in trees.values():
            runs += 1
            run(tree, source, outs / str(runs), OPTIONS[job])
        for repeat in range(args.repeat):
            for name in list(trees)[:: 1 if repeat % 2 == 0 else -1]:
                runs += 1
                times[name].append(run(trees[name], source, outs / str(runs), OPTIONS[job]))
        for name, pairs in times.items():
            wall, cpu = [w for w, _ in pairs], [c for _, c in pairs]
            print(
                f"{job:6} {name:12} wall {statistics.median(wall):7.3f} s "
                f"({min(wall):.3f}-{max(wall):.3f})  cpu {statistics.median(cpu):7.3f} s "
                f"({min(cpu):.3f}-{max(cpu):.3f})",
                flush=True,
            )
            results.append({"job": job, "tree": name, "wall": wall, "cpu": cpu})
    shutil.rmtree(outs, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
