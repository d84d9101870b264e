"""NRRD volumes (.nrrd, 3D Slicer's .seg.nrrd, .nhdr with a detached data file) through pynrrd.

pynrrd parses the header; its `sizes` and per-axis fields run fastest axis first, (x, y, z),
and the data is read as (z, y, x). An axis's `space directions` vector is its step in the
world, so the vectors are the columns of the voxel-to-world matrix, and `space origin` is voxel
(0, 0, 0)'s position in the file's `space` (in its `space units`).

The data is read here, not by pynrrd.read_data: that reads a raw file whole, whatever its size,
and decompresses gzip or bzip2 data without a bound. Here the header's size is checked first, a
detached data file must lie in the header's folder (limits.data_file), and compressed data never
decodes past the bytes the header declares.

Label volumes are written as one attached .nrrd (one gzip member: pynrrd reads no more;
gzip_members.py) with the input's space,
space directions, origin, units and kinds: the header text is written here with pynrrd's
formatters, because pynrrd's writer copies the data whole and compresses it with zlib.
"""

from __future__ import annotations

import bz2
import io
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError
from .geometry import Geometry, VolumeFile, from_matrix, unit_name
from .gzip_members import gzip_single
from .gzip_read import GzipReader
from .limits import check_volume, data_file, not_3d
from .npy_volume import native_contiguous

#: The longest header line, and the most lines, read before the data.
_MAX_LINE = 1 << 20
_MAX_LINES = 10_000
#: NRRD type names (the spec's aliases) to numpy.
_TYPES = {
    **dict.fromkeys(["signed char", "int8", "int8_t"], "i1"),
    **dict.fromkeys(["uchar", "unsigned char", "uint8", "uint8_t"], "u1"),
    **dict.fromkeys(
        ["short", "short int", "signed short", "signed short int", "int16", "int16_t"], "i2"
    ),
    **dict.fromkeys(["ushort", "unsigned short", "unsigned short int", "uint16", "uint16_t"], "u2"),
    **dict.fromkeys(["int", "signed int", "int32", "int32_t"], "i4"),
    **dict.fromkeys(["uint", "unsigned int", "uint32", "uint32_t"], "u4"),
    **dict.fromkeys(
        [
            "longlong",
            "long long",
            "long long int",
            "signed long long",
            "signed long long int",
            "int64",
            "int64_t",
        ],
        "i8",
    ),
    **dict.fromkeys(
        ["ulonglong", "unsigned long long", "unsigned long long int", "uint64", "uint64_t"], "u8"
    ),
    "float": "f4",
    "double": "f8",
}
#: World frames NRRD names, and the short names other formats use.
_SPACES = {
    "right-anterior-superior": "RAS",
    "ras": "RAS",
    "left-posterior-superior": "LPS",
    "lps": "LPS",
    "left-anterior-superior": "LAS",
    "las": "LAS",
}
_SPACE_NAMES = {
    "RAS": "right-anterior-superior",
    "LPS": "left-posterior-superior",
    "LAS": "left-anterior-superior",
}
#: Per-axis header fields, kept (for the axes kept) when a label volume is written.
_AXIS_FIELDS = (
    "space directions",
    "kinds",
    "spacings",
    "units",
    "axis mins",
    "axis maxs",
    "centerings",
    "labels",
    "thicknesses",
)


def detached_data(path: Path) -> Path | None:
    """The data file an .nhdr header names (None for data in the file itself); InputError for
    data in several files or outside its folder (and pynrrd's errors for a header that does
    not read)."""
    import nrrd

    with open(path, "rb") as handle:
        header = nrrd.read_header(_header_lines(handle))
    name = header.get("data file", header.get("datafile"))
    return None if name is None else data_file(path, str(name), "NRRD")


def read_nrrd(path: Path, max_bytes: int) -> VolumeFile:
    """Read a 3-D NRRD (axes of one element beyond the three spatial ones are dropped)."""
    import nrrd

    with open(path, "rb") as handle:
        header = nrrd.read_header(_header_lines(handle))
        sizes = [int(n) for n in header["sizes"]]
        kept = _spatial_axes(header, sizes)
        type_name = str(header["type"]).strip().lower()
        if type_name not in _TYPES:
            raise InputError(f"unsupported NRRD type {header['type']!r}")
        dtype = np.dtype(_TYPES[type_name])
        if dtype.itemsize > 1:
            dtype = dtype.newbyteorder("<" if header.get("endian", "little") == "little" else ">")
        shape = tuple(sizes[axis] for axis in reversed(kept))  # (z, y, x)
        check_volume(shape, dtype, max_bytes)
        needed = math.prod(shape) * dtype.itemsize
        name = header.get("data file", header.get("datafile"))
        if name is None:
            flat = _read_data(handle, header, dtype, needed, max_bytes)
        else:
            with open(data_file(path, str(name), "NRRD"), "rb") as data:
                flat = _read_data(data, header, dtype, needed, max_bytes)
    values = native_contiguous(flat.reshape(shape))
    geometry = _geometry(header, kept)
    return VolumeFile(values, geometry, "nrrd")


