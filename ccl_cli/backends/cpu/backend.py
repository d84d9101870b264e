"""The CPU reference backend: batches labeled by the compiled engine (labels.py) on every
core, outlines by its compiled tracer (outlines.py), stages with numpy."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...contract.outlines import Outlines
from ...contract.params import SUPPORTED_DTYPES, LabelParams
from ..base import Backend, BatchResult, new_labels
from .labels import engine_threads, label_batch
from .outlines import outlines
from .volumes import label_volumes


class CpuBackend(Backend):
    """Labels batches on the CPU; the reference every other backend must match."""

    name = "cpu"

    def __init__(self, threads: int | None = None) -> None:
        self.threads = max(1, threads or os.cpu_count() or 1)

    def label(
        self,
        batch: np.ndarray,
        params: LabelParams,
        out: np.ndarray | None = None,
        narrow: bool = False,
        statistics: bool = True,
    ) -> BatchResult:
        """Label each image of the (N, H, W) numpy batch (into `out`); see backends.base.
        With a volume connectivity (params.rank 3) each volume of an (N, D, H, W) batch,
        into uint32 labels (volumes.py), with statistics where asked for.

        With `narrow`, image labels are uint16 (backends.base): the copy into
        `out` writes half the bytes, and the PNG writer needs no cast. Without
        `statistics` no table is made: BatchResult.counts holds K' per image.
        """
        batch = np.asarray(batch)
        if batch.ndim != params.rank + 1:
            axes = "(N, H, W)" if params.rank == 2 else "(N, D, H, W)"
            raise ValueError(f"a batch is {axes}, got shape {batch.shape}")
        if batch.dtype not in SUPPORTED_DTYPES:
            raise ValueError(f"unsupported dtype {batch.dtype}")
        labels = new_labels(self, batch.shape, params, narrow) if out is None else out
        if params.rank == 3:
            threads = engine_threads(self.threads)
            volumes = label_volumes(batch, params, threads, labels, statistics, out is None)
            counts = None if statistics else np.array(volumes.kept, np.int64)
            return BatchResult(labels, volumes.tables or [], volumes.components, counts=counts)
        labeled = label_batch(batch, params, self.threads, labels, statistics)
        result = BatchResult(
            labels,
            labeled.tables or [],
            labeled.components,
            wide=labeled.wide,
            counts=None if statistics else labeled.kept,
        )
        if params.polygons:
            images = range(len(batch))

            def one(i: int) -> Outlines:
                return outlines(np.asarray(result.image(i)), int(labeled.kept[i]))

            if self.threads > 1 and len(batch) > 1:
                with ThreadPoolExecutor(min(self.threads, len(batch))) as pool:
                    result.polygons = list(pool.map(one, images))
            else:
                result.polygons = [one(i) for i in images]
        return result

    def batch_budget_bytes(self) -> int:
        """Input bytes per batch: a few images of a camera's size (four 640x480 depth maps).

        A batch is labeled once all of it is decoded, and its outputs are written after:
        small batches let decoding, labeling and writing overlap. The engine spreads even
        one image over every thread, so a small batch leaves no core idle.
        """
        return 5 << 19
