"""Volumes in chunks (Dask arrays, Zarr): labeled chunk by chunk on a Dask cluster, with
exact seams, into the labels and statistics one-piece labeling gives (docs/design.md,
"Volumes in chunks"). Nothing here imports dask until a chunked volume is labeled."""

from __future__ import annotations

from typing import Any


def is_dask_array(array: Any) -> bool:
    """Whether `array` is a dask array (without importing dask)."""
    kind = type(array)
    return kind.__name__ == "Array" and kind.__module__.split(".")[0] == "dask"
