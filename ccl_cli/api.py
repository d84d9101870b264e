"""The Python API: `ccl_cli.label(array, ...)` and `ccl_cli.Labeler(...)` for numpy arrays and
array-likes, CuPy, PyTorch and other DLPack / CUDA-array-interface arrays.

    labels, tables = ccl_cli.label(image, tau=20, min_area=50)
    labeler = ccl_cli.Labeler(connectivity=4, stats=False)
    labels, counts = labeler(masks)  # masks on the GPU: nothing waits
    labels, tables = ccl_cli.label(volume, connectivity=26)  # (D, H, W)

The same backends and semantics as the CLI (README.md, "What the labels mean";
ccl_cli.contract.params). The labeling keywords are `gccl label`'s options
(ccl_cli.options.API_OPTIONS, with their defaults and checks), so both take the
same values. A bad value raises a ValueError, a wrong type a TypeError (gccl's
BadValue and BadType, one line each). A device array is labeled on its own
device, on the caller's current stream (CuPy's, or PyTorch's for a tensor), and
what comes back is the input's kind of array (README, "From PyTorch and CuPy").
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

import numpy as np

from .backends import make_backend
from .backends.base import (
    Backend,
    array_device,
    checked_out,
    cuda_index,
    is_device_array,
    is_torch_tensor,
)
from .chunked import is_dask_array
from .config import resolve
from .contract.params import SUPPORTED_DTYPES, LabelParams, foreground_problem
from .contract.stages import smooth_problem
from .contract.stats import StatsTable, empty_table
from .errors import BadType, BadValue
from .options import API_OPTIONS, close_names

__all__ = ["Labeler", "StatsTable", "label"]

#: Where API errors say they come from.
_SOURCE = "ccl_cli.label"
#: The numpy dtypes a host array is taken in losslessly, as the first of these its values
#: fit (int64 is numpy's default integer: np.array([[0, 1]]) is one).
_NARROWED: dict[np.dtype, tuple[Any, ...]] = {
    np.dtype(np.int64): (np.int32, np.uint32),
    np.dtype(np.uint64): (np.uint32,),
    np.dtype(np.float16): (np.float32,),
}
_SUPPORTED_NAMES = ", ".join(dtype.name for dtype in SUPPORTED_DTYPES)


def batch_layout(shape: tuple[int, ...], batch: bool | None, rank: int = 2) -> bool:
    """Whether an array of `shape` is a batch (N, H, W) rather than one image (H, W), or
    with rank 3 (a volume connectivity) a batch of volumes (N, D, H, W) rather than one
    volume (D, H, W).

    batch: True or False says which it is; None takes 2-D as an image and 3-D as a
    batch, except an (H, W, 3) or (H, W, 4) array, which is refused: it is far more
    often a colour image (what cv2.imread and skimage.io.imread return) than a batch
    of images 3 or 4 pixels wide, and labeling it as a batch would be silently wrong.
    With rank 3, None takes 3-D as a volume and 4-D as a batch of volumes, and a volume
    needs a voxel along every axis.
    """
    if batch is not None and not isinstance(batch, (bool, np.bool_)):
        raise BadType(f"{_SOURCE}: 'batch' must be True, False or None, not {batch!r}")
    if rank == 3:
        return _volume_layout(shape, batch)
    if batch is None and len(shape) == 3 and shape[-1] in (3, 4):
        kind = "RGB" if shape[-1] == 3 else "RGBA"
        raise BadValue(
            f"{_SOURCE}: an array of shape {shape} looks like an {kind} colour image: "
            "convert it to gray first (cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), "
            "skimage.color.rgb2gray), or pass batch=True if it is a batch of "
            f"{shape[0]} images of {shape[1]}x{shape[2]} pixels"
        )
    wanted = {None: (2, 3), True: (3,), False: (2,)}[None if batch is None else bool(batch)]
    if len(shape) not in wanted:
        expected = {2: "an (H, W) image", 3: "an (N, H, W) batch"}
        words = " or ".join(expected[n] for n in wanted)
        given = "" if batch is None else f" (batch={bool(batch)})"
        hint = (
            "; a 4-D array is a batch of volumes, which connectivity 6, 18 or 26 labels"
            if len(shape) == 4
            else ""
        )
        raise BadValue(f"{_SOURCE}: expected {words}{given}, got shape {shape}{hint}")
    return len(shape) == 3


def _volume_layout(shape: tuple[int, ...], batch: bool | None) -> bool:
    """batch_layout for volumes: whether `shape` is a batch (N, D, H, W)."""
    wanted = {None: (3, 4), True: (4,), False: (3,)}[None if batch is None else bool(batch)]
    if len(shape) not in wanted:
        expected = {3: "a (D, H, W) volume", 4: "an (N, D, H, W) batch of volumes"}
        words = " or ".join(expected[n] for n in wanted)
        given = "" if batch is None else f" (batch={bool(batch)})"
        hint = "; a 2-D image takes connectivity 4 or 8" if len(shape) == 2 else ""
        raise BadValue(
            f"{_SOURCE}: connectivity 6, 18 and 26 label volumes: expected {words}{given}, "
            f"got shape {shape}{hint}"
        )
    if 0 in shape:
        raise BadValue(f"{_SOURCE}: a volume needs a voxel along every axis, got shape {shape}")
    return len(shape) == 4


class Labeler:
    """Labels arrays with fixed options, checked once: `label`'s keywords but `out` and
    `batch`, which belong to each call.

        labeler = ccl_cli.Labeler(tau=20, min_area=50)
        labels, tables = labeler(image)             # stats=True
        labels, counts = labeler(batch)             # stats=False
        labels, counts = labeler(batch, out=buf)    # into a caller's buffer

    See `ccl_cli.label` for the options, the arrays taken and what comes back.
    """

    def __init__(self, *, stats: bool = True, **options: Any) -> None:
        _known(options, "Labeler")
        if not isinstance(stats, (bool, np.bool_)):
            raise BadType(f"{_SOURCE}: 'stats' must be True or False, not {stats!r}")
        settings = resolve([], options, source=_SOURCE, python=True)
        self.params: LabelParams = settings.params
        if self.params.rank == 3 and self.params.fill_holes:
            raise BadValue(
                f"{_SOURCE}: fill_holes fills the holes of 2-D images; with connectivity "
                f"{self.params.connectivity} (volumes) it is not available"
            )
        problem = smooth_problem(self.params.smooth, self.params.rank)
        if problem:
            raise BadValue(f"{_SOURCE}: {problem}")
        self.stats = bool(stats)
        self.device = settings.device
        #: The backend of host arrays: auto labels host volumes on the CPU (`label`'s docstring).
        volumes_on_cpu = self.device == "auto" and self.params.rank == 3
        self._host_device = "cpu" if volumes_on_cpu else self.device
        self._cuda_index = cuda_index(self.device)

    def __call__(
        self, array: Any, *, out: Any = None, batch: bool | None = None
    ) -> tuple[Any, Any]:
        """Label `array` (see `ccl_cli.label`)."""
        rank = self.params.rank
        if is_device_array(array):
            return self._on_device(array, _shape(array, batch, rank), out)
        if is_torch_tensor(array):
            return self._on_host_torch(array, _shape(array, batch, rank), out)
        host = _host_array(array)
        return self._on_host(host, _shape(host, batch, rank), out)

    def _checked_dtype(self, dtype: np.dtype) -> None:
        """BadType for a dtype labeling does not take, BadValue for a foreground test that cannot
        work on it (contract.params.foreground_problem)."""
        if dtype not in SUPPORTED_DTYPES:
            raise BadType(
                f"{_SOURCE}: {dtype} arrays are not labeled (take {_SUPPORTED_NAMES}); "
                "convert it with astype"
            )
        problem = foreground_problem(dtype, self.params, python=True)
        if problem:
            raise BadValue(f"{_SOURCE}: {problem}")

    def _on_device(self, array: Any, shape: tuple[int, ...], out: Any) -> tuple[Any, Any]:
        """Label a device array on its device and the caller's current stream, by the
        backend of the device asked for (or of the array's own)."""
        if self.device == "cpu":
            raise BadValue(f"{_SOURCE}: device='cpu' needs a host (numpy) array")
        index = self._cuda_index if self._cuda_index is not None else array_device(array)
        backend = _backend("cuda" if index is None else f"cuda:{index}")
        batched = len(shape) == self.params.rank + 1
        try:
            return backend.label_device(
                array, batched, self.params, out, self.stats, self._checked_dtype, self._cuda_index
            )
        except (BadType, BadValue) as error:
            text = str(error)
            raise type(error)(text if text.startswith(_SOURCE) else f"{_SOURCE}: {text}") from None

    def _on_host(self, host: np.ndarray, shape: tuple[int, ...], out: Any) -> tuple[Any, Any]:
        """Label a numpy array with the backend `device` names; the labels in ordinary memory
        (the CUDA backend's own for images would be page-locked: backends.base.new_labels)."""
        self._checked_dtype(host.dtype)
        batched = len(shape) == self.params.rank + 1
        batch = host if batched else host[None]
        labels = None
        if out is not None:
            try:
                labels = checked_out(out, shape, np.ndarray)
            except (BadType, BadValue) as error:
                raise type(error)(f"{_SOURCE}: {error}") from None
            labels = labels if batched else labels[None]
        elif self.params.rank == 2:  # (volumes: the backend's zeroed plain memory)
            labels = np.empty(batch.shape, np.uint32)
        if batch.size == 0 and labels is not None:  # no pixel, whatever the other extents
            image = out if out is not None else labels if batched else labels[0]
            if self.stats:
                integer = host.dtype.kind != "f"
                return image, [empty_table(integer, self.params.rank) for _ in range(len(batch))]
            counts = np.zeros(len(batch), np.uint32)
            return image, counts if batched else counts.reshape(())
        result = _backend(self._host_device).label(
            batch, self.params, labels, statistics=self.stats
        )
        labels = result.labels
        image = out if out is not None else labels if batched else labels[0]
        if self.stats:
            return image, [table.copy() for table in result.tables]
        counts = np.asarray(result.kept if result.counts is None else result.counts, np.uint32)
        return image, counts if batched else counts.reshape(())

    def _on_host_torch(self, tensor: Any, shape: tuple[int, ...], out: Any) -> tuple[Any, Any]:
        """Label a host PyTorch tensor as numpy; labels and counts as int32 tensors."""
        import torch

        host_out = None
        if out is not None:
            if not is_torch_tensor(out) or out.dtype not in (torch.int32, torch.uint32):
                raise BadType(f"{_SOURCE}: out must be an int32 or uint32 tensor like the input")
            host_out = out.numpy().view(np.uint32)
        labels, rest = self._on_host(_host_array(tensor.detach().numpy()), shape, host_out)
        result = out if out is not None else torch.from_numpy(labels.view(np.int32))
        return result, rest if self.stats else torch.from_numpy(rest.view(np.int32))


def label(
    array: Any, *, stats: bool = True, out: Any = None, batch: bool | None = None, **options: Any
) -> tuple[Any, Any]:
    """Label the connected components of one image (H, W) or a batch (N, H, W), or with
    connectivity 6, 18 or 26 of one volume (D, H, W) or a batch of volumes (N, D, H, W).

    array: a numpy array or anything numpy.asarray takes (nested lists of numbers
        included); a CuPy array, a PyTorch tensor, or any device array exposing
        __cuda_array_interface__ or DLPack. Strided views are fine. bool, (u)int8/16/32
        and float32/64 are labeled as they are; int64/uint64 and float16 host arrays as
        the first of int32/uint32 (float32) that holds their values exactly. A host
        volume is labeled on the CPU unless device is "cuda" or "cuda:N" (then on the GPU,
        in slabs of planes where it does not fit the device's memory); a device volume on
        its device.
    tau: None labels binary foreground; a number joins neighbours whose values
        differ by at most tau (joins chain). connectivity: 4 (edges) or 8 (and
        corners) for images; 6 (faces), 18 (and edges) or 26 (and corners) for
        volumes, the neighbourhoods of scipy.ndimage.generate_binary_structure(3, 1|2|3).
    background: the non-foreground value (None: every non-NaN pixel is
        foreground); invert flips intensities first; threshold binarizes
        instead (v > threshold, or v < threshold with invert).
    min_area, max_area: components with fewer (more) pixels (voxels) become 0; the rest are
        renumbered. largest: only the K largest of those stay (the lower label on
        equal areas). fill_holes: each kept component's holes (background regions
        it alone encloses) become part of it before the statistics (README,
        "What the labels mean"; ccl_cli.contract.cleaning).
    erode, dilate, open, close: morphology steps on the foreground mask (N
        iterations each, applied in that fixed order: open, close, erode,
        dilate); smooth: "box:R" or "binomial:R" before tau labeling. The
        same stages as `gccl label`'s options (README, ccl_cli.contract.stages).
    device: "auto" (CUDA when usable, always for device arrays, else CPU),
        "cpu", "cuda" or "cuda:N".
    stats: True returns statistics tables, False only the label counts.
    out: a C-contiguous uint32 array of the labels' shape and kind (int32 or
        uint32 for a PyTorch tensor) on the input's device, to write the labels into.
    batch: True or False says whether a 3-D array is a batch (N, H, W); None (the
        default) takes 2-D as one image and 3-D as a batch, but refuses an
        (H, W, 3) or (H, W, 4) array, which is most often a colour image. For
        volumes the same for a 4-D array (N, D, H, W); None takes 3-D as one volume.

    Returns (labels, tables), or (labels, counts) with stats=False:
    labels: uint32 labels shaped like the input, 1..K' per image (volume) in raster
        order of each component's first pixel (voxel: z, then y, then x), 0
        elsewhere; the input's kind of array (numpy, CuPy, or a PyTorch tensor: int32
        there, the same values).
    tables: for a host array, one StatsTable per image or volume (a volume's also
        has z, depth and centroid_z, and its area counts voxels; len, iteration over rows,
        table[i], table["area"], to_dict(), to_pandas()); for a device array, a
        DeviceTable whose columns stay on the device (to_numpy() copies them to the
        host): the call waits for the number of labels, and with min_area for the
        number kept.
    counts: K' per image, an array of the labels' kind (0-d for one image); on the
        device it stays there and the call does not wait (unless min_area is set:
        then it waits once, for the number of labels; a binary volume of 2**32 voxels
        or more (2**31 in tau mode), or one the device's free memory cannot label at
        once, is labeled in slabs, which waits for each slab's count).

    A bad value raises ValueError, a wrong type TypeError (ccl_cli.errors.BadValue
    and BadType); CUDA asked for but not usable raises BackendUnavailable; a volume
    whose labels cannot fit this machine's memory raises MemoryError. The
    Labeler of each set of options is kept, so repeated calls check them once.
    """
    _known(options, "label")
    if is_dask_array(array):  # a chunked volume: labeled chunk by chunk (ccl_cli.chunked)
        from .chunked.entry import label_dask

        params = Labeler(**options).params  # the options checked as for any volume
        return label_dask(array, label, params, options, stats=stats, out=out, batch=batch)
    # The types are part of the key: 8.0 == 8, but connectivity=8.0 is a TypeError.
    given = (("stats", stats), *sorted(options.items()))
    try:
        labeler = _labeler(tuple((name, type(value), value) for name, value in given))
    except TypeError:  # an unhashable value: checked without the cache
        labeler = Labeler(stats=stats, **options)
    return labeler(array, out=out, batch=batch)


@functools.lru_cache(maxsize=64)
def _labeler(options: tuple[tuple[str, type, Any], ...]) -> Labeler:
    """The Labeler of `label`'s keywords (name, type, value), made once."""
    return Labeler(**{name: value for name, _, value in options})


def _options_signature(before: list[inspect.Parameter], after: list[inspect.Parameter]) -> Any:
    """The signature of a function that takes the labeling keywords (API_OPTIONS)
    between `before` and `after`, for help() and IDEs: the keywords are written once,
    in options.py."""
    keywords = [
        inspect.Parameter(
            o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default, annotation=o.api
        )
        for o in API_OPTIONS
    ]
    return inspect.Signature([*before, *keywords, *after])


def _keyword(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


_ARRAY = inspect.Parameter("array", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Any)
label.__signature__ = _options_signature(  # type: ignore[attr-defined]
    [_ARRAY],
    [
        _keyword("stats", True, bool),
        _keyword("out", None, Any),
        _keyword("batch", None, bool | None),
    ],
)
Labeler.__signature__ = _options_signature([], [_keyword("stats", True, bool)])  # type: ignore[attr-defined]


def _known(options: Mapping[str, Any], function: str) -> None:
    """TypeError, as Python raises it, for a keyword that is not a labeling option."""
    names = [option.name for option in API_OPTIONS]
    for name in options:
        if name not in names:
            close = close_names(name, names)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise BadType(f"{function}() got an unexpected keyword argument '{name}'{hint}")


def _shape(array: Any, batch: bool | None, rank: int) -> tuple[int, ...]:
    """The array's shape, checked by batch_layout (a single image stays 2-D, a single
    volume 3-D)."""
    shape = tuple(int(n) for n in array.shape)
    batch_layout(shape, batch, rank)
    return shape


def _host_array(array: Any) -> np.ndarray:
    """`array` as numpy (numpy.asarray) in native byte order, int64/uint64/float16 taken as
    _NARROWED says; BadType for what is not an array of numbers."""
    try:
        host = np.asarray(array)
    except Exception as error:  # ragged lists and the like
        raise BadType(
            f"{_SOURCE}: expected an array of numbers (numpy, CuPy, PyTorch, DLPack, or "
            f"nested lists), not {type(array).__name__} ({type(error).__name__}: {error})"
        ) from None
    if host.dtype.kind not in "biuf":
        raise BadType(
            f"{_SOURCE}: expected an array of numbers (numpy, CuPy, PyTorch, DLPack, or "
            f"nested lists), got {type(array).__name__} of dtype {host.dtype}"
        )
    if not host.dtype.isnative:  # NIfTI, FITS and other big-endian files read as they are stored
        host = host.astype(host.dtype.newbyteorder("="))
    targets = _NARROWED.get(host.dtype)
    if targets is None:
        return host
    if host.dtype.kind == "f":
        return host.astype(targets[0])
    low, high = (int(host.min()), int(host.max())) if host.size else (0, 0)
    for target in targets:
        info = np.iinfo(target)
        if info.min <= low and high <= info.max:
            return host.astype(target)
    raise BadValue(
        f"{_SOURCE}: {host.dtype} values {low}..{high} do not fit in 32 bits, which labeling "
        "takes (int32, uint32); convert them, e.g. with astype(np.float64)"
    )


@functools.lru_cache(maxsize=16)
def _backend(device: str) -> Backend:
    """The backend of `device` (auto, cpu, cuda, cuda:N), made once per process."""
    return make_backend(device, None, _no_notice, named=f"{_SOURCE}: device={device!r}")


def _no_notice(message: str) -> None:
    """auto's fallback to the CPU says nothing here: the caller asked for auto."""
