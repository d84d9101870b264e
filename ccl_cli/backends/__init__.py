"""Compute backends: the CPU reference and the CUDA implementation of one interface."""

from __future__ import annotations

from collections.abc import Callable
from importlib.util import find_spec
from typing import TYPE_CHECKING

from ..errors import BackendUnavailable, UsageError
from .base import Backend, cuda_index, warm_up

if TYPE_CHECKING:
    from ..contract.params import LabelParams
    from .cuda.loader import CudaStatus


def make_backend(
    device: str,
    threads: int | None,
    notice: Callable[[str], None],
    devices: str | None = None,
    cpu_first: LabelParams | None = None,
    named: str = "",
) -> Backend:
    """The backend for --device auto|cpu|cuda|cuda:N, or for --devices all|0,1,...

    auto takes CUDA when a device is usable and otherwise the CPU backend,
    saying why through `notice` where CuPy is installed (without it, the CPU
    is what the installation is for); an explicit cuda that cannot be used raises
    BackendUnavailable. --devices spreads batches over those GPUs. CUDA modules
    are imported only when CUDA is asked for.

    cpu_first (the run's parameters): auto labels on the CPU at once while
    CUDA starts, and warms up, in a thread (hybrid.py); without it auto waits
    for CUDA's start. named: how messages name the device asked for (the Python API's
    words), else as `--device X`.
    """
    if cpu_only(device, devices):
        return _cpu(threads)  # without CuPy auto says nothing (the docstring says why)
    if device == "auto" and devices is None and cpu_first is not None and find_spec("cupy"):
        from .hybrid import HybridBackend

        params = cpu_first
        return HybridBackend(_cpu(threads), lambda: _started_cuda(params), notice, _why)
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
        return _cpu(threads)
    index = cuda_index(device) or 0
    named = named or f"--device {device}"
    if not status.usable:
        raise BackendUnavailable(f"{named}: {status.reason}")
    if index >= len(status.devices):
        raise BackendUnavailable(
            f"{named}: there are {len(status.devices)} CUDA device(s), "
            f"numbered 0 to {len(status.devices) - 1}"
        )
    return CudaBackend(index)


def _cpu(threads: int | None) -> Backend:
    """The CPU backend (its compiled engine loads with it)."""
    from .cpu.backend import CpuBackend

    return CpuBackend(threads)


def cpu_only(device: str, devices: str | None) -> bool:
    """Whether --device and --devices mean the CPU backend without a look for a GPU:
    --device cpu, or auto where CuPy is not installed."""
    if devices is not None and device == "cpu":
        raise UsageError("--devices picks GPUs; it does not go with --device cpu")
    return device == "cpu" or (device == "auto" and devices is None and not find_spec("cupy"))


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


def _started_cuda(params: LabelParams) -> Backend:
    """CUDA device 0, warmed up for `params` (hybrid.py's start); raises when unusable."""
    from .cuda.backend import CudaBackend
    from .cuda.loader import cuda_status

    status = cuda_status()
    if not status.usable:
        raise BackendUnavailable(f"no usable CUDA device ({status.reason}); labeling on the CPU")
    backend = CudaBackend(0)
    warm_up(backend, params)
    return backend


def _why(error: BaseException) -> str:
    """The notice of a CUDA start that failed (hybrid.py)."""
    if isinstance(error, BackendUnavailable):
        return str(error)
    return f"CUDA did not start ({type(error).__name__}: {error}); labeling on the CPU"
