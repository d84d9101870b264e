"""NumPy .npy decoding: 2-D arrays only, never a pickle, the header checked before the
data is read."""

from __future__ import annotations

import io
import os

import numpy as np

from ...errors import InputError
from .checks import check_size, decoding, not_2d
from .pixels import supported_dtype

MAGIC = b"\x93NUMPY"
#: The header versions numpy writes (3.0: a header in UTF-8, which a 2-D array of the
#: dtypes gccl reads never needs); any other is refused before its header is read.
_VERSIONS = ((1, 0), (2, 0), (3, 0))


def read_npy(handle: io.BufferedReader, max_bytes: int) -> np.ndarray:
    """Read a 2-D .npy without pickles; the header and the file's size are checked before
    exactly the values the header declares are read."""
    fmt = np.lib.format
    with decoding("NPY"):
        version = fmt.read_magic(handle)
        if version not in _VERSIONS:
            major, minor = version
            raise InputError(f"NPY format version {major}.{minor}: numpy writes 1.0, 2.0, 3.0")
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran_order, dtype = read_header(handle)
        if len(shape) != 2:
            raise not_2d(shape)
        if min(shape) < 0:
            raise InputError(f"corrupt NPY: shape {shape}")
        supported_dtype(dtype)
        check_size(shape[0], shape[1], 1, dtype.itemsize, max_bytes)
        count = shape[0] * shape[1]
        present = (os.fstat(handle.fileno()).st_size - handle.tell()) // dtype.itemsize
        if present < count:  # refused before the values are read
            raise InputError(f"corrupt or truncated NPY: {present} of {count} values present")
        flat = np.fromfile(handle, dtype=dtype, count=count)
        if flat.size != count:
            raise InputError(f"corrupt or truncated NPY: {flat.size} of {count} values present")
        return flat.reshape(shape, order="F" if fortran_order else "C")
