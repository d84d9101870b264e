"""What every volume reader checks before it allocates: the volume's size against
--max-image-bytes and the memory labeling it takes, and a data file a header names (inside the
input's folder only). Compressed data stops at the size the header declared where it is decoded
(gzip_read.py; nrrd_volume.py for bzip2). And the threads a label volume is encoded on."""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...contract.params import SUPPORTED_DTYPES
from ...errors import InputError

#: Bytes a label takes while labeling (uint32), beside the values.
LABEL_BYTES = 4
#: The most threads that encode one label volume at once (its pieces cast and compressed).
MAX_ENCODE_THREADS = 8


def encode_threads() -> int:
    """Threads that encode one label volume's pieces at once (each releases the GIL)."""
    return max(1, min(MAX_ENCODE_THREADS, os.cpu_count() or 1))


def check_volume(shape: Sequence[int], dtype: np.dtype, max_bytes: int) -> None:
    """Refuse a (D, H, W) volume of `dtype` before anything is allocated: a shape that is not
    3-D (4-D time series and channels say what to do), a dtype labeling does not take, values
    past `max_bytes` (--max-image-bytes counts the whole volume), or values and their uint32
    labels past the memory this machine has available."""
    shape = tuple(int(n) for n in shape)
    if len(shape) != 3:
        raise not_3d(shape)
    if min(shape) < 0:
        raise InputError(f"corrupt header: shape {shape}")
    dtype = np.dtype(dtype)
    native = dtype.newbyteorder("=")
    if native not in SUPPORTED_DTYPES:
        raise InputError(
            f"unsupported voxel type {dtype} (labeled: bool, 8-32-bit integers, floats)"
        )
    voxels = math.prod(shape)
    values = voxels * dtype.itemsize
    needed = values + voxels * LABEL_BYTES
    size = "x".join(str(n) for n in reversed(shape))
    if values > max_bytes:
        raise InputError(
            f"volume too large ({size} voxels of {dtype}: {values} bytes; "
            f"--max-image-bytes is {max_bytes}); labeling it takes {needed} bytes"
        )
    available = available_memory()
    if available is not None and needed > available:
        raise InputError(
            f"volume too large for this machine's memory ({size} voxels of {dtype}: labeling "
            f"takes {needed} bytes, values and uint32 labels; {available} bytes available)"
        )


def not_3d(shape: tuple[int, ...]) -> InputError:
    """The error for a file that holds no single 3-D volume (4-D: time series or channels)."""
    if len(shape) > 3:
        return InputError(
            f"{len(shape)}-D data (shape {shape}): a time series or channels, not one volume; "
            "save each time point or channel as a 3-D file of its own"
        )
    return InputError(f"{len(shape)}-D data (shape {shape}), not a 3-D volume")


def squeeze_to_3d(shape: Sequence[int]) -> tuple[int, ...]:
    """A shape of more than 3 axes whose extra trailing axes hold one element each, as 3 axes;
    others unchanged (check_volume refuses them)."""
    shape = tuple(int(n) for n in shape)
    while len(shape) > 3 and shape[-1] == 1:
        shape = shape[:-1]
    return shape


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), None elsewhere."""
    try:
        with open("/proc/meminfo", "rb") as meminfo:
            for line in meminfo:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def data_file(header_path: Path, name: str, fmt: str) -> Path:
    """The data file a header of format `fmt` names (an .mhd's ElementDataFile, an .nhdr's data
    file), which must be one file (not a LIST, nor a pattern with its numbers after the name)
    and a plain name or a relative path inside the header's folder: a header never makes gccl
    read another file (no absolute path, no "..", no link leading out)."""
    text = str(name).strip()
    if text.upper().startswith("LIST") or len(text.split()) > 1:
        raise InputError(f"{fmt} data in several files (LIST or a pattern) is not read")
    relative = Path(text)
    if not text or relative.is_absolute() or ".." in relative.parts or text.startswith("~"):
        raise InputError(
            f"data file {text!r} is outside the header's folder (only a name or a relative path "
            "below it is read)"
        )
    folder = header_path.resolve().parent
    path = header_path.parent / relative
    if not path.resolve().is_relative_to(folder):
        raise InputError(f"data file {text!r} leads outside the header's folder (a link)")
    if not path.is_file():
        raise InputError(f"data file {path.name} is missing")
    return path


def check_data_size(path: Path, offset: int, needed: int) -> None:
    """Refuse raw data that holds fewer than `needed` bytes after `offset` (truncated)."""
    present = os.stat(path).st_size - offset
    if present < needed:
        raise InputError(f"truncated data in {path.name}: {max(present, 0)} of {needed} bytes")


def check_regular(path: Path) -> None:
    """Refuse what is not a regular file (a FIFO would block a reader forever, a device never
    end), before a library opens it by name."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputError(f"no such file: {path.name}") from None
    except OSError as error:
        raise InputError(f"cannot read {path.name}: {error.strerror or error}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{path.name} is a directory, not a volume file")
    if not stat.S_ISREG(mode):
        raise InputError(f"{path.name} is not a regular file; only files are read")