def _header_lines(handle: io.BufferedReader) -> Iterator[bytes]:
    """The header's lines, each at most _MAX_LINE bytes, up to its blank line (pynrrd stops
    there, leaving `handle` at the first byte of the data)."""
    for _ in range(_MAX_LINES):
        line = handle.readline(_MAX_LINE)
        if len(line) == _MAX_LINE and not line.endswith(b"\n"):
            raise InputError("corrupt NRRD header: a line of more than 1 MiB")
        if not line:
            raise InputError("truncated NRRD header: no blank line before the data")
        yield line
    raise InputError("corrupt NRRD header: more than 10000 lines")


def _spatial_axes(header: dict[str, Any], sizes: list[int]) -> list[int]:
    """The indexes of the axes that make the volume (x, y, z): all when 3, else those with a
    space direction, or of more than one element; 4-D data (channels, time) is refused."""
    if len(sizes) == 3:
        return [0, 1, 2]
    directions = header.get("space directions")
    spatial = [
        axis
        for axis, size in enumerate(sizes)
        if size > 1
        or (
            directions is not None and not np.isnan(np.asarray(directions[axis], dtype=float)).any()
        )
    ]
    if len(spatial) != 3 or any(sizes[a] > 1 for a in set(range(len(sizes))) - set(spatial)):
        raise not_3d(tuple(reversed(sizes)))
    return spatial


