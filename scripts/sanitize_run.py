#!/usr/bin/env python3
"""A small batch through every gccl kernel and the Python API on device arrays, for
compute-sanitizer (memcheck, racecheck).

    compute-sanitizer --tool memcheck python3 scripts/sanitize_run.py [--stages | --volumes]
        [--one-piece]

CuPy's memory pool is switched off so that every buffer is its own allocation
and memcheck sees any access past its end. Each case is also compared with the
CPU backend; the script exits non-zero on a mismatch.
"""

from __future__ import annotations

import argparse
import sys

import cupy
import numpy as np

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.backends.cuda.backend import CudaBackend
from ccl_cli.contract.params import LabelParams

#: Odd sizes: several tiles and chunks per image, the kernels' scalar paths.
ODD = (3, 97, 133)
#: Rows of 16-byte multiples: the stage kernels' vector paths (morphology.cu's
#: 16-byte access, smooth.cu's vector loads), three warps wide.
ALIGNED = (2, 37, 1040)

#: (dtype, params, shape): block8 + border 8, pixel 4 + border 4, tau 8 / 4, float
#: statistics (second pass), area filtering (keep, scan and remap; --largest's keep
#: from the host, --fill-holes's labels filled on the host, float NaN holes filled),
#: the tolerance that grows with the values, threshold/invert rules,
#: outline.cu (--polygons), then morphology.cu (one-step and multi-step kernels,
#: byte and 16-byte access) and smooth.cu (strip kernels for R <= 3, the
#: shared-tile kernel for R = 7).
CASES = [
    (np.uint8, LabelParams(connectivity=8, polygons=True), ODD),
    (np.bool_, LabelParams(connectivity=4, min_area=3, polygons=True), ODD),
    (np.uint16, LabelParams(tau=2, connectivity=8, min_area=4), ODD),
    (np.int16, LabelParams(tau=1, connectivity=4, invert=True), ODD),
    (np.float32, LabelParams(tau=0.5, connectivity=8, background=None), ODD),
    (np.float64, LabelParams(threshold=0.1, connectivity=8, min_area=2), ODD),
    (np.uint8, LabelParams(connectivity=8, morphology=(("open", 1), ("dilate", 2))), ODD),
    (np.uint8, LabelParams(connectivity=4, morphology=(("close", 1), ("open", 3))), ALIGNED),
    (np.bool_, LabelParams(connectivity=8, morphology=(("dilate", 9),)), ALIGNED),
    (np.uint16, LabelParams(tau=2, smooth=("box", 3), morphology=(("erode", 1),)), ODD),
    (np.uint16, LabelParams(tau=2, connectivity=4, smooth=("binomial", 2)), ALIGNED),
    (np.int32, LabelParams(tau=1, smooth=("box", 1)), ALIGNED),
    (np.float32, LabelParams(tau=0.5, smooth=("binomial", 3)), ALIGNED),
    (np.float64, LabelParams(tau=0.5, smooth=("box", 2)), ODD),
    (np.float32, LabelParams(tau=0.5, smooth=("binomial", 7)), ODD),
    (np.uint8, LabelParams(min_area=2, max_area=40, fill_holes=True), ODD),
    (np.uint16, LabelParams(tau=2, connectivity=4, largest=3, fill_holes=True), ALIGNED),
    (np.float32, LabelParams(min_area=2, fill_holes=True), ODD),
    (np.uint16, LabelParams(tau=1, tau_quadratic=0.25, connectivity=8, min_area=2), ODD),
    (np.float64, LabelParams(tau=0.1, tau_relative=0.5, connectivity=4), ALIGNED),
]


#: Keyword sets for ccl_cli.Labeler on device arrays: the API's own kernels (strided
#: copies, bools stored as 255, the min-area keep mask, the tau-mode fill of pixels
#: that morphology adds) and its table of device columns.
API_CASES = [
    (np.uint8, {}),
    (np.bool_, {"connectivity": 4, "min_area": 3}),
    (np.uint16, {"tau": 2, "min_area": 4}),
    (np.uint16, {"tau": 2, "close": 1, "min_area": 2}),
    (np.float64, {"threshold": 0.1, "connectivity": 4}),
    (np.uint8, {"max_area": 30, "largest": 2, "fill_holes": True}),
]


