"""The Python API: `ccl_cli.label(array, ...)` and `ccl_cli.Labeler(...)` for numpy, CuPy,
PyTorch and other DLPack / CUDA-array-interface arrays.

    labels, tables = ccl_cli.label(image, tau=20, min_area=50)
    labeler = ccl_cli.Labeler(connectivity=4, stats=False)
    labels, counts = labeler(masks)  # masks on the GPU: nothing waits

The same backends and semantics as the CLI (README.md, "What the labels mean";
ccl_cli.contract.params). A device array is labeled on its own device, on the
caller's current stream (CuPy's, or PyTorch's for a tensor), and what comes back
is the input's kind of array (README, "From PyTorch and CuPy").
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .backends import make_backend
from .backends.base import Backend
from .backends.cuda.backend import is_device_array
from .backends.cuda.device import DeviceTable, cupy_empty, label_counts, label_table
from .backends.cuda.frameworks import (
    TorchSide,
    as_cupy,
    cupy_view,
    is_cupy_array,
    is_torch_tensor,
    no_stream,
)
from .backends.cuda.loader import import_cupy
from .config import resolve
from .contract.params import LabelParams
from .errors import UsageError
from .options import check_device

__all__ = ["DeviceTable", "Labeler", "label"]


class Labeler:
    """Labels arrays with fixed options, checked once (the options of `label`).

    Calling it labels one image (H, W) or a batch (N, H, W):

        labels, tables = labeler(array)            # stats=True
        labels, counts = labeler(array)            # stats=False
        labels, counts = labeler(array, out=buf)   # into a caller's buffer

    labels: uint32 labels shaped like the input, 1..K' per image in raster order
    of each component's first pixel, 0 elsewhere; the input's kind of array
    (numpy, CuPy, or a PyTorch tensor: int32 there, the same values).
    counts: K' per image, an array of the labels' kind (0-d for one image);
    on the device it stays there and the call does not wait (unless min_area
    is set: then it waits once, for the number of labels).
    tables: for a host array, one StatsTable per image; for a device array, a
    DeviceTable whose columns stay on the device (`to_numpy()` copies them to
    the host): the call waits for the number of labels, and with min_area for
    the number kept.
    out: a C-contiguous uint32 array of the labels' shape and kind (int32 or
    uint32 for a PyTorch tensor) on the input's device.
    """

    def __init__(
        self,
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
        stats: bool = True,
        device: str = "auto",
    ) -> None:
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
        self.params: LabelParams = resolve([], options, source="ccl_cli.label").label_params()
        if not isinstance(stats, bool):
            raise UsageError(f"stats must be True or False, not {stats!r}")
        self.stats = stats
        self.device, self._cuda_index = _checked_device(device)

    def __call__(self, array: Any, *, out: Any = None) -> tuple[Any, Any]:
        """Label `array`; see the class docstring."""
        shape = tuple(array.shape)
        if len(shape) not in (2, 3):
            raise UsageError(f"expected an (H, W) image or an (N, H, W) batch, got shape {shape}")
        if is_torch_tensor(array):
            if array.device.type == "cuda":
                return self._on_device(array, shape, out, torch_side=TorchSide(array))
            return self._on_host_torch(array, shape, out)
        if is_cupy_array(array) or is_device_array(array):
            return self._on_device(array, shape, out, torch_side=None)
        return self._on_host(np.asarray(array), shape, out)

    def _on_device(
        self, array: Any, shape: tuple[int, ...], out: Any, torch_side: TorchSide | None
    ) -> tuple[Any, Any]:
        """Label a device array on its device and the caller's current stream."""
        if self.device == "cpu":
            raise UsageError("device='cpu' needs a host (numpy) array")
        values = cupy_view(array) if torch_side is not None else as_cupy(array)
        device = values.device
        if self._cuda_index is not None and self._cuda_index != device.id:
            raise UsageError(f"the array is on cuda:{device.id}, not {self.device}")
        batch = values if len(shape) == 3 else values[None]
        empty = torch_side.empty if torch_side is not None else cupy_empty
        stream = torch_side.context() if torch_side is not None else no_stream()
        with device, stream:
            labels_native, labels = _device_out(out, shape, empty, torch_side)
            labels = labels if len(shape) == 3 else labels[None]
            if self.stats:
                table, _ = label_table(batch, self.params, labels, empty)
                return labels_native, table
            counts_native, counts = empty((batch.shape[0],), np.uint32)
            label_counts(batch, self.params, labels, counts)
        return labels_native, counts_native if len(shape) == 3 else counts_native[0]

    def _on_host(self, host: np.ndarray, shape: tuple[int, ...], out: Any) -> tuple[Any, Any]:
        """Label a numpy array with the backend `device` names."""
        backend = _host_backend(self.device)
        batch = host if len(shape) == 3 else host[None]
        # Host results in ordinary memory: the CUDA backend's own would be page-locked.
        if out is None:
            labels = np.empty(batch.shape, np.uint32)
        else:
            labels = _checked_out(out, shape, np.ndarray)
            labels = labels if len(shape) == 3 else labels[None]
        result = backend.label(batch, self.params, labels)
        tables = [table.copy() for table in result.tables]
        image = labels if len(shape) == 3 else labels[0]
        if self.stats:
            return image, tables
        counts = np.array([len(table) for table in tables], np.uint32)
        return image, counts if len(shape) == 3 else counts.reshape(())

    def _on_host_torch(self, tensor: Any, shape: tuple[int, ...], out: Any) -> tuple[Any, Any]:
        """Label a host PyTorch tensor as numpy; labels and counts as int32 tensors."""
        import torch

        host_out = None
        if out is not None:
            if not is_torch_tensor(out) or out.dtype not in (torch.int32, torch.uint32):
                raise UsageError("out must be an int32 or uint32 tensor like the input")
            host_out = out.numpy().view(np.uint32)
        labels, rest = self._on_host(tensor.detach().numpy(), shape, host_out)
        result = out if out is not None else torch.from_numpy(labels.view(np.int32))
        return result, rest if self.stats else torch.from_numpy(rest.view(np.int32))


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
    stats: bool = True,
    device: str = "auto",
    out: Any = None,
) -> tuple[Any, Any]:
    """Label the connected components of one image (H, W) or a batch (N, H, W).

    array: numpy, CuPy, a PyTorch tensor, or any device array exposing
        __cuda_array_interface__ or DLPack; strided views are fine.
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
    stats: True returns statistics tables, False only the label counts.
    device: "auto" (CUDA when usable, always for device arrays, else CPU),
        "cpu", "cuda" or "cuda:N".
    out: an array to write the labels into (Labeler's docstring).

    Returns (labels, tables) or, with stats=False, (labels, counts): see
    Labeler. Raises UsageError for a bad option and BackendUnavailable when
    CUDA is asked for but not usable. The Labeler of each set of options is
    kept, so repeated calls check them once.
    """
    options: tuple[Any, ...] = (tau, connectivity, background, invert, threshold, min_area)
    options += (erode, dilate, open, close, smooth, stats, device)
    try:
        labeler = _labeler(*options)
    except TypeError:  # an unhashable value: checked without the cache
        labeler = Labeler(**dict(zip(_LABELER_OPTIONS, options, strict=True)))
    return labeler(array, out=out)


