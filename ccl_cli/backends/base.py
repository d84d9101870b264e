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
from ..stats import StatsTable


@dataclass
class BatchResult:
    """What a backend returns for one batch.

    labels: (N, H, W) uint32, on the same kind of array as the input batch.
    tables: statistics of each image's kept components, in label order.
    components: K per image, before min-area filtering.
    """

    labels: Any
    tables: list[StatsTable]
    components: list[int]

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


def split_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) bounds that cut `count` images into `parts` contiguous, non-empty parts.

    Part sizes differ by at most one; fewer parts when there are fewer images.
    """
    cuts = np.linspace(0, count, min(parts, count) + 1).round().astype(int).tolist()
    return list(pairwise(cuts))


#: One part of a batch: (part index, lo, hi) -> its tables and component counts.
PartLabeler = Callable[[int, int, int], tuple[list[StatsTable], list[int]]]


def label_in_parts(
    label_part: PartLabeler, bounds: Sequence[tuple[int, int]]
) -> tuple[list[StatsTable], list[int]]:
    """label_part(i, lo, hi) for every part, each in its own thread; tables and counts in order.

    The parts write their labels into disjoint slices of one output array, so
    nothing is concatenated afterwards.
    """
    if len(bounds) == 1:
        return label_part(0, *bounds[0])
    with ThreadPoolExecutor(len(bounds)) as pool:
        futures = [pool.submit(label_part, i, lo, hi) for i, (lo, hi) in enumerate(bounds)]
        results = [future.result() for future in futures]
    return (
        [table for tables, _ in results for table in tables],
        [count for _, counts in results for count in counts],
    )
