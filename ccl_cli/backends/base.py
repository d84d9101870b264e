"""The seam between the pipeline and the compute backends.

A backend labels a batch: N images of one shape and dtype stacked as (N, H, W).
It returns dense labels per image (1..K' in raster order of each component's
first pixel, 0 for background and removed components) and one statistics table
per image. Backends never mix images of a batch and must agree bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

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

    def label(self, batch: Any, params: LabelParams) -> BatchResult:
        """Label every image of `batch` (N, H, W); see the module docstring."""
        ...

    def batch_budget_bytes(self) -> int:
        """How many bytes of input one batch may hold (for --batch-size auto)."""
        ...
