"""The caller's device arrays labeled where they are (CudaBackend.label_device, the Python
API's CuPy arrays, PyTorch CUDA tensors and other CUDA-array-interface or DLPack arrays).

The work goes on the array's own device and the caller's current stream (CuPy's, or
PyTorch's for a tensor: frameworks.py); labels, tables and counts are allocated in the
input's kind of array. Images go through device.py's label_table and label_counts,
volumes (params.rank 3) through volume_table and volume_counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...contract.params import SUPPORTED_DTYPES, LabelParams
from ...errors import BadType, BadValue
from ..base import checked_out, is_torch_tensor
from .device import cupy_empty, label_counts, label_table, volume_counts, volume_table
from .frameworks import TorchSide, as_cupy, cupy_view, no_stream, torch_dtype_to_numpy
from .loader import import_cupy

#: The dtypes labeling takes, named in the messages about a tensor's dtype.
_TAKEN = ", ".join(dtype.name for dtype in SUPPORTED_DTYPES)


def label_device_array(
    array: Any,
    batched: bool,
    params: LabelParams,
    out: Any,
    statistics: bool,
    check_dtype: Callable[[np.dtype], None],
    device_index: int | None,
) -> tuple[Any, Any]:
    """backends.base.Backend.label_device on CUDA (see there)."""
    torch_side = TorchSide(array) if is_torch_tensor(array) else None
    if torch_side is not None:
        try:
            torch_dtype_to_numpy(array.dtype)
        except ValueError:
            raise BadType(
                f"{array.dtype} tensors are not labeled (take {_TAKEN}); convert it with .to()"
            ) from None
    values = cupy_view(array) if torch_side is not None else as_cupy(array)
    check_dtype(np.dtype(values.dtype))
    device = values.device
    if device_index is not None and device_index != device.id:
        raise BadValue(f"the array is on cuda:{device.id}, not cuda:{device_index}")
    shape = tuple(int(n) for n in values.shape)
    batch = values if batched else values[None]
    empty = torch_side.empty if torch_side is not None else cupy_empty
    stream = torch_side.context() if torch_side is not None else no_stream()
    volumes = params.rank == 3
    with device, stream:
        labels_native, labels = _labels_out(out, shape, empty, torch_side)
        labels = labels if batched else labels[None]
        if statistics:
            table, _ = (volume_table if volumes else label_table)(batch, params, labels, empty)
            return labels_native, table
        counts_native, counts = empty((batch.shape[0],), np.uint32)
        (volume_counts if volumes else label_counts)(batch, params, labels, counts)
    return labels_native, counts_native if batched else counts_native[0]


def _labels_out(
    out: Any, shape: tuple[int, ...], empty: Any, torch_side: TorchSide | None
) -> tuple[Any, Any]:
    """The labels array (as returned, and as CuPy): `out` checked, or a new one."""
    if out is None:
        return empty(shape, np.uint32)
    if torch_side is not None:
        if not is_torch_tensor(out) or out.device != torch_side.device:
            raise BadType(f"out must be a tensor on {torch_side.device} like the input")
        if tuple(out.shape) != shape or not out.is_contiguous():
            raise BadValue(f"out must be a contiguous tensor of shape {shape}")
        view = cupy_view(out) if str(out.dtype) in ("torch.int32", "torch.uint32") else None
        if view is None:
            raise BadType(f"out must be int32 or uint32, not {out.dtype}")
        return out, view.view(np.uint32)
    cupy = import_cupy()
    return out, checked_out(out, shape, cupy.ndarray)
