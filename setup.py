"""The compiled part of the package build: the CPU engine (ccl_cli/native/src) as the CPython
extension module ccl_cli.native.gccl_cpu. The rest of the build is declared in pyproject.toml.

A C11 compiler of the gcc/clang family is needed wherever the package is built (a wheel
carries the module for its platform). `make cpu-engine-check` builds it with every warning
an error.
"""

import os
import sys

from setuptools import Extension, setup

SOURCES = "ccl_cli/native/src/"
#: No fast-math of any kind and no contraction of a multiply and an add into one fused
#: operation: statistics and tau joins are computed as the README's contract writes them,
#: to the same bits as the CUDA kernels.
COMPILE_FLAGS = [
    "-std=c11",
    "-O3",
    "-fvisibility=hidden",
    "-fno-fast-math",
    "-ffp-contract=off",
    "-Wall",
    "-Wextra",
]

#: The binding, the image engine and its threads; the volume engine by concern.
ENGINE_SOURCES = ("binding.c", "engine.c", "pool.c")
VOLUME_SOURCES = ("volume_label.c", "volume_seams.c", "volume_write.c", "volume_memory.c")
OUTLINE_SOURCES = ("outline.c", "geojson.c", "outline_binding.c")
#: A labeled chunk's tables, for chunked volumes.
CHUNK_SOURCES = ("chunk_tables.c",)
HEADERS = (
    *("engine.h", "pixel_types.h", "pixel_instance.h", "rows.h", "foreground.h", "strip.h"),
    "pool.h",
    *("volume.h", "volume_slab.h", "volume_joins.h", "volume_gather.h"),
    *("outline.h", "outline_binding.h"),
    "chunk_tables.h",
    "buffers.h",
)

#: Wheels carry the engine without debug information (-g0, and -S to the linker: no DWARF
#: sections, a smaller module); GCCL_DEBUG=1 in the environment keeps it for a debugger.
DEBUG = os.environ.get("GCCL_DEBUG") == "1"
STRIP_COMPILE = [] if DEBUG else ["-g0"]
STRIP_LINK = [] if DEBUG or sys.platform == "win32" else ["-Wl,-S"]

setup(
    ext_modules=[
        Extension(
            "ccl_cli.native.gccl_cpu",
            sources=[
                SOURCES + name
                for name in (*ENGINE_SOURCES, *VOLUME_SOURCES, *OUTLINE_SOURCES, *CHUNK_SOURCES)
            ],
            depends=[SOURCES + name for name in HEADERS],
            extra_compile_args=COMPILE_FLAGS + STRIP_COMPILE,
            extra_link_args=STRIP_LINK,
            libraries=["m"],
        )
    ]
)
