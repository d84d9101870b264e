"""NIfTI volumes (.nii, .nii.gz; NIfTI-1 and NIfTI-2) through nibabel.

nibabel gives voxels as (i, j, k) = (x, y, z), stored with i fastest, and the affine (sform,
else qform) maps them to RAS+ world coordinates in the header's units. The (D, H, W) array gccl
labels is the same memory read as (z, y, x). Labels are written with the input's header (its
sform, qform, codes, units, description, extensions), uint16 or uint32, no scaling, intent
"label", gzipped (gzip_members.py).

A file is read here in one pass (gzip_read.py inflates a .nii.gz) and its header parsed by
nibabel's header classes, within bounds: the header and its extensions are at most
MAX_HEADER_BYTES (a declared extension size cannot make gccl read gigabytes), the declared data
size is checked against --max-image-bytes and the memory labeling takes before any data is
read, an uncompressed file must hold the data its header declares, and compressed data is
decoded no further than that (a gzip bomb decodes no further). The data is read straight into
the array labeled (file reads and inflating release the GIL: threads reading other files go on
meanwhile), stored as NIfTI stores it (x fastest, the header's byte order), as nibabel reads it.
"""

from __future__ import annotations

import io
import logging
import os
import struct
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError
from .geometry import Geometry, VolumeFile, from_matrix, unit_name
from .gzip_members import gzip_members
from .gzip_read import GzipReader
from .limits import check_volume, squeeze_to_3d
from .npy_volume import native_contiguous

# nibabel logs and warns (on stderr) about oddities it works around; here a file either reads
# or fails as one InputError line, so neither is shown (as for tifffile: decode/tiff.py).
logging.getLogger("nibabel").setLevel(logging.CRITICAL)
warnings.filterwarnings("ignore", module=r"nibabel(\.|$)|ccl_cli\.io\.volumes\.nifti$")

#: The most bytes of header and extensions read before the data (a NIfTI's vox_offset).
MAX_HEADER_BYTES = 1 << 26
#: NIfTI-1 and NIfTI-2 header sizes, and where each keeps vox_offset (float32, int64).
_VOX_OFFSET = {348: (108, "f"), 540: (168, "q")}


def read_nifti(path: Path, max_bytes: int) -> VolumeFile:
    """Read a 3-D NIfTI (a 4-D one whose extra axes hold one element reads as 3-D, a 2-D one as
    one plane)."""
    with open(path, "rb", buffering=0) as handle:
        if path.name.lower().endswith(".gz"):
            reader = GzipReader(handle)
            header, raw = _read_image(reader, max_bytes, None)
            reader.read_past()  # trailers checked; data past the volume is not read
        else:
            header, raw = _read_image(handle, max_bytes, os.fstat(handle.fileno()).st_size)
    slope, inter = header.get_slope_inter()
    if slope is not None and (slope, inter) != (1.0, 0.0):
        scaled = raw.astype(_scaled_dtype(raw.dtype))
        scaled *= slope
        scaled += inter or 0.0
        raw = scaled
    # (x, y, z) with x fastest is (z, y, x) in C order: the transpose is a view.
    values = native_contiguous(raw.transpose(2, 1, 0))
    units = unit_name(header.get_xyzt_units()[0])
    # The affine nibabel.load gives a NIfTI: the sform, else the qform, else the voxel sizes.
    affine = np.asarray(header.get_best_affine(), dtype=np.float64)
    geometry = from_matrix(affine[:3, :3], affine[:3, 3], units, "RAS", header)
    return VolumeFile(values, geometry, "nifti")


def encode_nifti(
    labels: np.ndarray, kept: int, geometry: Geometry, same_format: bool
) -> Iterator[bytes]:
    """A (D, H, W) label volume as a .nii.gz with the input's header when it was a NIfTI, else
    a header from the geometry (spacing, origin, direction; units)."""
    import nibabel

    data = labels.transpose(2, 1, 0)  # (x, y, z), x fastest: the same memory
    if same_format:
        source = geometry.native
        image_class = nibabel.Nifti2Image if source.sizeof_hdr == 540 else nibabel.Nifti1Image
        header = source.copy()
        image = image_class(data, None, header)
    else:
        image = nibabel.Nifti1Image(data, geometry.in_space("RAS").matrix())
        image.header.set_xyzt_units(_nifti_unit(geometry.units))
    header = image.header
    header.set_data_dtype(labels.dtype)
    header.set_slope_inter(1.0, 0.0)
    header.set_intent("label")
    header["cal_min"], header["cal_max"] = 0, kept
    image.update_header()
    block = io.BytesIO()
    header.write_to(block)
    offset = int(header["vox_offset"])
    prefix = block.getvalue().ljust(offset, b"\0")
    return gzip_members([prefix, np.ascontiguousarray(labels).reshape(-1).view(np.uint8)])


