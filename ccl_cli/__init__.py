"""gccl: connected-components labeling of image batches on NVIDIA GPUs, with a CPU reference.

The Python API is `ccl_cli.label(array, ...)`, `ccl_cli.Labeler(...)` and the tables they
return, `ccl_cli.StatsTable` and `ccl_cli.DeviceTable` (a device array's statistics, made by
the CUDA backend: ccl_cli.backends.cuda.device); the command line
is `gccl` (see ccl_cli.cli). They are imported on first use, so that the command line
starts without them.
"""

from __future__ import annotations

from typing import Any

#: The one place the version is written: pyproject.toml reads it from here
#: (importlib.metadata would slow every start-up: it scans the installed distributions).
__version__ = "0.1.0"

#: The Python API's names, in ccl_cli.api but DeviceTable.
__all__ = ["DeviceTable", "Labeler", "StatsTable", "label"]


def __getattr__(name: str) -> Any:
    """The API's names (ccl_cli.label is api.label itself: its signature, its docstring)."""
    if name == "DeviceTable":
        from .backends.cuda import device

        value: Any = device.DeviceTable
        globals()[name] = value
        return value
    if name in __all__:
        from . import api

        value = getattr(api, name)
        globals()[name] = value  # found directly from now on
        return value
    raise AttributeError(f"module 'ccl_cli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*__all__, "__version__", *(name for name in globals() if name.startswith("__"))})