def _read_data(
    handle: Any, header: dict[str, Any], dtype: np.dtype, needed: int, max_bytes: int
) -> np.ndarray:
    """The data's `needed` bytes from `handle` (at the first byte after the header, or a data
    file's start), as a flat array of `dtype`."""
    for _ in range(int(header.get("line skip", header.get("lineskip", 0)))):
        handle.readline(_MAX_LINE)
    skip = int(header.get("byte skip", header.get("byteskip", 0)))
    encoding = str(header["encoding"]).strip().lower()
    remaining = os.fstat(handle.fileno()).st_size - handle.tell()
    if encoding == "raw":
        if skip == -1:  # the data is the file's last bytes
            skip = max(remaining - needed, 0)
        if remaining - skip < needed:
            raise InputError(f"truncated NRRD data: {max(remaining - skip, 0)} of {needed} bytes")
        handle.seek(skip, os.SEEK_CUR)
        flat = np.fromfile(handle, dtype=dtype, count=needed // dtype.itemsize)
        if flat.nbytes != needed:
            raise InputError(f"truncated NRRD data: {flat.nbytes} of {needed} bytes")
        return flat
    if encoding in ("gzip", "gz", "bzip2", "bz2"):
        if skip < 0:
            raise InputError("NRRD byte skip -1 with compressed data is not read")
        if remaining > 2 * (needed + skip) + (1 << 20):
            raise InputError(
                f"corrupt NRRD: {remaining} bytes of compressed data for {needed} bytes"
            )
        if encoding.startswith("gz"):
            return _gunzip(handle, needed, skip).view(dtype)
        data = _bunzip(handle.read(remaining), needed + skip)
        return np.frombuffer(data, dtype=dtype, offset=skip)
    if encoding in ("ascii", "text", "txt"):
        if remaining > max_bytes:
            raise InputError(
                f"NRRD text data of {remaining} bytes; --max-image-bytes is {max_bytes}"
            )
        flat = np.array(
            handle.read(remaining).split()[: needed // dtype.itemsize + 1], dtype=np.float64
        )
        if flat.size * dtype.itemsize != needed:
            raise InputError(
                f"NRRD text data holds {flat.size} values, not {needed // dtype.itemsize}"
            )
        return flat.astype(dtype)
    raise InputError(f"unsupported NRRD encoding {encoding!r}")


def _gunzip(handle: Any, needed: int, skip: int) -> np.ndarray:
    """The `needed` bytes after the first `skip` of the gzip data that `handle` holds from
    where it stands, as uint8, decoded no further (data past them is refused)."""
    reader = GzipReader(handle)
    data = np.empty(needed + skip, dtype=np.uint8)
    got = reader.readinto(data)  # fewer only where the gzip data ends
    if got < data.size:
        raise InputError(f"truncated NRRD data: {max(got - skip, 0)} of {needed} bytes")
    if reader.read_past():
        raise InputError(
            f"compressed data decodes past the {needed + skip} bytes its header declares"
        )
    return data[skip:]


def _bunzip(compressed: bytes, expected: int) -> bytearray:
    """bzip2 data decompressed to exactly `expected` bytes, never more."""
    decoder = bz2.BZ2Decompressor()
    out = bytearray()
    chunk = 1 << 22
    data = compressed
    while not decoder.eof:
        piece = decoder.decompress(data, min(chunk, expected + 1 - len(out)))
        data = b""
        out += piece
        if len(out) > expected:
            raise InputError(
                f"compressed data decodes past the {expected} bytes its header declares"
            )
        if not piece and decoder.needs_input:
            break
    if len(out) != expected:
        raise InputError(f"truncated compressed data: {len(out)} of {expected} bytes")
    return out


def _geometry(header: dict[str, Any], kept: list[int]) -> Geometry:
    """The Geometry of the kept axes (x, y, z): space directions and origin where the header
    has them, else `spacings`; the header and the kept axes ride along for writing."""
    native = (header, kept)
    space = _SPACES.get(str(header.get("space", "")).strip().lower(), str(header.get("space", "")))
    units_list = header.get("space units") or header.get("units") or []
    units = unit_name(next((u for u in units_list if u), ""))
    directions = header.get("space directions")
    if directions is not None:
        axes = np.asarray(directions, dtype=np.float64)[kept]
        if axes.shape == (3, 3) and np.isfinite(axes).all():
            origin = np.asarray(header.get("space origin", np.zeros(3)), dtype=np.float64)
            if origin.shape != (3,) or not np.isfinite(origin).all():
                origin = np.zeros(3)
            return from_matrix(axes.T, origin, units, space, native)
    spacings = header.get("spacings")
    if spacings is not None:
        values = np.asarray(spacings, dtype=np.float64)[kept]
        if np.isfinite(values).all() and (values > 0).all():
            return from_matrix(np.diag(values), np.zeros(3), units, space, native)
    return Geometry(units=units, space=space, native=native)


def encode_nrrd(labels: np.ndarray, geometry: Geometry, same_format: bool) -> Iterator[bytes]:
    """A (D, H, W) label volume as one gzip-encoded .nrrd with the input's geometry fields."""
    import nrrd

    depth, height, width = labels.shape
    fields: dict[str, str] = {
        "type": {"u2": "uint16", "u4": "uint32"}[labels.dtype.str[1:]],
        "dimension": "3",
    }
    if same_format:
        header, kept = geometry.native
        if "space" in header:
            fields["space"] = str(header["space"])
        elif "space dimension" in header:
            fields["space dimension"] = str(header["space dimension"])
        fields["sizes"] = f"{width} {height} {depth}"
        for name in _AXIS_FIELDS:
            if name in header and name != "space directions":
                quoted = name in ("units", "labels")
                fields[name] = " ".join(_word(header[name][axis], quoted) for axis in kept)
            elif name == "space directions" and name in header:
                rows = np.asarray(header[name], dtype=np.float64)[kept]
                fields[name] = " ".join(nrrd.format_optional_vector(row) for row in rows)
        for name in ("space units", "space origin", "measurement frame"):
            if name in header:
                value = header[name]
                fields[name] = (
                    " ".join(f'"{u}"' for u in value)
                    if name == "space units"
                    else nrrd.format_optional_vector(value)
                    if name == "space origin"
                    else nrrd.format_optional_matrix(value)
                )
    else:
        space = _SPACE_NAMES.get(geometry.space)
        if space:
            fields["space"] = space
        else:
            fields["space dimension"] = "3"
        fields["sizes"] = f"{width} {height} {depth}"
        axes = np.asarray(geometry.matrix()[:3, :3])
        fields["space directions"] = " ".join(nrrd.format_vector(axes[:, j]) for j in range(3))
        fields["kinds"] = "domain domain domain"
        if geometry.units:
            fields["space units"] = " ".join(f'"{geometry.units}"' for _ in range(3))
        fields["space origin"] = nrrd.format_vector(np.asarray(geometry.origin))
    if labels.dtype.itemsize > 1:
        fields["endian"] = "little" if _little(labels.dtype) else "big"
    fields["encoding"] = "gzip"
    text = "NRRD0004\n" + "".join(f"{name}: {value}\n" for name, value in _ordered(fields)) + "\n"
    yield text.encode("ascii")
    yield gzip_single(labels)


def _ordered(fields: dict[str, str]) -> list[tuple[str, str]]:
    order = [
        "type",
        "dimension",
        "space dimension",
        "space",
        "sizes",
        "space directions",
        "kinds",
        "endian",
        "encoding",
        "spacings",
        "thicknesses",
        "axis mins",
        "axis maxs",
        "centerings",
        "labels",
        "units",
        "space units",
        "space origin",
        "measurement frame",
    ]
    return [(name, fields[name]) for name in order if name in fields]


def _word(value: Any, quoted: bool) -> str:
    """One per-axis value as the header writes it (a number, a kind, a quoted label)."""
    if isinstance(value, str):
        return f'"{value}"' if quoted else value
    if value is None:
        return "none"
    number = float(value)
    return (
        "nan"
        if np.isnan(number)
        else repr(number)
        if not number.is_integer()
        else str(int(number))
        if abs(number) < 2**53
        else repr(number)
    )


def _little(dtype: np.dtype) -> bool:
    return dtype.byteorder == "<" or (dtype.byteorder == "=" and np.little_endian)
