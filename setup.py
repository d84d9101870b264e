"""The compiled part of the package build: the CPU engine (ccl_cli/native/src) as the CPython
extension module ccl_cli.native.gccl_cpu. The rest of the build is declared in pyproject.toml.

A C11 compiler of the gcc/clang family is needed wherever the package is built (a wheel
carries the module for its platform). `make cpu-engine-check` builds it with every warning
an error.
"""

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

setup(
    ext_modules=[
        Extension(
            "ccl_cli.native.gccl_cpu",
            sources=[SOURCES + name for name in ("binding.c", "engine.c", "volume.c", "pool.c")],
            depends=[
                SOURCES + name
                for name in (
                    *("engine.h", "rows.h", "foreground.h", "strip.h", "volume.h", "volume_rows.h"),
                    "pool.h",
                    "pixel_types.h",
                )
            ],
            extra_compile_args=COMPILE_FLAGS,
            libraries=["m"],
        )
    ]
)
