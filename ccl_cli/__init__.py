"""gccl: connected-components labeling of image batches on NVIDIA GPUs, with a CPU reference.

The Python API is `ccl_cli.label(array, ...)` and `ccl_cli.Labeler(...)` (see
ccl_cli.api); the command line is `gccl` (see ccl_cli.cli). Heavy modules load
on first use.
"""

from __future__ import annotations

from typing import Any

#: The one place the version is written: pyproject.toml reads it from here
#: (importlib.metadata would cost a start-up tens of milliseconds).
__version__ = "0.1.0"


def label(array: Any, **options: Any) -> Any:
    """Label a numpy, CuPy, PyTorch or DLPack array; see ccl_cli.api.label."""
    from .api import label as api_label

    return api_label(array, **options)


def __getattr__(name: str) -> Any:
    """ccl_cli.Labeler and ccl_cli.DeviceTable, imported on first use."""
    if name in ("Labeler", "DeviceTable"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'ccl_cli' has no attribute {name!r}")
