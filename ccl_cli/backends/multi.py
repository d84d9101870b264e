"""Several backends as one: each batch is split over them and labeled in parallel.

`--devices 0,1` gives one CudaBackend per GPU; a batch of N images becomes
contiguous parts of about N / GPUs images, one per GPU, each writing its
labels straight into its slice of the output. The parts are labeled at the
same time from the calling thread, a step of each in turn (steps.interleaved:
CUDA's steps issue work and return without waiting for it), so no threads
contend for the GIL. Images never depend on each other, so the result is the
same as one backend's, image for image.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..contract.params import LabelParams
from .base import Backend, BatchResult, joined, label_dtype, split_bounds
from .steps import interleaved


class MultiDeviceBackend(Backend):
    """Spreads every batch over `backends` (one per device); host (numpy) batches only."""

    def __init__(self, backends: Sequence[Backend]) -> None:
        if not backends:
            raise ValueError("MultiDeviceBackend needs at least one backend")
        self.backends = list(backends)
        self.name = "+".join(backend.name for backend in self.backends)

    def label(
        self,
        batch: np.ndarray,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
        statistics: bool = True,
    ) -> BatchResult:
        """Label the (N, H, W) numpy batch, each device into its slice of `out` (backends.base)."""
        batch = np.asarray(batch)
        labels = self.empty_batch(batch.shape, label_dtype(narrow)) if out is None else out
        bounds = split_bounds(len(batch), len(self.backends))
        parts = [
            backend.label_steps(batch[lo:hi], params, labels[lo:hi], narrow)
            for backend, (lo, hi) in zip(self.backends, bounds, strict=False)
        ]
        return joined(labels, interleaved(parts), params)

    def batch_budget_bytes(self) -> int:
        """The backends' budgets together: an auto batch fills every device."""
        return sum(backend.batch_budget_bytes() for backend in self.backends)

    def empty_batch(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """The first backend's kind of memory (page-locked memory serves every GPU)."""
        return self.backends[0].empty_batch(shape, dtype)
