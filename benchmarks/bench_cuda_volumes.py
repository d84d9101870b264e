"""Volume labeling on the GPU: the public Labeler call on CuPy volumes against
cupyx.scipy.ndimage.label, medians of CUDA-event timings in milliseconds.

    .venv/bin/python benchmarks/bench_cuda_volumes.py [--repeat 20] [--cases blobs,pores,...]
        [--large] [--json out.json]

Cases: bench_volumes.py's (the same volumes, made on the host and copied to the device
once), each binary case with 26-, 18- and 6-connectivity, the CT-like uint16 volume in tau
mode (tau 20, 26 and 6); with --large, blobs 2048x1024x1024 (26), made on the device (the
same formula in float32 on the GPU), 2**31 voxels labeled in one piece. gccl is a
Labeler called on the CuPy volume with labels and counts left on the device ("labels"),
with the device statistics table ("+stats") and with the table and min_area=2
("+stats,min2"); cupyx runs ndimage.label with generate_binary_structure(3, 1|2|3) into an
int32 array (binary cases). Each engine's component count is checked: gccl's labels-only
count against its table's and cupyx's; a disagreement is printed and fails the run (exit 1).
Under each case, the labels-only call's kernels: their sum and each one's median (CUDA
events around each launch).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
from bench_volumes import FAMILIES, Case, blobs, cases, chosen_families
from medians import gpu_median_ms, kernel_breakdown

import ccl_cli


def measure(case: Case, volume: Any, repeat: int) -> dict[str, Any]:
    """The case's timings (ms) and component counts on the device volume `volume`."""
    import cupy
    from cupyx.scipy import ndimage

    options = {"connectivity": case.connectivity, "tau": case.tau}
    labels_only = ccl_cli.Labeler(stats=False, **options)
    with_stats = ccl_cli.Labeler(stats=True, **options)
    filtered = ccl_cli.Labeler(stats=True, min_area=2, **options)
    out = cupy.empty(volume.shape, cupy.uint32)
    result: dict[str, Any] = {}
    _, counts = labels_only(volume, out=out)
    result["components"] = int(counts.sum())
    result["labels_ms"] = gpu_median_ms(lambda: labels_only(volume, out=out), repeat)
    breakdown = kernel_breakdown(lambda: labels_only(volume, out=out), max(5, repeat // 4))
    result["labels_kernels_ms"] = breakdown
    _, table = with_stats(volume, out=out)
    result["stats_components"] = int(table.offsets[-1].get())
    result["stats_ms"] = gpu_median_ms(lambda: with_stats(volume, out=out), repeat)
    _, table = filtered(volume, out=out)
    result["kept_min2"] = int(table.offsets[-1].get())
    result["stats_min2_ms"] = gpu_median_ms(lambda: filtered(volume, out=out), repeat)
    if case.tau is None:
        rank = {6: 1, 18: 2, 26: 3}[case.connectivity]
        structure = ndimage.generate_binary_structure(3, rank)
        single = volume if volume.ndim == 3 else None
        output = cupy.empty(volume.shape[-3:], cupy.int32)

        def cupyx() -> int:
            if single is not None:
                return int(ndimage.label(single, structure, output=output))
            return sum(int(ndimage.label(v, structure, output=output)) for v in volume)

        result["cupyx_components"] = cupyx()
        result["cupyx_ms"] = gpu_median_ms(cupyx, max(3, repeat // 4), warmup=1)
    cupy.get_default_memory_pool().free_all_blocks()
    return result


def main() -> None:
    import cupy

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--cases", default=",".join(FAMILIES), help="of " + ", ".join(FAMILIES))
    parser.add_argument("--large", action="store_true", help="also blobs 2048x1024x1024")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    families = chosen_families(parser, args.cases)
    todo: list[tuple[Case, Any]] = []
    for case in cases(families, large=False):
        connectivities = (case.connectivity,) if case.tau is not None else ()
        if case.tau is None and case.connectivity == 26:
            connectivities = (26, 18, 6)
        for connectivity in connectivities:
            todo.append((Case(case.name, case.family, case.volume, connectivity, case.tau), None))
    if args.large:
        todo.append((Case("blobs 2048x1024x1024", "blobs", np.empty(0), 26), "large"))
    header = f"{'case':<38} {'conn':>4} {'labels':>8} {'+stats':>8} {'+st,min2':>8} {'cupyx':>8}"
    print(header + "  components   (ms, CUDA-event medians)")
    results, disagreed = [], False
    for case, kind in todo:
        volume = blobs((2048, 1024, 1024), 5, cupy) if kind else cupy.asarray(case.volume)
        measured = measure(case, volume, args.repeat)
        del volume
        counts = {
            name: measured[name]
            for name in ("stats_components", "cupyx_components")
            if name in measured
        }
        wrong = {name: n for name, n in counts.items() if n != measured["components"]}
        disagreed |= bool(wrong)
        cupyx = f"{measured['cupyx_ms']:>8.2f}" if "cupyx_ms" in measured else f"{'-':>8}"
        print(
            f"{case.name:<38} {case.connectivity:>4} {measured['labels_ms']:>8.2f} "
            f"{measured['stats_ms']:>8.2f} {measured['stats_min2_ms']:>8.2f} {cupyx}  "
            f"{measured['components']}"
        )
        kernels = measured["labels_kernels_ms"]
        print(
            f"  labels' kernels (ms): {sum(kernels.values()):.2f} = "
            + ", ".join(f"{name.removeprefix('gccl_')} {ms:.2f}" for name, ms in kernels.items())
        )
        if wrong:
            print(
                f"  COMPONENT COUNTS DIFFER: gccl {measured['components']}, {wrong}",
                file=sys.stderr,
            )
        results.append(
            {"case": case.name, "connectivity": case.connectivity, "tau": case.tau, **measured}
        )
        cupy.get_default_memory_pool().free_all_blocks()
    if args.json:
        device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        machine = {"device": device, "platform": platform.platform()}
        document = {"repeat": args.repeat, "machine": machine, "cases": results}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    sys.exit(1 if disagreed else 0)


if __name__ == "__main__":
    main()
