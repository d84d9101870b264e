"""What the benchmark ran on: GPU, CPU, thread counts and library versions.

Numbers mean little without the machine, so every report carries this.
Nothing here fails: what cannot be found reads as 'none' or 'not installed'.
"""

from __future__ import annotations

import importlib
import os
import platform
from importlib import metadata

from .. import __version__
from .adapter import cpu_threads

#: Distribution names of the libraries the engines use, in report order.
_PACKAGES = (
    "numpy",
    "connected-components-3d",
    "scikit-image",
    "scipy",
    "matplotlib",
)


def describe_machine() -> dict[str, str]:
    """Label -> text, in the order the report prints them (call it after the run). Without
    a GPU, "gpu" is "none" and "no gpu" says why in a few words."""
    gpu, why = _gpu()
    return {
        "gpu": gpu,
        **({"no gpu": why} if why else {}),
        "cpu": f"{_cpu_model()}, {os.cpu_count()} logical cores",
        "threads": f"OpenCV {_opencv_threads()}, gccl-cpu/skimage {cpu_threads()}",
        "python": f"{platform.python_version()} on {platform.system()} {platform.machine()}",
        "versions": ", ".join(
            [
                f"gccl {__version__}",
                f"opencv {_module_version('cv2')}",
                f"cupy {_module_version('cupy')}",
            ]
            + [f"{name} {_version_of(name)}" for name in _PACKAGES]
        ),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _gpu() -> tuple[str, str]:
    """The GPU as the report names it, and where there is none, why in a few words."""
    try:
        import cupy
    except ImportError:
        return "none", "no GPU engine (CuPy not installed)"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        props = cupy.cuda.runtime.getDeviceProperties(0)
        memory = props["totalGlobalMem"] / 2**30
        driver = cupy.cuda.runtime.driverGetVersion()
    except Exception as error:  # no driver, no device: both mean "no GPU"
        return "none", f"no GPU engine (no usable CUDA device: {type(error).__name__})"
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    described = (
        f"{name} ({memory:.0f} GiB, sm_{props['major']}{props['minor']}), "
        f"{count} device(s), CUDA driver {driver // 1000}.{driver % 1000 // 10}"
    )
    return described, ""


def _opencv_threads() -> str:
    """The threads OpenCV uses now (the opencv engine sets all of them)."""
    try:
        import cv2
    except ImportError:
        return "not installed"
    return str(cv2.getNumThreads())


def _module_version(module: str) -> str:
    """`module.__version__` (OpenCV and CuPy ship under several distribution names)."""
    try:
        return str(importlib.import_module(module).__version__)
    except ImportError:
        return "not installed"


def _version_of(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
