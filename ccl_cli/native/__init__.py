"""gccl's compiled library: the CPU labeling engine (`src/engine.c`, its threads in
`src/pool.c`) and PNG's row filters (`src/png.c`), from the shipped build or one made here.

The package ships a build for Linux on x86-64 (`src/gccl_cpu.so`, described by
`src/manifest.json`), loaded through ctypes in a millisecond: no compiler runs and no
JIT starts on a user's machine. Where that build does not apply (another platform, or
sources edited since it was made), the same sources are compiled once with the
machine's C compiler ($CC, else cc, gcc or clang) into the user's cache folder
(GCCL_CACHE_DIR, else $XDG_CACHE_HOME/gccl or ~/.cache/gccl), and that build is used
from then on. ctypes releases the GIL for each call, so the engine's threads
(labels.py) run the library at once.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import BackendUnavailable

SOURCE_DIR = Path(__file__).resolve().parent / "src"
SOURCES = ("engine.c", "engine.h", "strip.h", "pool.c", "png.c")
#: The sources compiled into the library (the others are included by them).
COMPILED = ("engine.c", "pool.c", "png.c")
LIBRARY = SOURCE_DIR / "gccl_cpu.so"
MANIFEST = SOURCE_DIR / "manifest.json"
#: The flags of every build, shipped or local. No fast-math of any kind: the statistics
#: are exact, and a fused multiply-add would round differently.
COMPILE_FLAGS = (
    "-std=c11",
    "-O3",
    "-fPIC",
    "-shared",
    "-fvisibility=hidden",
    "-ffp-contract=off",
)
LINK_FLAGS = ("-lm",)
CACHE_ENV = "GCCL_CACHE_DIR"
COMPILERS = ("cc", "gcc", "clang")
#: The entry points, each (batch, lo, hi) -> 0, or -1 when out of memory.
ENTRY_POINTS = (
    "gccl_label_strips",
    "gccl_merge_seams",
    "gccl_reduce_stats",
    "gccl_float_terms",
    "gccl_keep_components",
    "gccl_kept_columns",
    "gccl_write_labels",
)


#: engine.h's array fields of gccl_batch, in order (addresses of C-contiguous arrays).
BATCH_ARRAYS = (
    "image",
    "values",
    "prov",
    "parent",
    "tasks",
    "acc_first",
    "acc",
    "local_counts",
    "lasts",
    "first",
    "image_tasks",
    "forest",
    "components",
    "component_first",
    "stats",
    "shift",
    "sums",
    "kept_id",
    "kept",
    "kept_first",
    "mean",
    "ints",
    "floats",
    "labels",
    "chosen",
)


class Batch(ctypes.Structure):
    """engine.h's gccl_batch: the shapes, parameters and array addresses of one labeling."""

    _fields_ = [
        ("count", ctypes.c_int64),
        ("height", ctypes.c_int64),
        ("width", ctypes.c_int64),
        ("image_type", ctypes.c_int64),
        ("value_type", ctypes.c_int64),
        ("rule", ctypes.c_int64),
        ("eight", ctypes.c_int64),
        ("tau_mode", ctypes.c_int64),
        ("floating", ctypes.c_int64),
        ("min_area", ctypes.c_int64),
        ("label_bytes", ctypes.c_int64),
        ("a", ctypes.c_double),
        ("tau", ctypes.c_double),
        *((name, ctypes.c_void_p) for name in BATCH_ARRAYS),
    ]


@dataclass(frozen=True)
class Engine:
    """The loaded library (its entry points typed) and where the build came from (gccl info)."""

    library: ctypes.CDLL
    origin: str


def platform_tag() -> str:
    """The platform a build is for, e.g. linux-x86_64."""
    return f"{sys.platform}-{platform.machine().lower()}"


def sources_sha256() -> str:
    """Hash of the sources' names and bytes and of the build flags."""
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (SOURCE_DIR / name).read_bytes() + b"\0")
    digest.update("\0".join(COMPILE_FLAGS + LINK_FLAGS).encode())
    return digest.hexdigest()


def compile_library(compiler: str, target: Path) -> None:
    """Build the library from the sources at `target` (written whole, then renamed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as folder:
        built = Path(folder) / target.name
        command = [
            compiler,
            *COMPILE_FLAGS,
            "-o",
            str(built),
            *(str(SOURCE_DIR / name) for name in COMPILED),
            *LINK_FLAGS,
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip().splitlines()[:1]
            raise OSError(f"{compiler} failed: {' '.join(detail) or result.returncode}")
        os.replace(built, target)


def cache_dir() -> Path:
    """Where builds made on this machine are kept."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gccl"


def find_compiler() -> str | None:
    """$CC, else the first of COMPILERS on PATH."""
    if os.environ.get("CC"):
        return os.environ["CC"]
    return next((name for name in COMPILERS if shutil.which(name)), None)


def _shipped(digest: str) -> bool:
    """Whether the shipped build is for this platform and these sources."""
    try:
        manifest = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return False
    return (
        manifest.get("platform") == platform_tag()
        and manifest.get("sources_sha256") == digest
        and LIBRARY.is_file()
    )


def _load(path: Path, origin: str) -> Engine:
    library = ctypes.CDLL(str(path))
    for name in ENTRY_POINTS:
        function = getattr(library, name)
        function.argtypes = (ctypes.POINTER(Batch), ctypes.c_int64, ctypes.c_int64)
        function.restype = ctypes.c_int
    spread = library.gccl_spread
    spread.argtypes = (ctypes.c_void_p, ctypes.POINTER(Batch), ctypes.c_int64, ctypes.c_int64)
    spread.restype = ctypes.c_int
    library.gccl_help.argtypes = ()
    library.gccl_help.restype = None
    unfilter = library.gccl_png_unfilter
    unfilter.argtypes = (
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
    )
    unfilter.restype = ctypes.c_int64
    return Engine(library, origin)


@functools.cache
def engine() -> Engine:
    """The engine's library, loaded once: the shipped build, else one compiled here.

    Raises BackendUnavailable (one line: why) where neither can be had.
    """
    digest = sources_sha256()
    if _shipped(digest):
        return _load(LIBRARY, f"shipped build for {platform_tag()}")
    target = cache_dir() / f"gccl_cpu-{platform_tag()}-{digest[:16]}.so"
    if not target.is_file():
        compiler = find_compiler()
        if compiler is None:
            raise BackendUnavailable(
                f"the CPU engine has no build for {platform_tag()} and no C compiler was "
                "found to make one (set CC)"
            )
        try:
            compile_library(compiler, target)
        except OSError as error:
            raise BackendUnavailable(f"the CPU engine could not be built: {error}") from None
    try:
        return _load(target, f"built here, {target}")
    except OSError as error:
        raise BackendUnavailable(f"the CPU engine could not be loaded: {error}") from None
