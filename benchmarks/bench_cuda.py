"""CUDA backend speed on the reference cases, with a kernel breakdown and the bandwidth floor.

    python3 benchmarks/bench_cuda.py [--doc SCAN] [--depth FRAME] [--json OUT.json]

Cases (data already on the device, times by CUDA events after warm-up, median):
  random 4000x3000 d=0.5, 8- and 4-connectivity: dense raster-order labels;
  a document scan (~2550x3300, ink as foreground via invert): labels;
  64 x 1920x1080 random d=0.5, 8-connectivity: labels + statistics;
  a depth frame tiled to 4000x3000 uint16, tau 20, 8-connectivity:
  labels + statistics + min-area.
"labels + statistics" ends with the statistics table on the device; the
end-to-end CudaBackend.label time, with the table and labels copied to the
host, is reported beside it. Context on the same data:
cupyx.scipy.ndimage.label (labels only) and OpenCV connectedComponents (CPU,
labels only, all threads). Prints a markdown table; --json writes every number.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import cupy
import numpy as np
from medians import cpu_median_ms, gpu_median_ms, kernel_breakdown
from PIL import Image

from ccl_cli.backends.cuda import backend
from ccl_cli.backends.cuda import labels as cuda_labels
from ccl_cli.contract.params import LabelParams

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
BIG = (3000, 4000)


def copy_bandwidth() -> float:
    """Device-to-device copy rate in bytes/s, counting bytes read plus written."""
    src = cupy.ones(1 << 31, cupy.uint8)
    dst = cupy.empty_like(src)
    ms = gpu_median_ms(lambda: dst.data.copy_from_device_async(src.data, src.nbytes), 20)
    return 2 * src.nbytes / (ms * 1e-3)


def load_gray(path: Path) -> np.ndarray:
    """A grayscale image as displayed (PIL: 1-bit ink reads 0), uint8 or uint16."""
    with Image.open(path) as image:
        if image.mode in ("I;16", "I;16B", "I"):
            return np.asarray(image).astype(np.uint16)
        return np.asarray(image.convert("L"))


def document(path: Path | None) -> tuple[str, np.ndarray]:
    """A document scan (dark ink on white), or a generated text-like page."""
    candidates = [path] if path else sorted((SHARED / "docs").glob("*.tif"))
    for candidate in candidates:
        try:
            return candidate.name, load_gray(candidate)
        except OSError:
            continue
    rng = np.random.default_rng(1)
    page = np.full((3300, 2550), 255, np.uint8)
    for top in range(150, 3100, 60):  # text lines of random glyph-sized strokes
        x = 150
        while x < 2350:
            w, h = rng.integers(8, 30), rng.integers(20, 36)
            page[top : top + h, x : x + w][rng.random((h, w)) < 0.35] = 0
            x += w + rng.integers(4, 40)
    return "generated text page", page


def depth_image(path: Path | None) -> tuple[str, np.ndarray]:
    """A depth frame tiled to 4000x3000 uint16, or a generated smooth depth map."""
    candidates = [path] if path else sorted((SHARED / "depth").glob("*.png"))
    for candidate in candidates:
        try:
            frame = load_gray(candidate)
        except OSError:
            continue
        reps = (-(-BIG[0] // frame.shape[0]), -(-BIG[1] // frame.shape[1]))
        return candidate.name, np.ascontiguousarray(np.tile(frame, reps)[: BIG[0], : BIG[1]])
    yy, xx = np.mgrid[0 : BIG[0], 0 : BIG[1]]
    depth = 1500 + 800 * np.sin(xx / 300) * np.cos(yy / 200) + (xx // 500) * 100
    return "generated depth", depth.astype(np.uint16)


def opencv_ms(images: np.ndarray, connectivity: int, repeat: int) -> float | None:
    """OpenCV connectedComponents over every image (labels only, CV_32S), or None."""
    try:
        import cv2
    except ImportError:
        return None
    masks = [np.ascontiguousarray(image != 0).view(np.uint8) for image in images]

    def run() -> object:
        return [
            cv2.connectedComponents(m, connectivity=connectivity, ltype=cv2.CV_32S) for m in masks
        ]

    return cpu_median_ms(run, repeat)


def cupyx_ms(device_masks: Any, connectivity: int, repeat: int) -> tuple[float, int]:
    """cupyx.scipy.ndimage.label on the stacked masks (each image its own 2-D structure)."""
    from cupyx.scipy import ndimage

    structure = np.zeros((3, 3, 3), bool)
    plane = [[1, 1, 1]] * 3 if connectivity == 8 else [[0, 1, 0], [1, 1, 1], [0, 1, 0]]
    structure[1] = plane
    out = cupy.empty(device_masks.shape, cupy.int32)
    result = ndimage.label(device_masks, structure, output=out)
    count = result[1] if isinstance(result, tuple) else result
    return gpu_median_ms(lambda: ndimage.label(device_masks, structure, output=out), 20), int(count)


def run_case(name: str, host: np.ndarray, params: LabelParams, stats: bool, repeat: int) -> dict:
    """Time one case: our pipeline, its kernels, end to end, the floor and the peers."""
    values = cupy.asarray(host)
    out = cupy.empty(values.shape, cupy.uint32)

    def labels_only() -> object:
        return cuda_labels.dense_labels(values, params, out)

    def labels_and_stats() -> object:
        components = cuda_labels.dense_labels(values, params, out)
        label_base = cuda_labels.label_offsets(components)
        total = int(label_base[-1:].get()[0])  # it sizes the statistics, as in a CUDA job
        return cuda_labels.filtered_table(values, out, label_base, total, params)

    run = labels_and_stats if stats else labels_only
    ms = gpu_median_ms(run, repeat)
    cuda = backend.CudaBackend()
    pixels = host.size
    floor_bytes = host.nbytes + 4 * pixels  # read the input once, write the labels once
    row = {
        "case": name,
        "shape": list(host.shape),
        "dtype": str(host.dtype),
        "params": repr(params),
        "what": ("labels + stats" + (" + min-area" if params.min_area else ""))
        if stats
        else "labels",
        "ms": ms,
        "gpix_per_s": pixels / (ms * 1e-3) / 1e9,
        "kernels_ms": kernel_breakdown(run, max(5, repeat // 4)),
        "end_to_end_ms": cpu_median_ms(lambda: cuda.label(values, params), max(3, repeat // 10)),
        "floor_bytes": floor_bytes,
        "components": int(labels_only().get().sum()),
    }
    if params.tau is None:
        masks = values if params.background == 0 and not params.invert else values == 0
        peer_ms, peer_count = cupyx_ms(masks, params.connectivity, repeat)
        row["cupyx_ms"], row["cupyx_components"] = peer_ms, peer_count
        mask_host = host if params.background == 0 and not params.invert else host == 0
        row["opencv_ms"] = opencv_ms(mask_host, params.connectivity, 5)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, help="document scan (default: ../shared/data/docs)")
    parser.add_argument("--depth", type=Path, help="depth PNG (default: ../shared/data/depth)")
    parser.add_argument("--repeat", type=int, default=100, help="timed runs per case")
    parser.add_argument("--json", type=Path, help="write all numbers here")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    random_big = (rng.random((1, *BIG)) < 0.5).astype(np.uint8)
    doc_name, doc = document(args.doc)
    depth_name, depth = depth_image(args.depth)
    batch = (rng.random((64, 1080, 1920)) < 0.5).astype(np.uint8)
    cases = [
        ("random 4000x3000 d=0.5, 8-conn", random_big, LabelParams(connectivity=8), False),
        ("random 4000x3000 d=0.5, 4-conn", random_big, LabelParams(connectivity=4), False),
        (
            f"doc {doc_name} {doc.shape[1]}x{doc.shape[0]}, 8-conn",
            doc[None],
            LabelParams(invert=True),
            False,
        ),
        ("64 x 1920x1080 random d=0.5, 8-conn", batch, LabelParams(), True),
        (
            f"depth {depth_name} tiled 4000x3000 uint16, tau 20, 8-conn",
            depth[None],
            LabelParams(tau=20, min_area=20),
            True,
        ),
    ]
    bandwidth = copy_bandwidth()
    rows = []
    for name, host, params, stats in cases:
        row = run_case(name, host, params, stats, args.repeat)
        row["floor_ms"] = row["floor_bytes"] / bandwidth * 1e3
        rows.append(row)

    print(f"\ncopy bandwidth (read + write): {bandwidth / 1e12:.2f} TB/s\n")
    print(
        "| case | what | ms (median) | Gpix/s | floor ms | end to end ms | cupyx ms | OpenCV ms |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        peers = [r.get("cupyx_ms"), r.get("opencv_ms")]
        cells = " | ".join("—" if p is None else f"{p:.3f}" for p in peers)
        print(
            f"| {r['case']} | {r['what']} | {r['ms']:.3f} | {r['gpix_per_s']:.1f} | "
            f"{r['floor_ms']:.3f} | {r['end_to_end_ms']:.2f} | {cells} |"
        )
    print("\nper kernel (median ms per run):")
    for r in rows:
        parts = ", ".join(f"{k.removeprefix('gccl_')} {v:.3f}" for k, v in r["kernels_ms"].items())
        check = ""
        if "cupyx_components" in r:
            same = r["cupyx_components"] == r["components"]
            check = " (= cupyx)" if same else f" (MISMATCH: cupyx {r['cupyx_components']})"
        print(f"- {r['case']}: {parts}; {r['components']} components{check}")
    if args.json:
        args.json.write_text(
            json.dumps({"bandwidth_bytes_per_s": bandwidth, "cases": rows}, indent=2)
        )


if __name__ == "__main__":
    main()
