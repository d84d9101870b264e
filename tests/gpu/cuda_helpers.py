"""Helpers of the GPU tests (no conftest here: tests/conftest.py is imported by name).

`gpu` marks the GPU tests and skips them cleanly where CuPy or a CUDA device is
missing; `assert_same` compares the CUDA backend with the CPU reference bit for
bit: labels, component counts and every StatsTable column; `spin` keeps a stream
busy, so that a test can see that a call did not wait for it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from ccl_cli.backends.cpu.backend import CpuBackend
from ccl_cli.contract.params import LabelParams


def cuda_problem() -> str | None:
    """Why CUDA cannot be tested here, or None."""
    try:
        count = device_count()
    except Exception as exc:
        return f"CuPy/CUDA not usable: {exc}"
    return None if count > 0 else "no CUDA device"


def device_count() -> int:
    """CUDA devices CuPy sees (raises where CuPy or the driver is missing)."""
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


_PROBLEM = cuda_problem()

#: Module mark of every GPU test file: `pytestmark = gpu`.
gpu = [pytest.mark.gpu, pytest.mark.skipif(_PROBLEM is not None, reason=str(_PROBLEM))]


def skip_unless_free_gib(gib: int) -> None:
    """Skip the test unless `gib` GiB of device memory are free once CuPy's pool has
    given back the blocks earlier tests left cached (memGetInfo does not count those)."""
    import cupy

    cupy.get_default_memory_pool().free_all_blocks()
    if cupy.cuda.runtime.memGetInfo()[0] < gib * 2**30:
        pytest.skip(f"needs {gib} GiB of free device memory")


@functools.cache
def backends() -> tuple[Any, CpuBackend]:
    """(CudaBackend on device 0, CpuBackend), made once."""
    from ccl_cli.backends.cuda.backend import CudaBackend

    return CudaBackend(), CpuBackend()


def to_host(labels: Any) -> np.ndarray:
    """Labels as numpy, wherever they live."""
    return labels.get() if hasattr(labels, "get") else np.asarray(labels)


def assert_same(batch: np.ndarray, params: LabelParams) -> None:
    """CUDA and CPU backends agree on labels, component counts and statistics."""
    cuda, cpu = backends()
    got, want = cuda.label(batch, params), cpu.label(batch, params)
    assert got.components == want.components
    labels = to_host(got.labels)
    assert labels.dtype == np.uint32 and labels.shape == batch.shape
    for i in range(len(batch)):
        np.testing.assert_array_equal(labels[i], want.labels[i], err_msg=f"labels of image {i}")
    assert len(got.tables) == len(want.tables)
    for i, (a, b) in enumerate(zip(got.tables, want.tables, strict=True)):
        assert a.equals(b), f"statistics of image {i} differ"


SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


def spin(stream: Any, seconds: float = 0.5) -> None:
    """Keep `stream` busy for about `seconds` (a clock64 loop)."""
    import cupy

    kernel = cupy.RawKernel(SPIN, "spin")
    rate = cupy.cuda.Device().attributes["ClockRate"] * 1000  # kHz -> Hz
    with stream:
        kernel((1,), (1,), (np.int64(seconds * rate),))
