"""The seam between the pipeline and the compute backends.

A backend labels a batch: N images of one shape and dtype stacked as (N, H, W).
It returns dense labels per image (1..K' in raster order of each component's
first pixel, 0 for background and removed components) and one statistics table
per image. Backends never mix images of a batch and must agree bit for bit.

Label images go to the host as uint32 unless the caller asks to `narrow`
them: then a backend may hand an image whose kept labels fit 16 bits back as
uint16, in the first half of that image's uint32 slot of the output (each
image's slot is its own, so images narrow independently). That halves the
device-to-host copy and spares the 16-bit PNG writer a pass; BatchResult.image
gives each image's labels whichever way they came.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from ..params import LabelParams
from ..polygons import Outlines
from ..stats import StatsTable

#: The largest label a narrowed (uint16) label image can hold.
NARROW_LIMIT = 65535


@dataclass
class BatchResult:
    """What a backend returns for one batch.

    labels: (N, H, W) uint32, on the same kind of array as the input batch;
        an image listed in `narrowed` holds uint16 labels in the first half of
        its slot instead (see the module docstring; read images with `image`).
    tables: statistics of each image's kept components, in label order.
    components: K per image, before min-area filtering.
    polygons: outlines of each image's kept components, when params.polygons.
    narrowed: per image, whether its labels are uint16; empty when none are.
    """

    labels: Any
    tables: list[StatsTable]
    components: list[int]
    polygons: list[Outlines] | None = None
    narrowed: list[bool] = field(default_factory=list)

    @property
    def kept(self) -> list[int]:
        """K' per image: components left after min-area filtering."""
        return [len(table) for table in self.tables]

    def image(self, index: int) -> Any:
        """The (H, W) labels of image `index`: uint32, or uint16 when it was narrowed."""
        slot = self.labels[index]
        return narrow_view(slot) if self.narrowed and self.narrowed[index] else slot


def narrow_view(slot: np.ndarray) -> np.ndarray:
    """The uint16 (H, W) labels kept in the first half of an image's (H, W) uint32 slot."""
    height, width = slot.shape
    return slot.reshape(-1).view(np.uint16)[: height * width].reshape(height, width)


class Backend(Protocol):
    """What the pipeline needs from a compute backend."""

    name: str

    def label(
        self,
        batch: Any,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
    ) -> BatchResult:
        """Label every image of `batch` (N, H, W); see the module docstring.

        out: for a numpy batch, an (N, H, W) uint32 array to write the labels
        into (then BatchResult.labels is `out`); None allocates one.
        narrow: for a numpy batch, images whose kept labels fit NARROW_LIMIT
        may come back as uint16 (BatchResult.narrowed says which).
        """
        ...

    def batch_budget_bytes(self) -> int:
        """How many bytes of input one batch may hold (for --batch-size auto)."""
        ...

    def empty_batch(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An uninitialized numpy array to stack a batch (or its labels) in.

        The memory suits the backend: page-locked for CUDA, whose copies from
        it need no staging. It is released when the last view of it is gone.
        """
        ...

    def page_lock(self, address: int, size: int) -> Callable[[], None]:
        """Make host memory that batches and labels will live in fast to copy.

        For memory this process did not allocate with empty_batch (the
        labeling service's shared blocks): CUDA page-locks it, so copies need
        no staging; elsewhere nothing happens. Returns the undo, to be called
        before the memory is unmapped.
        """
        ...


def warm_up(backend: Backend, params: LabelParams) -> None:
    """Label one tiny image with `params`, so that the first real batch does not pay
    the backend's one-time costs.

    On CUDA those are about a second: CuPy's first elementwise kernel imports
    cupyx and, through it, SciPy; kernels load and memory pools fill. Callers
    run this while other start-up work goes on. It is only an optimization:
    whatever fails here fails again, and is reported, with the first batch.
    """
    batch = backend.empty_batch((1, 4, 4), np.dtype(np.uint8))
    batch[...] = 1
    with suppress(Exception):  # see the docstring
        backend.label(batch, params, narrow=True)


def nothing_to_undo() -> None:
    """The undo of a page_lock that had nothing to do."""


def split_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) bounds that cut `count` images into `parts` contiguous, non-empty parts.

    Part sizes differ by at most one; fewer parts when there are fewer images.
    """
    cuts = np.linspace(0, count, min(parts, count) + 1).round().astype(int).tolist()
    return list(pairwise(cuts))


@dataclass
class Labeled:
    """What labeling some images of a batch gives besides their labels, per image:
    statistics tables, K before min-area, outlines (empty unless params.polygons),
    and whether the labels were narrowed (empty when none were)."""

    tables: list[StatsTable]
    components: list[int]
    outlines: list[Outlines]
    narrowed: list[bool] = field(default_factory=list)

    @classmethod
    def of(cls, result: BatchResult) -> Labeled:
        """The part of a BatchResult besides its labels."""
        return cls(result.tables, result.components, result.polygons or [], result.narrowed)


#: One part of a batch: (part index, lo, hi) -> what labeling it gave.
PartLabeler = Callable[[int, int, int], Labeled]


def joined(parts: Sequence[Labeled]) -> Labeled:
    """The results of consecutive parts of a batch, as one, in order."""
    narrowed = any(part.narrowed for part in parts)
    return Labeled(
        [table for part in parts for table in part.tables],
        [count for part in parts for count in part.components],
        [outline for part in parts for outline in part.outlines],
        [flag for part in parts for flag in _flags(part)] if narrowed else [],
    )


def _flags(part: Labeled) -> list[bool]:
    """A part's narrowed flags, one per image (an empty list means none)."""
    return part.narrowed or [False] * len(part.tables)


def batch_result(labels: Any, labeled: Labeled, params: LabelParams) -> BatchResult:
    """The BatchResult of a whole batch from its labels and what labeling gave."""
    polygons = labeled.outlines if params.polygons else None
    return BatchResult(labels, labeled.tables, labeled.components, polygons, labeled.narrowed)


def label_in_parts(label_part: PartLabeler, bounds: Sequence[tuple[int, int]]) -> Labeled:
    """label_part(i, lo, hi) for every part, each in its own thread; joined in order.

    The parts write their labels into disjoint slices of one output array, so
    nothing is concatenated afterwards.
    """
    if len(bounds) == 1:
        return label_part(0, *bounds[0])
    with ThreadPoolExecutor(len(bounds)) as pool:
        futures = [pool.submit(label_part, i, lo, hi) for i, (lo, hi) in enumerate(bounds)]
        return joined([future.result() for future in futures])
