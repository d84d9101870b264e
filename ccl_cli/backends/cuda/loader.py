"""Loading the CUDA kernels: CuPy imported on demand, the shipped fatbin or NVRTC, per device.

CuPy is imported only inside functions: importing this module, and the CPU
path, never need it. Kernels come from the shipped fatbin, or from the same
sources through NVRTC when the fatbin cannot be loaded (GCCL_CUDA_NVRTC=1
forces that route).
"""

from __future__ import annotations

import ast
import json
import operator
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...contract.params import SUPPORTED_DTYPES
from ...errors import BackendUnavailable
from .kernel_names import kernel_name

CUDA_DIR = Path(__file__).resolve().parent / "src"
FATBIN = CUDA_DIR / "gccl.fatbin"
ENTRY = CUDA_DIR / "gccl.cu"
FORCE_NVRTC_ENV = "GCCL_CUDA_NVRTC"
MANIFEST = CUDA_DIR / "manifest.json"


def fatbin_architectures() -> str:
    """The GPU code the shipped fatbin holds, from its manifest ("SASS sm_75, ...; PTX ...")."""
    try:
        manifest = json.loads(MANIFEST.read_text())
        return f"SASS {', '.join(manifest['sass'])}; PTX {manifest['ptx']}"
    except (OSError, ValueError, KeyError) as exc:
        return f"unknown ({one_line(exc)})"


GEOMETRY_HEADER = CUDA_DIR / "geometry.cuh"
_DEFINE = re.compile(r"#\s*define\s+(\w+)(.*)")
_UNSIGNED = re.compile(r"\b(\d+)[uU]?[lL]{0,2}\b")
_OPERATORS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.floordiv,  # C's integer division (the values are positive)
    ast.LShift: operator.lshift,
}


def read_defines(text: str, source: str, names: tuple[str, ...] | None = None) -> dict[str, int]:
    """The `#define NAME VALUE` lines of a header as {NAME: value}; only those of
    `names` where given (a kernel file's other macros are code), each of which
    must be there.

    A value is an integer expression of numbers (C suffixes u, l allowed),
    names defined above it, + - * / << and parentheses; anything else raises
    ValueError naming `source` and the line, so the host never guesses.
    """
    defines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        match = _DEFINE.match(line.strip())
        if match is None or (names is not None and match.group(1) not in names):
            continue
        name, value = match.group(1), match.group(2).split("//")[0].strip()
        try:
            if not value or match.group(2)[:1] not in " \t":
                raise ValueError("not a NAME VALUE define")
            tree = ast.parse(_UNSIGNED.sub(r"\1", value), mode="eval")
            defines[name] = _evaluate(tree.body, defines)
        except (SyntaxError, ValueError, KeyError) as exc:
            raise ValueError(f"{source}:{number}: cannot read {line.strip()!r} ({exc})") from exc
    missing = [name for name in names or () if name not in defines]
    if missing:
        raise ValueError(f"{source}: no #define of {', '.join(missing)}")
    return defines


def _evaluate(node: ast.expr, names: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left, names), _evaluate(node.right, names)
        return _OPERATORS[type(node.op)](left, right)
    raise ValueError(f"unsupported expression {ast.unparse(node)!r}")


#: The launch geometry the kernels are built with (geometry.cuh): tiles, chunks,
#: strips, threads per block, by their GCCL_ names.
GEOMETRY = read_defines(GEOMETRY_HEADER.read_text(), GEOMETRY_HEADER.name)
CHUNK = GEOMETRY["GCCL_CHUNK"]  # pixels per block of the raster-order kernels
CHUNK_THREADS = GEOMETRY["GCCL_CHUNK_THREADS"]
#: The kernels' argument and table layout: foreground.cuh's rule kinds, stats.cu's and
#: volume_stats.cu's aggregate rows (their count, the rows read on the host) and
#: statistics table columns.
LAYOUT = {
    **read_defines(
        (CUDA_DIR / "foreground.cuh").read_text(),
        "foreground.cuh",
        ("GCCL_FG_BACKGROUND", "GCCL_FG_ALL", "GCCL_FG_ABOVE", "GCCL_FG_BELOW"),
    ),
    **read_defines(
        (CUDA_DIR / "stats.cu").read_text(),
        "stats.cu",
        ("GCCL_STATS_FIELDS", "GCCL_F_AREA", "GCCL_TABLE_COLUMNS"),
    ),
    **read_defines(
        (CUDA_DIR / "volume_stats.cu").read_text(),
        "volume_stats.cu",
        (
            "GCCL_V_FIELDS",
            "GCCL_V_AREA",
            "GCCL_V_ABSMAX",
            "GCCL_VOLUME_TABLE_COLUMNS",
            "GCCL_VOLUME_TABLE_INTS",
        ),
    ),
}