_LABELER_OPTIONS: tuple[str, ...] = ("tau", "connectivity", "background", "invert", "threshold")
_LABELER_OPTIONS += ("min_area",)
_LABELER_OPTIONS += ("erode", "dilate", "open", "close", "smooth", "stats", "device")


@functools.lru_cache(maxsize=64)
def _labeler(*options: Any) -> Labeler:
    """The Labeler of `label`'s options (in _LABELER_OPTIONS' order), made once."""
    return Labeler(**dict(zip(_LABELER_OPTIONS, options, strict=True)))


def _checked_device(device: str) -> tuple[str, int | None]:
    """`device` checked as --device is, and the CUDA device it names (None: any)."""
    try:
        device = check_device(device)
    except ValueError as error:
        raise UsageError(f"device must be {error}") from None
    index = device.partition(":")[2]
    return device, int(index) if index else None


@functools.lru_cache(maxsize=16)
def _host_backend(device: str) -> Backend:
    """The backend that labels host arrays for `device`, made once per process."""
    return make_backend(device, None, _no_notice)


def _no_notice(message: str) -> None:
    """auto's fallback to the CPU says nothing here: the caller asked for auto."""


def _checked_out(out: Any, shape: tuple[int, ...], kind: Any) -> Any:
    """`out` if it is a C-contiguous uint32 array of `kind` and `shape`, else UsageError."""
    if not isinstance(out, kind):
        raise UsageError(f"out must be a {kind.__module__}.{kind.__name__} like the input")
    if tuple(out.shape) != shape or np.dtype(out.dtype) != np.uint32:
        raise UsageError(f"out must be uint32 of shape {shape}, got {out.dtype} {out.shape}")
    if not out.flags.c_contiguous:
        raise UsageError("out must be C-contiguous")
    return out


def _device_out(
    out: Any, shape: tuple[int, ...], empty: Any, torch_side: TorchSide | None
) -> tuple[Any, Any]:
    """The labels array (as returned, and as CuPy): `out` checked, or a new one."""
    if out is None:
        return empty(shape, np.uint32)
    if torch_side is not None:
        if not is_torch_tensor(out) or out.device != torch_side.device:
            raise UsageError(f"out must be a tensor on {torch_side.device} like the input")
        if tuple(out.shape) != shape or not out.is_contiguous():
            raise UsageError(f"out must be a contiguous tensor of shape {shape}")
        view = cupy_view(out) if str(out.dtype) in ("torch.int32", "torch.uint32") else None
        if view is None:
            raise UsageError(f"out must be int32 or uint32, not {out.dtype}")
        return out, view.view(np.uint32)
    cupy = import_cupy()
    return out, _checked_out(out, shape, cupy.ndarray)
