"""numba's start-up in gccl's own processes, without its BLAS probe.

The first compilation or cache load of a numba function imports numba's numpy
support, whose BLAS probe imports all of scipy.linalg when SciPy is installed:
0.3 s on a 16-core host, up to a second on a small one, in every process that
labels on the CPU. The engine does no linear algebra, so the command's
processes (the run and its worker processes) import that support with the probe
answered "no BLAS". A library caller's process is left as it is: its own numba
code may need BLAS.
"""

from __future__ import annotations

import sys

#: The module whose import is numba's BLAS probe.
_PROBE = "scipy.linalg.cython_blas"


def skip_blas_probe() -> None:
    """Import numba's numpy support now, its BLAS probe failing at once (see the module)."""
    if "numba.np.arraymath" in sys.modules or _PROBE in sys.modules:
        return  # imported already: the probe has run, or costs nothing now
    sys.modules[_PROBE] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        if _PROBE in sys.modules and sys.modules[_PROBE] is None:
            del sys.modules[_PROBE]


def ready_numba() -> None:
    """numba ready to label at once: its numpy support without the BLAS probe, and its
    implementation registries, which its first cache load or compilation loads, loaded
    now (by running one small cached loop of the engine)."""
    skip_blas_probe()
    from . import kernels

    kernels.order_key(0)