#: The kernel name suffix of each supported dtype (dtypes.cuh).
KERNEL_SUFFIX = {
    np.dtype(np.bool_): "u8",
    np.dtype(np.uint8): "u8",
    np.dtype(np.int8): "i8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.int16): "i16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.int32): "i32",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}
assert set(KERNEL_SUFFIX) == set(SUPPORTED_DTYPES)


@dataclass
class CudaStatus:
    """Whether the CUDA backend can run here, and what it would run on.

    devices: "name (memory)" per visible device. kernel_source: where the
    kernels of device 0 came from (fatbin, or NVRTC and why).
    """

    usable: bool
    reason: str = ""
    devices: list[str] = field(default_factory=list)
    kernel_source: str = ""
    cupy_version: str | None = None


def cuda_status() -> CudaStatus:
    """Probe CuPy, the driver, the devices and the kernels; never raises."""
    try:
        import cupy
    except Exception as exc:
        return CudaStatus(False, f"CuPy is not installed ({one_line(exc)})")
    version = str(cupy.__version__)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
        devices = []
        for index in range(count):
            props = cupy.cuda.runtime.getDeviceProperties(index)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            devices.append(f"{name} ({props['totalGlobalMem'] / 2**30:.1f} GiB)")
    except Exception as exc:
        return CudaStatus(
            False, f"no usable CUDA driver or device ({one_line(exc)})", [], "", version
        )
    if not devices:
        return CudaStatus(False, "no CUDA device found", [], "", version)
    try:
        source = device_kernels(0).source
    except Exception as exc:
        return CudaStatus(False, f"kernels failed to load ({one_line(exc)})", devices, "", version)
    return CudaStatus(True, "", devices, source, version)


class Kernels:
    """The gccl kernels loaded on one device, and where they came from."""

    def __init__(self, device: int) -> None:
        import cupy

        self.device = device
        self._functions: dict[str, Any] = {}
        self._resident: dict[tuple[str, int], int] = {}
        with cupy.cuda.Device(device):
            self.multiprocessors = int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])
            reason = f"{FORCE_NVRTC_ENV} is set" if os.environ.get(FORCE_NVRTC_ENV) else ""
            if not reason:
                try:
                    self._module = cupy.RawModule(path=str(FATBIN))
                    self._module.get_function(kernel_name("gccl_finalize"))
                    self.source = f"fatbin {FATBIN.relative_to(CUDA_DIR.parent.parent)}"
                    return
                except Exception as exc:
                    reason = f"fatbin failed to load: {one_line(exc)}"
            self._module = cupy.RawModule(
                code=ENTRY.read_text(), options=("-std=c++17", f"-I{CUDA_DIR}")
            )
            self._module.get_function(kernel_name("gccl_finalize"))
            self.source = f"NVRTC ({reason})"

    def launch(self, name: str, grid: int, block: tuple[int, ...], args: tuple[Any, ...]) -> None:
        """Launch kernel `name` on a 1-D grid on the current stream."""
        if grid > 0:
            self._function(name)((grid,), block, args)

    def resident_blocks(self, name: str, threads: int) -> int:
        """Blocks of `threads` threads of kernel `name` that one SM holds at once."""
        key = (name, threads)
        if key not in self._resident:
            import cupy

            with cupy.cuda.Device(self.device):
                self._resident[key] = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                    self._function(name).kernel.ptr, threads, 0
                )
        return self._resident[key]

    def _function(self, name: str) -> Any:
        function = self._functions.get(name)
        if function is None:
            function = self._functions[name] = self._module.get_function(name)
        return function


_loaded: dict[int, Kernels] = {}
_loading = threading.Lock()


def device_kernels(device: int) -> Kernels:
    """The kernels of `device`, loaded once per process."""
    with _loading:
        if device not in _loaded:
            _loaded[device] = Kernels(device)
        return _loaded[device]


def import_cupy() -> Any:
    """cupy, or BackendUnavailable with the reason."""
    try:
        import cupy
    except Exception as exc:
        raise BackendUnavailable(f"CuPy is not installed ({one_line(exc)})") from exc
    return cupy


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message, with its type."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
