"""The Python API: `ccl_cli.label(array, ...)` for numpy, CuPy and DLPack arrays.

    labels, tables = ccl_cli.label(image, tau=20, min_area=50)

One function over the same backends the CLI uses, with the same semantics
(README.md, "What the labels mean"; ccl_cli.contract.params).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .backends import make_backend
from .backends.base import Backend
from .backends.cuda.backend import is_device_array
from .config import resolve
from .contract.stats import StatsTable
from .errors import UsageError
from .options import check_device


def label(
    array: Any,
    *,
    tau: float | None = None,
    connectivity: int = 8,
    background: float | None = 0,
    invert: bool = False,
    threshold: float | None = None,
    min_area: int = 0,
    erode: int = 0,
    dilate: int = 0,
    open: int = 0,
    close: int = 0,
    smooth: str | None = None,
    device: str = "auto",
) -> tuple[Any, list[StatsTable]]:
    """Label the connected components of one image (H, W) or a batch (N, H, W).

    array: numpy, CuPy, or any device array exposing __cuda_array_interface__
        or DLPack (a PyTorch CUDA tensor, say); strided views are fine.
    tau: None labels binary foreground; a number joins neighbours whose values
        differ by at most tau (joins chain). connectivity: 4 or 8.
    background: the non-foreground value (None: every non-NaN pixel is
        foreground); invert flips intensities first; threshold binarizes
        instead (v > threshold, or v < threshold with invert).
    min_area: components with fewer pixels become 0; the rest are renumbered.
    erode, dilate, open, close: morphology steps on the foreground mask (N
        iterations each, applied in that fixed order: open, close, erode,
        dilate); smooth: "box:R" or "binomial:R" before tau labeling. The
        same stages as `gccl label`'s options (README, ccl_cli.contract.stages).
    device: "auto" (CUDA when usable, always for device arrays, else CPU),
        "cpu", "cuda" or "cuda:N".

    Returns (labels, tables): uint32 labels shaped like the input, 1..K per
    image in raster order of each component's first pixel (numpy for a host
    array, CuPy on the input's device for a device array), and one StatsTable
    per image. Raises UsageError for a bad option and BackendUnavailable when
    CUDA is asked for but not usable.
    """
    options = {
        "background": "none" if background is None else background,
        "invert": invert,
        "threshold": threshold,
        "tau": tau,
        "connectivity": connectivity,
        "min_area": min_area,
        "erode": erode,
        "dilate": dilate,
        "open": open,
        "close": close,
        "smooth": smooth,
    }
    params = resolve([], options, source="ccl_cli.label").label_params()
    ndim = len(array.shape)
    if ndim not in (2, 3):
        raise UsageError(f"expected an (H, W) image or an (N, H, W) batch, got shape {array.shape}")
    on_device = is_device_array(array)
    backend = _backend(device, on_device)
    if on_device and backend.name == "cpu":
        raise UsageError("device='cpu' needs a host (numpy) array")
    batch = array if ndim == 3 else array[None]
    # Host results in ordinary memory: the CUDA backend's own would be page-locked.
    out = None if on_device else np.empty(batch.shape, np.uint32)
    result = backend.label(batch, params, out)
    tables = [table.copy() for table in result.tables]
    return (result.labels if ndim == 3 else result.labels[0]), tables


def _backend(device: str, on_device: bool) -> Backend:
    """The backend that `device` names (checked as --device is; auto is CUDA for a
    device array, which is labeled on its own device)."""
    try:
        device = check_device(device)
    except ValueError as error:
        raise UsageError(f"device must be {error}") from None
    if on_device and device == "auto":
        device = "cuda"
    return make_backend(device, None, _no_notice)


def _no_notice(message: str) -> None:
    """auto's fallback to the CPU says nothing here: the caller asked for auto."""
