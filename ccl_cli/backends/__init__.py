"""Compute backends: the CPU reference and the CUDA implementation of one interface."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import BackendUnavailable
from .base import Backend


def make_backend(device: str, threads: int | None, notice: Callable[[str], None]) -> Backend:
    """The backend for --device auto|cpu|cuda|cuda:N.

    auto takes CUDA when a device is usable and otherwise the CPU backend,
    saying why through `notice`; an explicit cuda that cannot be used raises
    BackendUnavailable. CUDA modules are imported only when CUDA is asked for.
    """
    from .cpu import CpuBackend

    if device == "cpu":
        return CpuBackend(threads)
    from .cuda import CudaBackend, cuda_status

    status = cuda_status()
    if device == "auto":
        if status.usable:
            return CudaBackend(0)
        notice(f"no usable CUDA device ({status.reason}); labeling on the CPU")
        return CpuBackend(threads)
    index = int(device.partition(":")[2] or 0)
    if not status.usable:
        raise BackendUnavailable(f"--device {device}: {status.reason}")
    if index >= len(status.devices):
        raise BackendUnavailable(
            f"--device {device}: there are {len(status.devices)} CUDA device(s), "
            f"numbered 0 to {len(status.devices) - 1}"
        )
    return CudaBackend(index)
