"""Device arrays of CuPy, PyTorch and other producers as CuPy views, on the caller's stream.

A PyTorch CUDA tensor is viewed in place (its pointer, shape and strides: no
copy, no DLPack stream handshake, which would record an event per call), and
its work goes on `torch.cuda.current_stream()`, wrapped once per stream as a
CuPy ExternalStream. Results for it are PyTorch tensors allocated by PyTorch
on that stream. A CuPy array's work goes on CuPy's current stream. torch is
never imported here: a tensor can only exist once the caller has imported it.
"""

from __future__ import annotations

import sys
import threading
import warnings
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from .loader import import_cupy

#: PyTorch dtypes with a numpy dtype of the same name that labeling takes or returns.
_TORCH_DTYPE_NAMES: tuple[str, ...] = ("bool", "uint8", "int8", "uint16", "int16", "uint32")
_TORCH_DTYPE_NAMES += ("int32", "int64", "float32", "float64")
_streams: dict[tuple[int, int], Any] = {}  # (device, handle) -> CuPy ExternalStream
_streams_lock = threading.Lock()


def torch_dtype_to_numpy(dtype: Any) -> np.dtype:
    """The numpy dtype of a PyTorch dtype that labeling takes or returns (ValueError otherwise)."""
    torch = sys.modules["torch"]
    for name in _TORCH_DTYPE_NAMES:
        if getattr(torch, name, None) == dtype:
            return np.dtype(name)
    raise ValueError(f"unsupported dtype {dtype}")


def cupy_view(tensor: Any) -> Any:
    """A CuPy array over a PyTorch CUDA tensor's memory (same shape, strides, dtype)."""
    cupy = import_cupy()
    dtype = torch_dtype_to_numpy(tensor.dtype)
    itemsize = dtype.itemsize
    shape = tuple(tensor.shape)
    strides = tuple(s * itemsize for s in tensor.stride())
    extent = itemsize + sum((d - 1) * s for d, s in zip(shape, strides, strict=True) if d > 0)
    if 0 in shape:
        extent = 0
    device = tensor.device.index
    memory = cupy.cuda.UnownedMemory(tensor.data_ptr(), extent, tensor, device)
    return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(memory, 0), strides)


class TorchSide:
    """The PyTorch side of one call: the current stream of the tensor's device (as a
    CuPy stream context) and allocations of PyTorch tensors on it.

    Labels and counts come back as int32 (PyTorch has few operations on uint32;
    labels are below 2**31, an image's pixel limit, so the values are the same).
    """

    def __init__(self, tensor: Any) -> None:
        torch = sys.modules["torch"]
        self._torch = torch
        self.device = tensor.device
        handle = int(torch.cuda.current_stream(self.device).cuda_stream)
        self.stream = external_stream(self.device.index, handle)
        self._dtypes = {
            np.dtype(np.uint32): torch.int32,
            np.dtype(np.int64): torch.int64,
        }

    def empty(self, shape: tuple[int, ...], dtype: Any) -> tuple[Any, Any]:
        """A PyTorch tensor (int32 for u32, see the class) and its CuPy view as `dtype`."""
        dtype = np.dtype(dtype)
        tensor = self._torch.empty(shape, dtype=self._dtypes[dtype], device=self.device)
        return tensor, cupy_view(tensor).view(dtype)

    def context(self) -> AbstractContextManager[Any]:
        stream: AbstractContextManager[Any] = self.stream
        return stream


def external_stream(device: int, handle: int) -> Any:
    """The CuPy ExternalStream of a stream handle, made once per handle."""
    key = (device, handle)
    stream = _streams.get(key)
    if stream is None:
        with _streams_lock:
            stream = _streams.get(key)
            if stream is None:
                with warnings.catch_warnings():  # CuPy 14 prefers Stream.from_external
                    warnings.simplefilter("ignore", DeprecationWarning)
                    stream = import_cupy().cuda.ExternalStream(handle, device)
                _streams[key] = stream
    return stream


def as_cupy(array: Any) -> Any:
    """A CuPy view of a device array that is not a PyTorch tensor (CuPy, CUDA array
    interface or DLPack)."""
    cupy = import_cupy()
    if isinstance(array, cupy.ndarray):
        return array
    if hasattr(array, "__cuda_array_interface__"):
        return cupy.asarray(array)
    return cupy.from_dlpack(array)


def no_stream() -> AbstractContextManager[Any]:
    """The context of a CuPy input: its current stream stays."""
    return nullcontext()