def api_failures(rng: np.random.Generator) -> int:
    """Run API_CASES with statistics and without, on a strided device view; count mismatches."""
    import ccl_cli

    failures = 0
    for dtype, options in API_CASES:
        values = (rng.integers(0, 4, (3, 97, 266)) * (rng.random((3, 97, 266)) < 0.6)).astype(dtype)
        view = values[:, :, ::2]  # strided: the API copies it contiguous on the device
        device = cupy.asarray(values)[:, :, ::2]
        if dtype == np.bool_:  # bools stored as 255, as some producers write them
            device = (cupy.asarray(values).view(cupy.uint8) * 255).view(cupy.bool_)[:, :, ::2]
        want_labels, want_tables = ccl_cli.label(
            np.ascontiguousarray(view), device="cpu", **options
        )
        labels, table = ccl_cli.label(device, **options)
        same = np.array_equal(labels.get(), want_labels) and all(
            a.equals(b) for a, b in zip(table.to_numpy(), want_tables, strict=True)
        )
        only, counts = ccl_cli.label(device, stats=False, **options)
        same &= np.array_equal(only.get(), want_labels)
        same &= counts.get().tolist() == [len(t) for t in want_tables]
        failures += not same
        print(f"{'ok' if same else 'MISMATCH'}: api {np.dtype(dtype)} {options}")
    return failures


#: Volumes (D, H, W) through the API from CuPy arrays and host arrays with device='cuda':
#: volume_cells.cu (binary volumes on cells), volume_local.cu and volume_border.cu (the
#: voxel kernels of tau mode), across tiles in x, y and z, relabel.cu, volume_stats.cu
#: (float sums, the 128-bit integer sums), the remap of area filtering, volume_stages.cu
#: (morphology, smoothing, the tau fill); odd sizes, so every tile and chunk has a ragged
#: edge.
VOLUME = (9, 19, 71)
VOLUME_CASES = [
    (np.uint8, {"connectivity": 26}),
    (np.bool_, {"connectivity": 6, "min_area": 3}),
    (np.uint16, {"connectivity": 18, "tau": 1, "largest": 4}),
    (np.int16, {"connectivity": 26, "tau": 1, "invert": True}),
    (np.float32, {"connectivity": 6, "tau": 0.5, "background": None}),
    (np.float64, {"connectivity": 18, "threshold": 0.1, "min_area": 2}),
    (np.uint32, {"connectivity": 26, "max_area": 40}),
    (np.uint8, {"connectivity": 26, "open": 1, "dilate": 1}),
    (np.uint16, {"connectivity": 6, "tau": 2, "close": 1, "smooth": "box:1"}),
    (np.float32, {"connectivity": 18, "tau": 0.5, "smooth": "binomial:2", "erode": 1}),
    (np.uint16, {"connectivity": 26, "tau": 1, "tau_quadratic": 0.05}),
    (np.float64, {"connectivity": 6, "tau": 0.5, "tau_relative": 0.2, "min_area": 2}),
]


#: Volumes at the edges of the tiles and cells (one voxel; one row, column or pillar of
#: voxels; odd sides, so cells hang over every far face), each with the cells of 26, 18 and
#: 6, a voxel kernel in tau mode with area filtering and a staged tau labeling.
EDGE_SHAPES = [(1, 1, 1), (1, 37, 1), (37, 1, 1), (1, 1, 133), (3, 5, 65)]
EDGE_CASES = [
    (np.uint8, {"connectivity": 26}),
    (np.uint8, {"connectivity": 18}),
    (np.bool_, {"connectivity": 6}),
    (np.int16, {"connectivity": 6, "tau": 1, "min_area": 2}),
    (np.float32, {"connectivity": 18, "tau": 0.5, "smooth": "box:1", "dilate": 1}),
]


def volume_case(values: np.ndarray, options: dict) -> bool:
    """Whether a CuPy volume (with and without statistics) and the host volume with
    device='cuda' give the CPU engine's labels, counts and statistics."""
    import ccl_cli

    want_labels, want_tables = ccl_cli.label(values, device="cpu", **options)
    labels, table = ccl_cli.label(cupy.asarray(values), **options)
    same = np.array_equal(labels.get(), want_labels) and all(
        a.equals(b) for a, b in zip(table.to_numpy(), want_tables, strict=True)
    )
    only, count = ccl_cli.label(cupy.asarray(values), stats=False, **options)
    same &= np.array_equal(only.get(), want_labels)
    same &= int(count.get()) == len(want_tables[0])
    host, host_tables = ccl_cli.label(values, device="cuda", **options)
    return (
        same
        and np.array_equal(host, want_labels)
        and all(a.equals(b) for a, b in zip(host_tables, want_tables, strict=True))
    )


