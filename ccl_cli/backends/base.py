"""The seam between the pipeline and the compute backends.

A backend labels a batch: N images of one shape and dtype stacked as (N, H, W), or,
where the parameters' connectivity labels volumes (LabelParams.rank 3), N volumes stacked
as (N, D, H, W). The rank is a property of the work, not of the backend: every backend
takes both, host (numpy) batches through `label` and, where it has a device, the
caller's device arrays through `label_device`. It returns dense labels per image or
volume (1..K' in raster order of each component's first pixel or voxel, 0 for background
and removed components) and one statistics table per image (volume). Backends never mix
the images of a batch and must agree bit for bit.

Label images go to the host as uint32 unless the caller asks to `narrow`
them: then the labels array is uint16, and an image whose kept labels do not
fit 16 bits (rare: tens of thousands of components) comes back on its own as
uint32, in BatchResult.wide. That halves the labels' memory and their copy
from the device, and spares the 16-bit PNG writer a pass; BatchResult.image
gives each image's labels whichever way they came.
"""

from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from ..contract.outlines import Outlines
from ..contract.params import LabelParams
from ..contract.stats import StatsTable
from ..errors import BadType, BadValue

#: The largest label a narrowed (uint16) label image can hold.
NARROW_LIMIT = 65535


def cuda_index(device: str) -> int | None:
    """N of a device named "cuda:N"; None for "cuda" (the current device) and the others."""
    index = device.partition(":")[2]
    return int(index) if index else None


def usable_cores() -> int:
    """The CPU cores this process may run on (taskset and cgroup cpusets included)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass
class BatchResult:
    """What a backend returns for one batch.

    labels: (N, H, W) uint32 (uint16 when narrowed), or (N, D, H, W) uint32 for volumes,
        on the same kind of array as the input batch; read images with `image` (module
        docstring).
    tables: statistics of each image's kept components, in label order; empty where
        the statistics were not asked for (then `counts` holds K' per image).
    components: K per image, before min-area filtering (empty where the statistics
        were not asked for).
    polygons: outlines of each image's kept components, when params.polygons.
    wide: when narrowed, the (H, W) uint32 labels of the images whose kept
        labels exceed NARROW_LIMIT, by index (their rows of `labels` are unused).
    backend: the name of the backend that labeled the batch, where one backend
        hands batches to others (hybrid.py); empty otherwise.
    counts: K' per image where the backend made no tables (label's `statistics`
        False; `tables` is then empty); None otherwise.
    """

    labels: Any
    tables: list[StatsTable]
    components: list[int]
    polygons: list[Outlines] | None = None
    wide: dict[int, Any] = field(default_factory=dict)
    backend: str = ""
    counts: np.ndarray | None = None

    @property
    def kept(self) -> list[int]:
        """K' per image: components left after min-area filtering."""
        if self.counts is not None:
            return self.counts.tolist()
        return [len(table) for table in self.tables]

    def image(self, index: int) -> Any:
        """The (H, W) labels of image `index`, uint16 where they were narrowed."""
        wide = self.wide.get(index)
        return self.labels[index] if wide is None else wide


def label_dtype(narrow: bool) -> np.dtype:
    """The dtype of a batch's labels array: uint16 when narrowed (module docstring)."""
    return np.dtype(np.uint16 if narrow else np.uint32)


def new_labels(
    backend: Backend, shape: tuple[int, ...], params: LabelParams, narrow: bool
) -> np.ndarray:
    """A host batch's labels when the caller gives no `out`: for images the backend's kind
    of memory (empty_batch) of label_dtype(narrow); for volumes (params.rank 3) uint32 in
    plain zeroed memory, whose pages are mapped as the engines write the foreground."""
    if params.rank == 3:
        check_labels_fit(shape)
        return np.zeros(shape, np.uint32)
    return backend.empty_batch(shape, label_dtype(narrow))


