"""Several backends as one: each batch is split over them and labeled in parallel.

`--devices 0,1` gives one CudaBackend per GPU; a batch of N images becomes
contiguous parts of about N / GPUs images, one per GPU, labeled at the same
time from one thread each (CuPy releases the GIL while kernels run and copies
move). Images never depend on each other, so the result is the same as one
backend's, image for image.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..params import LabelParams
from .base import Backend, BatchResult


class MultiDeviceBackend:
    """Spreads every batch over `backends` (one per device); host (numpy) batches only."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        if not backends:
            raise ValueError("MultiDeviceBackend needs at least one backend")
        self.backends = list(backends)
        self.name = "+".join(backend.name for backend in self.backends)

    def label(self, batch: np.ndarray, params: LabelParams) -> BatchResult:
        """Label the (N, H, W) numpy batch; see backends.base."""
        batch = np.asarray(batch)
        bounds = np.linspace(0, len(batch), len(self.backends) + 1).round().astype(int)
        parts = [
            (backend, batch[lo:hi])
            for backend, lo, hi in zip(self.backends, bounds[:-1], bounds[1:], strict=True)
            if hi > lo
        ]
        if len(parts) <= 1:
            return self.backends[0].label(batch, params)
        with ThreadPoolExecutor(len(parts)) as pool:
            results = list(pool.map(lambda part: part[0].label(part[1], params), parts))
        return BatchResult(
            labels=np.concatenate([np.asarray(result.labels) for result in results]),
            tables=[table for result in results for table in result.tables],
            components=[count for result in results for count in result.components],
            polygons=(
                [outline for result in results for outline in result.polygons or []]
                if params.polygons
                else None
            ),
        )

    def batch_budget_bytes(self) -> int:
        """The backends' budgets together: an auto batch fills every device."""
        return sum(backend.batch_budget_bytes() for backend in self.backends)
