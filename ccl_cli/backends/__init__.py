"""Compute backends: the CPU reference and the CUDA implementation of one interface."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import BackendUnavailable, UsageError
from .base import Backend

if TYPE_CHECKING:
    from .cuda.loader import CudaStatus


def make_backend(
    device: str,
    threads: int | None,
    notice: Callable[[str], None],
    devices: str | None = None,
) -> Backend:
    """The backend for --device auto|cpu|cuda|cuda:N, or for --devices all|0,1,...

    auto takes CUDA when a device is usable and otherwise the CPU backend,
    saying why through `notice` where CuPy is installed (without it, the CPU
    is what the installation is for); an explicit cuda that cannot be used raises
    BackendUnavailable. --devices spreads batches over those GPUs. CUDA modules
    are imported only when CUDA is asked for.
    """
    from .cpu.backend import CpuBackend

    if devices is not None and device == "cpu":
        raise UsageError("--devices picks GPUs; it does not go with --device cpu")
    if device == "cpu":
        return CpuBackend(threads)
    from .cuda.backend import CudaBackend
    from .cuda.loader import cuda_status

    status = cuda_status()
    if devices is not None:
        return _multi_device(devices, status)
    if device == "auto":
        if status.usable:
            return CudaBackend(0)
        if status.cupy_version is not None:  # CuPy is there, so a GPU was meant to work
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


def _multi_device(devices: str, status: CudaStatus) -> Backend:
    """One CudaBackend per GPU of --devices (all, or numbers like 0,1), as one backend."""
    from .cuda.backend import CudaBackend
    from .multi import MultiDeviceBackend

    if not status.usable:
        raise BackendUnavailable(f"--devices {devices}: {status.reason}")
    count = len(status.devices)
    indices = range(count) if devices == "all" else [int(i) for i in devices.split(",")]
    missing = [i for i in indices if i >= count]
    if missing:
        raise BackendUnavailable(
            f"--devices {devices}: there are {count} CUDA device(s), numbered 0 to {count - 1}"
        )
    if len(indices) == 1:
        return CudaBackend(indices[0])
    return MultiDeviceBackend([CudaBackend(i) for i in indices])