def check_labels_fit(shape: tuple[int, ...]) -> None:
    """MemoryError where the uint32 labels of `shape` need more bytes than this machine
    has memory (checked before anything is allocated)."""
    need = 4 * int(np.prod(shape, dtype=object))
    total = _physical_memory()
    if total is not None and need > total:
        raise MemoryError(
            f"the labels of a {'x'.join(map(str, shape))} volume need {need / 2**30:.1f} GiB "
            f"(4 bytes a voxel), more than this machine's {total / 2**30:.1f} GiB of memory"
        )


def _physical_memory() -> int | None:
    """Bytes of this machine's memory, where the system says."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


class Wait(Protocol):
    """What a labeling's next step waits for (a CUDA event)."""

    @property
    def done(self) -> bool:
        """Whether it has happened (never blocks)."""
        ...

    def synchronize(self) -> None:
        """Block until it has happened (releasing Python's GIL meanwhile)."""
        ...


#: A labeling in steps (a generator): each next() does a share of the work and
#: returns before waiting on a device again where the backend can, yielding
#: what its next step will wait for (a Wait), or None when it will not wait.
#: The generator's return value is the batch's result (backends.steps runs them).
LabelSteps = Generator[Wait | None, None, BatchResult]


class Backend(ABC):
    """What the pipeline needs from a compute backend, with the defaults most backends
    share: a labeling in one step, plain numpy memory for batches."""

    #: What labeled, for --json and the run record (cpu, cuda, cuda+cuda).
    name: str = ""

    @abstractmethod
    def label(
        self,
        batch: Any,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
        statistics: bool = True,
    ) -> BatchResult:
        """Label every image of `batch` (N, H, W), or with params.rank 3 every volume of
        `batch` (N, D, H, W); see the module docstring.

        out: for a numpy batch, an array of the batch's shape and label_dtype(narrow) to
        write the labels into (then BatchResult.labels is `out`); None allocates one.
        A volume's `out` is uint32 and all 0 where it is None (the engines then write
        the foreground alone).
        narrow: for a numpy batch of images, uint16 labels (module docstring); a device
        batch's labels, and volumes', stay uint32.
        statistics: False lets a backend skip the tables and give only the counts
        (BatchResult.counts); one that makes them anyway returns them as usual.
        """

    def label_device(
        self,
        array: Any,
        batched: bool,
        params: LabelParams,
        out: Any,
        statistics: bool,
        check_dtype: Callable[[np.dtype], None],
        device: int | None = None,
    ) -> tuple[Any, Any]:
        """Label a device array (is_device_array): one image (H, W) or volume (D, H, W),
        or with `batched` a batch of them, on the array's own device and the caller's
        current stream (the Python API's device arrays).

        out: None, or the caller's array for the labels (checked here: checked_out).
        check_dtype raises for a dtype or background labeling does not take, before any
        work. device: the CUDA device the caller named (BadValue for an array on
        another), None for any.
        Returns (labels, table) with `statistics` (a DeviceTable whose columns stay on
        the device), else (labels, K' per image), in the input's kind of array.
        This default is that of a backend without a device.
        """
        raise BadValue(f"the {self.name} backend labels host (numpy) arrays only")

    def label_steps(
        self, batch: np.ndarray, params: LabelParams, out: np.ndarray, narrow: bool
    ) -> LabelSteps:
        """label(batch, params, out, narrow) of a numpy batch as a labeling in steps
        (LabelSteps), for a caller that runs several at once (backends.steps).

        This default labels in one step: for backends that cannot return before
        waiting (the CPU's threads; backends whose parts have steps of their own).
        """
        yield from ()  # a generator that finishes on its first next()
        return self.label(batch, params, out, narrow)

    @abstractmethod
    def batch_budget_bytes(self) -> int:
        """How many bytes of input one batch may hold (for --batch-size auto)."""

    def empty_batch(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialized numpy array to stack a batch (or its labels) in.

        The memory suits the backend: this default is plain numpy memory; CUDA's is
        page-locked, so that copies from it need no staging. It is released when the
        last view of it is gone.
        """
        return np.empty(shape, dtype)


def is_torch_tensor(array: Any) -> bool:
    """Whether `array` is a PyTorch tensor (without importing torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(array, torch.Tensor)


def is_device_array(array: Any) -> bool:
    """True for arrays in CUDA memory: CuPy arrays and anything exposing
    __cuda_array_interface__ or a CUDA DLPack device, PyTorch CUDA tensors included
    (without importing CuPy or torch)."""
    if is_torch_tensor(array):
        return bool(array.device.type == "cuda")
    if hasattr(array, "__cuda_array_interface__"):
        return True
    device = getattr(array, "__dlpack_device__", None)
    if device is None or isinstance(array, np.ndarray):
        return False
    return int(device()[0]) in (2, 13)  # kDLCUDA, kDLCUDAManaged


def array_device(array: Any) -> int | None:
    """The CUDA device a device array is on, where the array says so without CuPy (a
    tensor's device, CuPy's device, DLPack's device), else None."""
    if is_torch_tensor(array):
        return array.device.index if array.device.index is not None else 0
    cupy_device = getattr(getattr(array, "device", None), "id", None)
    if isinstance(cupy_device, int):
        return cupy_device
    dlpack = getattr(array, "__dlpack_device__", None)
    if dlpack is not None:
        return int(dlpack()[1])
    return None


def checked_out(out: Any, shape: tuple[int, ...], kind: Any) -> Any:
    """`out` if it is a C-contiguous uint32 array of `kind` and `shape` (a caller's array
    for the labels), else BadType or BadValue."""
    if not isinstance(out, kind):
        raise BadType(f"out must be a {kind.__module__}.{kind.__name__} like the input")
    if np.dtype(out.dtype) != np.uint32:
        raise BadType(f"out must be uint32, got {out.dtype}")
    if tuple(out.shape) != shape:
        raise BadValue(f"out must have shape {shape}, got {out.shape}")
    if not out.flags.c_contiguous:
        raise BadValue("out must be C-contiguous")
    return out


#: The dtypes warm_up labels a tiny image of: what 1-bit, 8-bit and 16-bit images decode to.
WARM_UP_DTYPES = (np.bool_, np.uint8, np.uint16)


def warm_up(backend: Backend, params: LabelParams) -> None:
    """Label a tiny image of each WARM_UP_DTYPES with `params`, so that the first
    real batch does not pay the backend's one-time costs.

    On CUDA those are about a second: CuPy's first elementwise kernel imports
    cupyx and, through it, SciPy; each new kernel is compiled (or loaded from
    CuPy's cache), and memory pools fill. Callers run this while other
    start-up work goes on. It is only an optimization: whatever fails here
    fails again, and is reported, with the first batch.
    """
    for dtype in WARM_UP_DTYPES:
        batch = backend.empty_batch((1, 4, 4), np.dtype(dtype))
        batch[...] = 1
        with suppress(Exception):  # see the docstring
            backend.label(batch, params, narrow=True)


def split_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) bounds that cut `count` images into `parts` contiguous, non-empty parts.

    Part sizes differ by at most one; fewer parts when there are fewer images.
    """
    cuts = np.linspace(0, count, min(parts, count) + 1).round().astype(int).tolist()
    return list(pairwise(cuts))


def joined(labels: Any, parts: Sequence[BatchResult], params: LabelParams) -> BatchResult:
    """The result of a batch whose labels are `labels` from those of its consecutive
    parts, in order (each part's labels are its slice of `labels`)."""
    starts = np.cumsum([0, *(len(part.tables) for part in parts)])[:-1].tolist()
    wide = {
        start + i: image
        for start, part in zip(starts, parts, strict=True)
        for i, image in part.wide.items()
    }
    polygons = [outline for part in parts for outline in part.polygons or []]
    return BatchResult(
        labels,
        [table for part in parts for table in part.tables],
        [count for part in parts for count in part.components],
        polygons if params.polygons else None,
        wide,
    )
