"""End-to-end runs over a folder of image files: `gccl label`, and the OpenCV equivalent.

Each run reads every file, labels it, and writes a label image and a
statistics CSV per file into `out`, returning the components in all files.
gccl's run is the real pipeline (`run.command.run_label`). OpenCV's is the script
a user would write: cv2.imread, connectedComponentsWithStats, cv2.imwrite of
16-bit PNG labels (32-bit TIFF above 65535) and its statistics (area, box,
centroid: fewer columns than gccl's, which add intensity mean/min/max), files
in parallel threads.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from ..config import Settings
from ..contract.params import LabelParams, foreground_mask

_PNG_LABEL_LIMIT = 65535


def gccl_label_folder(folder: Path, out: Path, params: LabelParams, device: str, batch: int) -> int:
    """`gccl label FOLDER --out OUT --device DEVICE --batch-size BATCH`; RuntimeError on failure."""
    from ..run.command import run_label

    settings = Settings(
        out=out,
        background=params.background,
        invert=params.invert,
        threshold=params.threshold,
        tau=params.tau,
        tau_relative=params.tau_relative or None,
        tau_quadratic=params.tau_quadratic or None,
        connectivity=params.connectivity,
        device=device,
        batch_size=batch,
        quiet=True,
    )
    report = run_label([str(folder)], settings, _SilentReporter())
    failed = [r for r in report.records if r.status != "ok"]
    if failed:
        raise RuntimeError(f"{failed[0].item.display}: {failed[0].message}")
    return sum(r.components or 0 for r in report.records)


def opencv_label_folder(folder: Path, out: Path, params: LabelParams, threads: int) -> int:
    """The OpenCV script's run (binary mode) on `threads` threads."""
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in folder.iterdir() if p.is_file())
    with ThreadPoolExecutor(threads) as pool:
        return sum(pool.map(lambda path: _opencv_file(path, out, params), files))


def _opencv_file(path: Path, out: Path, params: LabelParams) -> int:
    import cv2

    image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if image is None:
        raise RuntimeError(f"OpenCV cannot read {path}")
    count, labels, stats, centroids = cv2.connectedComponentsWithStats(
        foreground_mask(image, params).view(np.uint8),
        connectivity=params.connectivity,
        ltype=cv2.CV_32S,
    )
    stem = out / path.stem
    if count - 1 <= _PNG_LABEL_LIMIT:
        written = cv2.imwrite(f"{stem}.labels.png", labels.astype(np.uint16))
    else:
        written = cv2.imwrite(f"{stem}.labels.tif", labels)
    if not written:
        raise RuntimeError(f"OpenCV cannot write the labels of {path}")
    table = np.column_stack([np.arange(count), stats[:, 4], stats[:, :4], centroids])[1:]
    np.savetxt(
        f"{stem}.stats.csv",
        table,
        fmt=["%d"] * 6 + ["%.17g"] * 2,
        delimiter=",",
        header="label,area,x,y,width,height,centroid_x,centroid_y",
        comments="",
    )
    return int(count) - 1


class _SilentReporter:
    """The pipeline's reporter, silenced: the bench prints its own progress."""

    def start(self, total: int | None) -> None:
        pass

    def finished(self, record: Any) -> None:
        pass

    def notice(self, message: str) -> None:
        pass
