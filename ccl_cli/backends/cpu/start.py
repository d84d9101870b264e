"""How the command's processes start numba: without its BLAS bindings.

At the first call of a compiled loop (cached on disk or not), numba loads
its implementations of numpy's functions, and with them checks for a BLAS by
importing scipy.linalg, where SciPy is installed: 0.15-0.3 s of a run's
start-up. No loop of the engine calls BLAS (np.dot, np.linalg). The gccl
command's processes load numba's array functions with scipy.linalg's BLAS
module marked missing, unless scipy.linalg is loaded already; numba's np.dot
and np.linalg are then unavailable in those processes. The Python API
(ccl_cli.label, in the user's program) never does this.
"""

from __future__ import annotations

import importlib
import sys

#: What numba imports to find a BLAS (numba.np.linalg.ensure_blas).
BLAS_MODULE = "scipy.linalg.cython_blas"


def start_numba_without_blas() -> None:
    """Import numba's array functions with BLAS_MODULE marked missing (module docstring)."""
    if "scipy.linalg" in sys.modules or "numba.np.arraymath" in sys.modules:
        return
    sys.modules[BLAS_MODULE] = None  # type: ignore[assignment]  # import raises ImportError
    try:
        importlib.import_module("numba.np.arraymath")
    finally:
        del sys.modules[BLAS_MODULE]
