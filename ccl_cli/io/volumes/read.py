"""One volume file, or a folder's 2-D slices, to a VolumeFile: the format's reader called,
every library failure turned into one InputError line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ...contract.params import SUPPORTED_DTYPES
from ...errors import InputError
from ..decode import read_image
from ..decode.checks import decoding
from .detect import format_of_name
from .geometry import Geometry, VolumeFile
from .limits import check_regular, check_volume

#: The names formats go by in messages.
_NAMES = {
    "nifti": "NIfTI",
    "nrrd": "NRRD",
    "metaimage": "MetaImage",
    "tiff": "TIFF stack",
    "npy": "NPY",
}


def read_volume(path: Path, max_bytes: int) -> VolumeFile:
    """Read the volume file `path` (a name volume_format took for a volume).

    Returns its values as (D, H, W) = (z, y, x), C-contiguous, native byte order, of a dtype
    labeling takes, with their geometry. The values' size is checked against `max_bytes`, and
    with uint32 labels against the memory available, from the header before any data is
    decoded; compressed data never decodes past the size its header declares.
    Raises InputError, one line: the reason, naming any file other than `path` it concerns
    (a header's data file); the caller names `path`, as for images.
    """
    path = Path(path)
    check_regular(path)
    fmt = format_of_name(path)
    with decoding(_NAMES.get(fmt or "", "volume")):
        if fmt == "npy":
            from .npy_volume import read_npy_volume

            return _checked(read_npy_volume(path, max_bytes))
        if fmt == "nifti":
            from .nifti import read_nifti

            return _checked(read_nifti(path, max_bytes))
        if fmt == "nrrd":
            from .nrrd_volume import read_nrrd

            return _checked(read_nrrd(path, max_bytes))
        if fmt == "metaimage":
            from .metaimage import read_metaimage

            return _checked(read_metaimage(path, max_bytes))
        if fmt == "tiff":
            from .tiff_stack import read_tiff_stack

            return _checked(read_tiff_stack(path, max_bytes))
    raise InputError(f"not a volume file gccl reads: {path.name}")


def detached_data(path: Path) -> Path | None:
    """The data file a volume header names apart from itself (an .mhd's or .nhdr's), or None
    (any other file, data in the header's own file, a header that does not read: reading the
    volume says why)."""
    path = Path(path)
    fmt = format_of_name(path)
    try:
        if fmt == "metaimage" and path.suffix.lower() == ".mhd":
            from .metaimage import detached_data as mhd_data

            return mhd_data(path)
        if fmt == "nrrd" and path.suffix.lower() == ".nhdr":
            from .nrrd_volume import detached_data as nhdr_data

            return nhdr_data(path)
    except Exception:  # (pynrrd raises its own errors for a header it cannot read)
        return None
    return None


def read_slices(paths: Sequence[Path], max_bytes: int) -> VolumeFile:
    """A folder's 2-D images as one volume, `paths` in the order given (natural_order sorts
    them): slice k is plane z = k. Every slice must have the first one's shape and dtype (else
    InputError naming the odd slice). The volume is allocated once, its size checked against
    `max_bytes` from the first slice before the others are read. No geometry: the slices state
    no voxel size gccl reads (a --spacing gives one).
    """
    if not paths:
        raise InputError("no slices to stack")
    first = _read_slice(paths[0], max_bytes)
    check_volume((len(paths), *first.shape), first.dtype, max_bytes)
    values = np.empty((len(paths), *first.shape), dtype=first.dtype)
    values[0] = first
    for z, path in enumerate(paths[1:], start=1):
        plane = _read_slice(path, max_bytes)
        if plane.shape != first.shape or plane.dtype != first.dtype:
            raise InputError(
                f"slice {path.name} is {_kind(plane)} where {paths[0].name} is {_kind(first)}: "
                "every slice of a volume must have the same shape and type"
            )
        values[z] = plane
    return VolumeFile(values, Geometry(), "slices")


def _checked(volume: VolumeFile) -> VolumeFile:
    """`volume` as the interface promises it: 3-D, C-contiguous, native, a dtype labeling takes
    (a library may give another than its header declared: refused, not passed on)."""
    values = volume.values
    if values.ndim != 3 or values.dtype not in SUPPORTED_DTYPES:
        raise InputError(f"unsupported volume: {values.ndim}-D {values.dtype}")
    if not values.flags.c_contiguous:
        volume.values = np.ascontiguousarray(values)
    return volume


def _read_slice(path: Path, max_bytes: int) -> np.ndarray:
    try:
        return read_image(path, max_bytes=max_bytes)
    except InputError as error:
        raise InputError(f"slice {path.name}: {error}") from None


def _kind(plane: np.ndarray) -> str:
    height, width = plane.shape
    return f"{width}x{height} {plane.dtype}"
