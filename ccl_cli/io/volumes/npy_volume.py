"""3-D NumPy .npy volumes: never a pickle, the header checked before the data is read; labels
written as .npy. A .npy states no geometry: voxel size unknown, origin 0, identity axes."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from ...errors import InputError
from .geometry import Geometry, VolumeFile
from .limits import check_volume, squeeze_to_3d


def read_npy_volume(path: Path, max_bytes: int) -> VolumeFile:
    """Read a 3-D .npy (C or Fortran order, any byte order) as (D, H, W) native values."""
    fmt = np.lib.format
    with open(path, "rb") as handle:
        try:
            major, _ = fmt.read_magic(handle)
            read_header = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
            shape, fortran_order, dtype = read_header(handle)
        except ValueError as error:
            raise InputError(f"corrupt NPY header: {error}") from None
        if dtype.hasobject:
            raise InputError("NPY of Python objects (a pickle); only numeric arrays are read")
        check_volume(squeeze_to_3d(shape), dtype, max_bytes)
        count = int(np.prod(shape))
        present = (os.fstat(handle.fileno()).st_size - handle.tell()) // max(dtype.itemsize, 1)
        if present < count:
            raise InputError(f"truncated NPY: {present} of {count} values present")
        flat = np.fromfile(handle, dtype=dtype, count=count)
    if flat.size != count:
        raise InputError(f"truncated NPY: {flat.size} of {count} values present")
    values = flat.reshape(squeeze_to_3d(shape), order="F" if fortran_order else "C")
    return VolumeFile(native_contiguous(values), Geometry(), "npy")


def native_contiguous(values: np.ndarray) -> np.ndarray:
    """`values` C-contiguous in native byte order, swapped in place where it may be."""
    if not values.dtype.isnative:
        if values.flags.writeable and values.flags.c_contiguous:
            values = values.byteswap(inplace=True).view(values.dtype.newbyteorder("="))
        else:
            values = values.astype(values.dtype.newbyteorder("="))
    return np.ascontiguousarray(values)


def encode_npy_volume(labels: np.ndarray) -> bytes:
    """Labels (D, H, W), already of their written dtype, as a .npy (version 1.0 or 2.0)."""
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.ascontiguousarray(labels), allow_pickle=False)
    return buffer.getvalue()
