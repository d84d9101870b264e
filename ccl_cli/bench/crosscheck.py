"""Do two engines give the same answer? Component counts, then the labels themselves.

Engines number components differently (OpenCV, cc3d and scipy each have their
own order), so labels are compared up to renumbering: two labelings agree when
they split the pixels into the same components, which is what "equal after
renumbering both to raster order" means. It is checked in linear time: the
map from one labeling's ids to the other's must be consistent both ways.
Two engines that promise gccl's raster-order numbering must agree exactly.
"""

from __future__ import annotations

import numpy as np


def same_components(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether labelings a and b (non-negative ints, 0 background) partition the pixels alike."""
    if a.shape != b.shape:
        return False
    flat_a = a.ravel().astype(np.int64, copy=False)
    flat_b = b.ravel().astype(np.int64, copy=False)
    if not np.array_equal(flat_a == 0, flat_b == 0):
        return False
    for src, dst in ((flat_a, flat_b), (flat_b, flat_a)):
        mapping = np.zeros(int(src.max(initial=0)) + 1, np.int64)
        mapping[src] = dst
        if not np.array_equal(mapping[src], dst):
            return False
    return True


def compare(
    reference: str,
    ref_labels: np.ndarray,
    ref_count: int,
    ref_raster: bool,
    labels: np.ndarray,
    count: int,
    raster: bool,
) -> str | None:
    """Why labels/count disagree with the reference engine's, or None when they agree."""
    if count != ref_count:
        return f"{count} components, {reference} finds {ref_count}"
    if ref_raster and raster:
        if not np.array_equal(labels.astype(np.int64), ref_labels.astype(np.int64)):
            return f"labels differ from {reference}'s (both promise raster order)"
        return None
    if not same_components(labels, ref_labels):
        return f"same count, but the components differ from {reference}'s"
    return None
