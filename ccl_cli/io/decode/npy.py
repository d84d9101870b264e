"""NumPy .npy decoding: 2-D arrays only, never a pickle, the header checked before the
data is read."""

from __future__ import annotations

from typing import BinaryIO

import numpy as np

from ...errors import InputError
from .checks import check_size, decoding, not_2d
from .pixels import supported_dtype

MAGIC = b"\x93NUMPY"


def read_npy(handle: BinaryIO, max_bytes: int) -> np.ndarray:
    """Read a 2-D .npy without pickles; header checked before the data is read."""
    fmt = np.lib.format
    with decoding("NPY"):
        major, _ = fmt.read_magic(handle)
        read_header = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, fortran_order, dtype = read_header(handle)
        if len(shape) != 2:
            raise not_2d(shape)
        supported_dtype(dtype)
        check_size(shape[0], shape[1], 1, dtype.itemsize, max_bytes)
        count = shape[0] * shape[1]
        flat = np.fromfile(handle, dtype=dtype, count=count)
        if flat.size != count:
            raise InputError(f"corrupt or truncated NPY: {flat.size} of {count} values present")
        return flat.reshape(shape, order="F" if fortran_order else "C")
