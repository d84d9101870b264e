#!/usr/bin/env python3
"""Build ccl_cli/backends/cuda/src/gccl.fatbin and its manifest, or check that they are current.

    python3 scripts/build_cubins.py [--nvcc PATH]          # build (make cubins)
    python3 scripts/build_cubins.py --check [--nvcc PATH]  # verify (make cubins-check)

The fatbin holds SASS for every GPU generation gccl supports plus PTX for the
oldest, so newer GPUs can JIT it. manifest.json records a sha256 over the CUDA
sources and the nvcc flags; --check fails when it no longer matches (a stale
fatbin), and, where nvcc is on PATH, also compiles every .cu file on its own
(one virtual architecture, PTX only: seconds) so that a kernel that does not
compile fails CI even without a GPU. Standard library only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CUDA_DIR = ROOT / "ccl_cli" / "backends" / "cuda" / "src"
ENTRY = "gccl.cu"
FATBIN = CUDA_DIR / "gccl.fatbin"
MANIFEST = CUDA_DIR / "manifest.json"

#: Real architectures that get SASS, and the virtual one shipped as PTX. SASS runs on
#: later minor versions of its major (sm_80 code on sm_86 and sm_89 GPUs), so one
#: entry per major suffices; the PTX lets GPUs newer than every entry JIT the kernels.
SASS_ARCHS = (75, 80, 90, 100, 120)
PTX_ARCH = 75
#: -compress-all: every SASS and PTX entry compressed (the driver inflates it at load).
BASE_FLAGS = ("-std=c++17", "-O3", "-Xfatbin=-compress-all")


def sources() -> list[Path]:
    """Every CUDA source of the package, in a stable order."""
    return sorted([*CUDA_DIR.glob("*.cu"), *CUDA_DIR.glob("*.cuh")])


def nvcc_flags(archs: tuple[int, ...]) -> list[str]:
    """The flags of the fatbin build for the given SASS architectures."""
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
    ptx = f"-gencode=arch=compute_{PTX_ARCH},code=compute_{PTX_ARCH}"
    return [*BASE_FLAGS, *gencode, ptx]


def sources_sha256(flags: list[str]) -> str:
    """Hash of the sources' names and bytes and of the flags that build them."""
    digest = hashlib.sha256()
    for path in sources():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update("\0".join(flags).encode())
    return digest.hexdigest()


def supported_archs(nvcc: str) -> tuple[int, ...]:
    """SASS_ARCHS minus those this nvcc rejects (each dropped one is reported)."""
    listed = subprocess.run(
        [nvcc, "--list-gpu-code"], capture_output=True, text=True, check=True
    ).stdout.split()
    archs = tuple(a for a in SASS_ARCHS if f"sm_{a}" in listed)
    for dropped in sorted(set(SASS_ARCHS) - set(archs)):
        print(f"build_cubins: nvcc does not support sm_{dropped}; dropped", file=sys.stderr)
    return archs


def nvcc_version(nvcc: str) -> str:
    """The last line of `nvcc --version` (release and build)."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def build(nvcc: str) -> int:
    """Compile the fatbin and write the manifest."""
    archs = supported_archs(nvcc)
    flags = nvcc_flags(archs)
    command = [nvcc, *flags, "--threads", "0", "-fatbin", "-o", str(FATBIN), ENTRY]
    print(" ".join(command), file=sys.stderr)
    subprocess.run(command, cwd=CUDA_DIR, check=True)
    manifest = {
        "fatbin": FATBIN.name,
        "fatbin_sha256": hashlib.sha256(FATBIN.read_bytes()).hexdigest(),
        "sources": [path.name for path in sources()],
        "sources_sha256": sources_sha256(flags),
        "nvcc_flags": flags,
        "sass": [f"sm_{a}" for a in archs],
        "ptx": f"compute_{PTX_ARCH}",
        "nvcc": nvcc_version(nvcc),
    }
    MANIFEST.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"build_cubins: wrote {FATBIN.relative_to(ROOT)} and {MANIFEST.name}", file=sys.stderr)
    return 0


def check(nvcc: str) -> int:
    """0 when the manifest matches the sources and the fatbin (and every .cu compiles)."""
    if not MANIFEST.is_file() or not FATBIN.is_file():
        print("build_cubins: fatbin or manifest missing; run `make cubins`", file=sys.stderr)
        return 1
    manifest = json.loads(MANIFEST.read_text())
    if manifest.get("sources_sha256") != sources_sha256(manifest.get("nvcc_flags", [])):
        print("build_cubins: CUDA sources changed since the fatbin was built; run `make cubins`")
        return 1
    if manifest.get("fatbin_sha256") != hashlib.sha256(FATBIN.read_bytes()).hexdigest():
        print("build_cubins: gccl.fatbin is not the one the manifest describes; run `make cubins`")
        return 1
    if shutil.which(nvcc) is None:
        print(f"build_cubins: manifest matches; {nvcc} not found, kernels not compiled")
        return 0
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(CUDA_DIR.glob("*.cu")):
            command = [nvcc, *BASE_FLAGS, f"-arch=compute_{PTX_ARCH}", "-ptx"]
            command += ["-o", str(Path(tmp) / (path.stem + ".ptx")), path.name]
            if subprocess.run(command, cwd=CUDA_DIR).returncode != 0:
                failed.append(path.name)
    if failed:
        print(f"build_cubins: nvcc failed on {', '.join(failed)}")
        return 1
    print(f"build_cubins: manifest matches; {len(list(CUDA_DIR.glob('*.cu')))} .cu files compile")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify instead of building")
    parser.add_argument("--nvcc", default="nvcc", help="the nvcc to use (default: nvcc)")
    args = parser.parse_args()
    if args.check:
        return check(args.nvcc)
    if shutil.which(args.nvcc) is None:
        print(f"build_cubins: {args.nvcc} not found", file=sys.stderr)
        return 2
    return build(args.nvcc)


if __name__ == "__main__":
    sys.exit(main())