def _nifti_unit(units: str) -> str:
    return {"mm": "mm", "um": "micron", "m": "meter"}.get(units, "unknown")


def _scaled_dtype(raw: np.dtype) -> np.dtype:
    """float32 where it holds every raw value exactly (8- and 16-bit), else float64."""
    return np.dtype(np.float32 if raw.kind in "biu" and raw.itemsize <= 2 else np.float64)


def _read_image(reader: Any, max_bytes: int, file_size: int | None) -> tuple[Any, np.ndarray]:
    """The header and the unscaled (x, y, z) values of the NIfTI whose bytes `reader` gives
    from the start (a raw file of `file_size` bytes, or a GzipReader: None), read within bounds
    (module doc)."""
    import nibabel

    start = _read(reader, 552)
    sizeof_hdr, order = _header_size(start)
    where, kind = _VOX_OFFSET[sizeof_hdr]
    vox_offset = int(struct.unpack_from(order + kind, start, where)[0])
    if not sizeof_hdr + 4 <= vox_offset <= MAX_HEADER_BYTES:
        raise InputError(f"corrupt NIfTI header: data offset {vox_offset}")
    block = start + _read(reader, max(vox_offset - len(start), 0))
    holds = "gzip data holds" if file_size is None else "file holds"
    if len(block) < vox_offset:
        raise InputError(
            f"truncated NIfTI: its data starts at byte {vox_offset}, the {holds} {len(block)}"
        )
    header_class = nibabel.Nifti2Header if sizeof_hdr == 540 else nibabel.Nifti1Header
    header = header_class.from_fileobj(io.BytesIO(block[:vox_offset]))
    shape = _xyz_shape(header.get_data_shape())
    check_volume(tuple(reversed(shape)), _value_dtype(header), max_bytes)
    dtype = header.get_data_dtype()
    needed = vox_offset + int(np.prod(shape)) * dtype.itemsize
    if file_size is not None and file_size < needed:
        raise InputError(
            f"truncated NIfTI: the header declares {needed} bytes, the file holds {file_size}"
        )
    flat = np.empty(int(np.prod(shape)), dtype=dtype)
    data = flat.view(np.uint8)
    # A header shorter than 552 bytes leaves the data's first bytes among those read already.
    ahead = block[vox_offset : vox_offset + data.size]
    data[: len(ahead)] = np.frombuffer(ahead, dtype=np.uint8)
    got = len(ahead) + _fill(reader, data[len(ahead) :])
    if got < data.size:
        raise InputError(
            f"truncated NIfTI: the header declares {needed} bytes, the {holds} {vox_offset + got}"
        )
    # NIfTI stores x fastest (Fortran order), as nibabel's array_from_file reads it.
    return header, flat.reshape(shape, order="F")


def _read(reader: Any, count: int) -> bytes:
    """The next `count` bytes of `reader`, fewer where it ends."""
    buffer = np.empty(count, dtype=np.uint8)
    return buffer[: _fill(reader, buffer)].tobytes()


def _fill(reader: Any, buffer: np.ndarray) -> int:
    """Read `reader`'s next bytes into `buffer` (uint8, contiguous) until it is full or the
    reader ends (a raw file may return fewer than asked): the count read."""
    filled = 0
    while filled < buffer.size:
        count = reader.readinto(buffer[filled:])
        if not count:
            break
        filled += count
    return filled


def _xyz_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A NIfTI's (x, y, z, ...) shape as 3 axes: extra axes of one element dropped, a 2-D image
    as one plane (z of 1); 4-D data of more stays 4-D (check_volume refuses it)."""
    shape = squeeze_to_3d(shape)
    return shape + (1,) * (3 - len(shape))


def _value_dtype(header: Any) -> np.dtype:
    """The dtype values are labeled in: the stored one, or a float one when scaled."""
    raw = header.get_data_dtype()
    slope, inter = header.get_slope_inter()
    if slope is not None and (slope, inter) != (1.0, 0.0):
        return _scaled_dtype(raw)
    return raw


def _header_size(start: bytes) -> tuple[int, str]:
    """(sizeof_hdr, byte order) of a NIfTI header's first bytes."""
    if len(start) < 348:
        raise InputError("truncated NIfTI header")
    for order in "<>":
        size = struct.unpack_from(order + "i", start)[0]
        if size in _VOX_OFFSET and len(start) >= size:
            return size, order
    raise InputError("not a NIfTI file (its header size is neither 348 nor 540)")
