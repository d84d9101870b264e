"""`ccl_cli.label` on a dask array: the options checked as for in-memory volumes, then the
seams solved (solve.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..contract.params import SUPPORTED_DTYPES, VOLUME_CONNECTIVITIES, LabelParams
from ..errors import BadType, BadValue
from .pieces import ChunkLabeler
from .solve import Solved, solve

#: Where errors say they come from.
SOURCE = "ccl_cli.label"
#: dtypes a chunk is taken in besides the supported ones (the API narrows them per chunk).
_NARROWED = (np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float16))


def checked(array: Any, params: LabelParams, source: str = SOURCE) -> None:
    """BadValue/BadType (one line) for what chunked labeling does not take: `params` (the
    options, checked as for any volume) or the dask array `array`."""
    if params.connectivity not in VOLUME_CONNECTIVITIES:
        raise BadValue(
            f"{source}: a chunked array is labeled as a volume: pass connectivity 6, 18 or 26"
        )
    if params.morphology or params.smooth:
        raise BadValue(
            f"{source}: erode, dilate, open, close and smooth are not available for chunked "
            "arrays (they would need overlapping chunks)"
        )
    if array.ndim != 3:
        raise BadValue(
            f"{source}: a chunked volume is (D, H, W); got {array.ndim}-D shape {array.shape}"
        )
    dtype = np.dtype(array.dtype).newbyteorder("=")  # (a chunk is byte-swapped as it is labeled)
    if dtype not in SUPPORTED_DTYPES and dtype not in _NARROWED:
        raise BadType(f"{source}: {dtype} arrays are not labeled; convert it with astype")


def label_dask(
    array: Any,
    label: Callable[..., tuple[Any, Any]],
    params: LabelParams,
    options: dict[str, Any],
    *,
    stats: bool,
    out: Any,
    batch: bool | None,
) -> tuple[Any, Any]:
    """ccl_cli.label (`label`, with `options`, which resolve to `params`) for a dask array:
    (labels, [table]) or (labels, count), the labels a lazy dask array with the input's
    chunks (ccl_cli.label's docstring)."""
    if out is not None:
        raise BadValue(f"{SOURCE}: out is not taken for a dask array (its labels are lazy)")
    if batch:
        raise BadValue(f"{SOURCE}: a dask array is one volume, not a batch (batch=True)")
    solved = solve_array(array, ChunkLabeler(label, options), params)
    if stats:
        return solved.labels(), [solved.table()]
    return solved.labels(), np.array(solved.count, np.uint32).reshape(())


def solve_array(
    array: Any, labeler: ChunkLabeler, params: LabelParams, source: str = SOURCE
) -> Solved:
    """The seams of `array` solved, its chunks labeled by `labeler` (checked first)."""
    checked(array, params, source)
    return solve(array, labeler, params, source)
