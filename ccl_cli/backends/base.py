"""The seam between the pipeline and the compute backends.

A backend labels a batch: N images of one shape and dtype stacked as (N, H, W).
It returns dense labels per image (1..K' in raster order of each component's
first pixel, 0 for background and removed components) and one statistics table
per image. Backends never mix images of a batch and must agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol

import numpy as np

from ..params import LabelParams
from ..polygons import Outlines
from ..stats import StatsTable


@dataclass
class BatchResult:
    """What a backend returns for one batch.

    labels: (N, H, W) uint32, on the same kind of array as the input batch.
    tables: statistics of each image's kept components, in label order.
    components: K per image, before min-area filtering.
    polygons: outlines of each image's kept components, when params.polygons.
    """

    labels: Any
    tables: list[StatsTable]
    components: list[int]
    polygons: list[Outlines] | None = None

    @property
    def kept(self) -> list[int]:
        """K' per image: components left after min-area filtering."""
        return [len(table) for table in self.tables]


class Backend(Protocol):
    """What the pipeline needs from a compute backend."""

    name: str

    def label(self, batch: Any, params: LabelParams, out: np.ndarray | None = None) -> BatchResult:
        """Label every image of `batch` (N, H, W); see the module docstring.

        out: for a numpy batch, an (N, H, W) uint32 array to write the labels
        into (then BatchResult.labels is `out`); None allocates one.
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


def split_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) bounds that cut `count` images into `parts` contiguous, non-empty parts.

    Part sizes differ by at most one; fewer parts when there are fewer images.
    """
    cuts = np.linspace(0, count, min(parts, count) + 1).round().astype(int).tolist()
    return list(pairwise(cuts))


#: What labeling some images of a batch gives besides their labels: statistics
#: tables, K before min-area, and outlines (empty unless params.polygons), per image.
Labeled = tuple[list[StatsTable], list[int], list[Outlines]]

#: One part of a batch: (part index, lo, hi) -> what labeling it gave.
PartLabeler = Callable[[int, int, int], Labeled]


def joined(parts: Sequence[Labeled]) -> Labeled:
    """The results of consecutive parts of a batch, as one, in order."""
    return (
        [table for tables, _, _ in parts for table in tables],
        [count for _, counts, _ in parts for count in counts],
        [outline for _, _, outlines in parts for outline in outlines],
    )


def batch_result(labels: Any, labeled: Labeled, params: LabelParams) -> BatchResult:
    """The BatchResult of a whole batch from its labels and what labeling gave."""
    tables, components, polygons = labeled
    return BatchResult(labels, tables, components, polygons if params.polygons else None)


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