def volume_values(rng: np.random.Generator, dtype: type, shape: tuple[int, ...]) -> np.ndarray:
    """Random values of `dtype` (floats with a block of NaN where the shape has room)."""
    if np.dtype(dtype).kind == "f":
        values = rng.normal(size=shape).astype(dtype)
        values[2:4, 5:9, 10:30] = np.nan
        return values
    return (rng.integers(0, 4, shape) * (rng.random(shape) < 0.6)).astype(dtype)


def volume_failures(rng: np.random.Generator, slabbed: bool) -> tuple[int, int]:
    """Run VOLUME_CASES (and without `slabbed` EDGE_CASES on EDGE_SHAPES) on CuPy and host
    volumes; with `slabbed`, under a device budget of two planes, so every volume goes in
    slabs (slabs.py: seams, the forest, the two passes). Returns (mismatches with the CPU
    engine, cases)."""
    from ccl_cli.backends.cuda import slabs

    budget = slabs.device_budget
    runs = [(VOLUME, dtype, options) for dtype, options in VOLUME_CASES]
    if slabbed:
        plane = VOLUME[1] * VOLUME[2]
        slabs.device_budget = lambda device: 2 * plane * 8  # two planes of labels
    else:
        runs += [(shape, *case) for shape in EDGE_SHAPES for case in EDGE_CASES]
    failures = 0
    try:
        for shape, dtype, options in runs:
            same = volume_case(volume_values(rng, dtype, shape), options)
            failures += not same
            kind = "slabs" if slabbed else "volume"
            print(f"{'ok' if same else 'MISMATCH'}: {kind} {shape} {np.dtype(dtype)} {options}")
    finally:
        slabs.device_budget = budget
    return failures, len(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--stages", action="store_true", help="only the cases with morphology or smoothing"
    )
    parser.add_argument("--volumes", action="store_true", help="only the volume cases")
    parser.add_argument(
        "--one-piece",
        action="store_true",
        help="volumes in one piece only, not also in slabs (whose extra kernels use no "
        "shared memory: enough for racecheck)",
    )
    arguments = parser.parse_args()
    cases = CASES
    if arguments.stages:
        cases = [c for c in CASES if c[1].morphology or c[1].smooth is not None]
    if arguments.volumes:
        cases = []
    cupy.cuda.set_allocator(None)
    rng = np.random.default_rng(0)
    cuda, cpu = CudaBackend(), CpuBackend()
    failures = 0
    for dtype, params, shape in cases:
        if np.dtype(dtype).kind == "f":
            values = rng.normal(size=shape).astype(dtype)
            values[0, 10:20, 10:30] = np.nan
        else:
            values = (rng.integers(0, 4, shape) * (rng.random(shape) < 0.6)).astype(dtype)
        for batch in (values, cupy.asarray(values)):
            got, want = cuda.label(batch, params), cpu.label(values, params)
            labels = got.labels.get() if isinstance(got.labels, cupy.ndarray) else got.labels
            same = (
                np.array_equal(labels, want.labels)
                and all(a.equals(b) for a, b in zip(got.tables, want.tables, strict=True))
                and all(
                    a.equals(b)
                    for a, b in zip(got.polygons or [], want.polygons or [], strict=True)
                )
            )
            failures += not same
            print(f"{'ok' if same else 'MISMATCH'}: {np.dtype(dtype)} {params}")
    if not arguments.volumes:
        failures += api_failures(rng)
    total = len(cases) * 2 + (0 if arguments.volumes else len(API_CASES))
    for slabbed in (False,) if arguments.one_piece else (False, True):
        mismatches, runs = volume_failures(rng, slabbed)
        failures += mismatches
        total += runs
    cupy.cuda.runtime.deviceSynchronize()
    print(f"sanitize_run: {total - failures}/{total} cases match the CPU")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
