#!/usr/bin/env python3
"""Build the shipped CPU engine library (ccl_cli/native/src/gccl_cpu.so) and its
manifest, or check that they are current.

    python scripts/build_cpu_engine.py [--cc gcc]          # build (make cpu-engine)
    python scripts/build_cpu_engine.py --check [--cc gcc]  # verify (make cpu-engine-check)

The shipped build is for Linux on x86-64 (the platform this is run on); other platforms
compile the same sources at first use (ccl_cli/native/__init__.py, which owns the
flags and the sources' hash). manifest.json records the platform, the sources' hash and
the library's own hash; --check fails when either no longer matches, and also compiles
the sources with every warning an error, so C that does not compile cleanly fails CI.
The library must load on old Linux systems: the build refuses one that needs a newer C
library than MAX_GLIBC.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ccl_cli import native  # noqa: E402

#: The newest glibc symbol version the shipped library may need (2.17: CentOS 7, 2014).
MAX_GLIBC = (2, 17)
SHIPPED_PLATFORM = "linux-x86_64"
WARNINGS = ("-Wall", "-Wextra", "-Werror")


def compiler_version(cc: str) -> str:
    """The first line of `cc --version`."""
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[0]


def glibc_needed(library: Path) -> tuple[int, ...]:
    """The newest GLIBC_x.y symbol version `library` refers to (from its dynamic symbols)."""
    symbols = subprocess.run(
        ["objdump", "-T", str(library)], capture_output=True, text=True, check=True
    ).stdout
    versions = [tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_([\d.]+)", symbols)]
    return max(versions, default=(0,))


def build(cc: str) -> int:
    """Compile the library and write the manifest."""
    if native.platform_tag() != SHIPPED_PLATFORM:
        print(f"build_cpu_engine: the shipped build is for {SHIPPED_PLATFORM}", file=sys.stderr)
        return 2
    native.compile_library(cc, native.LIBRARY)
    needed = glibc_needed(native.LIBRARY)
    if needed > MAX_GLIBC:
        native.LIBRARY.unlink()
        print(f"build_cpu_engine: the library needs glibc {needed}", file=sys.stderr)
        return 1
    manifest = {
        "library": native.LIBRARY.name,
        "library_sha256": hashlib.sha256(native.LIBRARY.read_bytes()).hexdigest(),
        "platform": SHIPPED_PLATFORM,
        "sources": list(native.SOURCES),
        "sources_sha256": native.sources_sha256(),
        "flags": [*native.COMPILE_FLAGS, *native.LINK_FLAGS],
        "compiler": compiler_version(cc),
    }
    native.MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"build_cpu_engine: wrote {native.LIBRARY.relative_to(ROOT)}", file=sys.stderr)
    return 0


def check(cc: str) -> int:
    """0 when the manifest matches the sources and the library, and the sources compile."""
    if not native.MANIFEST.is_file() or not native.LIBRARY.is_file():
        print("build_cpu_engine: library or manifest missing; run `make cpu-engine`")
        return 1
    manifest = json.loads(native.MANIFEST.read_text())
    if manifest.get("sources_sha256") != native.sources_sha256():
        print("build_cpu_engine: CPU engine sources changed since the build; run `make cpu-engine`")
        return 1
    if manifest.get("library_sha256") != hashlib.sha256(native.LIBRARY.read_bytes()).hexdigest():
        print("build_cpu_engine: gccl_cpu.so is not the one the manifest describes")
        return 1
    with tempfile.TemporaryDirectory() as folder:
        command = [cc, *native.COMPILE_FLAGS, *WARNINGS, "-o", f"{folder}/check.so"]
        command += [*(str(native.SOURCE_DIR / name) for name in native.COMPILED)]
        command += native.LINK_FLAGS
        if subprocess.run(command).returncode != 0:
            print(f"build_cpu_engine: {cc} failed on the CPU engine's sources")
            return 1
    print("build_cpu_engine: manifest matches; the sources compile without warnings")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify instead of building")
    parser.add_argument("--cc", default="gcc", help="the C compiler (default: gcc)")
    args = parser.parse_args()
    return check(args.cc) if args.check else build(args.cc)


if __name__ == "__main__":
    sys.exit(main())
