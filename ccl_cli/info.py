"""`gccl info`: what this installation can do, for users and bug reports."""

from __future__ import annotations

import os
import platform
import textwrap
from importlib import metadata

from . import __version__

#: The widest line `gccl info` prints.
WIDTH = 88


def _version_of(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def collect_info() -> str:
    """A plain-text report: versions, backends, CUDA devices and the kernels' origin."""
    from .backends.cuda.loader import cuda_status, fatbin_architectures
    from .native import gccl_cpu

    status = cuda_status()
    lines = [
        f"gccl {__version__}",
        f"python {platform.python_version()} on {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPU core(s)",
        "packages: "
        + ", ".join(
            f"{name} {_version_of(name)}"
            for name in ("numpy", "connected-components-3d", "tifffile", "imagecodecs", "pillow")
        ),
        "backends:",
    ]
    lines.append(f"  cpu: available (compiled engine: {gccl_cpu.__file__})")
    if status.usable:
        lines.append(f"  cuda: available (CuPy {status.cupy_version})")
        lines.extend(f"    device {i}: {name}" for i, name in enumerate(status.devices))
        lines.append(f"  kernels: {status.kernel_source}")
    else:
        lines.append(f"  cuda: not usable: {status.reason}")
    lines.append(f"  fatbin: {fatbin_architectures()}")
    return "".join(_wrapped(line) for line in lines)


def _wrapped(line: str) -> str:
    """`line` folded at WIDTH columns between words, its continuation indented under its
    text (so a long reason or package list stays readable in a terminal and a bug report)."""
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return (
        "\n".join(textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_long_words=False))
        + "\n"
    )
