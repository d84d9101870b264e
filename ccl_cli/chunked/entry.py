"""`ccl_cli.label` on a dask array: the options checked as for in-memory volumes, then the
seams solved (solve.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..contract.params import SUPPORTED_DTYPES, VOLUME_CONNECTIVITIES, LabelParams
from ..errors import BadType, BadValue
from .solve import Solved, solve

#: Where errors say they come from.
SOURCE = "ccl_cli.label"
#: dtypes a chunk is taken in besides the supported ones (the API narrows them per chunk).
_NARROWED = (np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.float16))


def checked(array: Any, options: dict[str, Any], source: str = SOURCE) -> LabelParams:
    """The labeling parameters of `options` for the dask array `array`, or BadValue/BadType
    (one line) for what chunked labeling does not take."""
    from ..api import Labeler

    params = Labeler(**options).params
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
    dtype = np.dtype(array.dtype)
    if dtype not in SUPPORTED_DTYPES and dtype not in _NARROWED:
        raise BadType(f"{source}: {dtype} arrays are not labeled; convert it with astype")
    return params


def label_dask(
    array: Any, *, stats: bool, out: Any, batch: bool | None, options: dict[str, Any]
) -> tuple[Any, Any]:
    """ccl_cli.label for a dask array: (labels, [table]) or (labels, count), the labels a
    lazy dask array with the input's chunks (ccl_cli.label's docstring)."""
    if out is not None:
        raise BadValue(f"{SOURCE}: out is not taken for a dask array (its labels are lazy)")
    if batch:
        raise BadValue(f"{SOURCE}: a dask array is one volume, not a batch (batch=True)")
    solved = solve_array(array, options)
    if stats:
        return solved.labels, [solved.table()]
    return solved.labels, np.array(solved.count, np.uint32).reshape(())


def solve_array(array: Any, options: dict[str, Any], source: str = SOURCE) -> Solved:
    """The seams of `array` solved with `options` (checked first)."""
    params = checked(array, options, source)
    return solve(array, options, params, source)
