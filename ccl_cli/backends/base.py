"""The seam between the pipeline and the compute backends.

A backend labels a batch: N images of one shape and dtype stacked as (N, H, W).
It returns dense labels per image (1..K' in raster order of each component's
first pixel, 0 for background and removed components) and one statistics table
per image. Backends never mix images of a batch and must agree bit for bit.

Label images go to the host as uint32 unless the caller asks to `narrow`
them: then the labels array is uint16, and an image whose kept labels do not
fit 16 bits (rare: tens of thousands of components) comes back on its own as
uint32, in BatchResult.wide. That halves the labels' memory and their copy
from the device, and spares the 16-bit PNG writer a pass; BatchResult.image
gives each image's labels whichever way they came.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from ..contract.outlines import Outlines
from ..contract.params import LabelParams
from ..contract.stats import StatsTable

#: The largest label a narrowed (uint16) label image can hold.
NARROW_LIMIT = 65535


def usable_cores() -> int:
    """The CPU cores this process may run on (taskset and cgroup cpusets included)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass
class BatchResult:
    """What a backend returns for one batch.

    labels: (N, H, W) uint32 (uint16 when narrowed), on the same kind of array
        as the input batch; read images with `image` (module docstring).
    tables: statistics of each image's kept components, in label order.
    components: K per image, before min-area filtering.
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
        """Label every image of `batch` (N, H, W); see the module docstring.

        out: for a numpy batch, an (N, H, W) array of label_dtype(narrow) to
        write the labels into (then BatchResult.labels is `out`); None
        allocates one.
        narrow: for a numpy batch, uint16 labels (module docstring); a device
        batch's labels stay uint32.
        statistics: False lets a backend skip the tables and give only the counts
        (BatchResult.counts); one that makes them anyway returns them as usual.
        """

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
