"""The CPU's polygon tracer: the compiled passes of ccl_cli/native/src/outline.c over one label
image (contract/outlines.py defines the geometry and the canonical order)."""

from __future__ import annotations

import numpy as np

from ...contract.outlines import Outlines, check_offsets
from ...native import gccl_cpu


def outlines(labels: np.ndarray, count: int) -> Outlines:
    """The Outlines of components 1..count of one (H, W) label image, on the CPU.

    Working memory (native/src/outline.h) is bounded per pixel besides the arrays
    returned. Raises ValueError for a label above `count`, AssertionError
    (contract.outlines.check_offsets) when a label 1..count has no pixel.
    """
    if labels.dtype not in (np.uint16, np.uint32):
        labels = labels.astype(np.uint32)
    labels = np.ascontiguousarray(labels)
    areas = np.empty(count, np.int64)
    feature_offsets = np.empty(count + 1, np.int64)
    made: list[np.ndarray] = []

    def allocate(vertices: int, rings: int, parts: int) -> tuple[np.ndarray, ...]:
        made.extend(
            (
                np.empty((vertices, 2), np.int32),
                np.empty(rings + 1, np.int64),
                np.empty(parts + 1, np.int64),
            )
        )
        return tuple(made)

    gccl_cpu.trace_outlines(labels, count, areas, feature_offsets, allocate)
    check_offsets(feature_offsets, count)
    vertices, ring_offsets, part_offsets = made
    return Outlines(vertices, ring_offsets, part_offsets, feature_offsets, areas)
