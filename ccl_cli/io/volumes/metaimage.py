"""MetaImage volumes (.mha, .mhd with its data file): read through SimpleITK (the optional extra
`metaimage`), label volumes written here as one .mha.

The header (`Key = Value` lines up to ElementDataFile) is read here first, within bounds: the
size its DimSize and ElementType declare is checked before SimpleITK allocates, an .mhd's data
file must lie in its folder (limits.data_file), raw data must be all there. SimpleITK then
reads the file; GetArrayFromImage gives (z, y, x), and GetSpacing, GetOrigin, GetDirection give
the geometry in (x, y, z) order in ITK's LPS world (Offset, ElementSpacing, TransformMatrix).
SimpleITK's image and the array copied from it are both held for a moment: a MetaImage takes
twice its values while it is read. Truncated data (raw, or shorter than CompressedDataSize) is
refused here: MetaIO would print its complaint to stderr besides raising.

Writing is done here, not by SimpleITK, which writes only to a path: the label volume is
streamed into gccl's atomic writer as a header of the input's geometry keys (spacing, offset,
transform matrix, anatomical orientation) and one zlib stream of the labels (zlib-ng, level 2).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import imagecodecs
import numpy as np

from ...errors import InputError
from .geometry import Geometry, VolumeFile, unit_name
from .gzip_members import GZIP_LEVEL
from .limits import check_data_size, check_volume, data_file, not_3d

#: The most header bytes read before ElementDataFile.
_MAX_HEADER = 1 << 20
#: MetaImage element types labeling takes.
_TYPES = {
    "MET_CHAR": "i1",
    "MET_UCHAR": "u1",
    "MET_SHORT": "i2",
    "MET_USHORT": "u2",
    "MET_INT": "i4",
    "MET_UINT": "u4",
    "MET_LONG": "i4",
    "MET_ULONG": "u4",
    "MET_FLOAT": "f4",
    "MET_DOUBLE": "f8",
}
_MET_TYPES = {"u2": "MET_USHORT", "u4": "MET_UINT"}
INSTALL_HINT = "reading MetaImage (.mha, .mhd) needs SimpleITK: pip install 'gccl[metaimage]'"


def simpleitk() -> ModuleType:
    """SimpleITK, imported at the first MetaImage read; InputError saying how to install it."""
    try:
        import SimpleITK
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return SimpleITK


def read_header(path: Path) -> dict[str, str]:
    """The header's keys and values, up to and with ElementDataFile (the last key)."""
    with open(path, "rb") as handle:
        text = handle.read(_MAX_HEADER)
    fields: dict[str, str] = {}
    for line in text.split(b"\n"):
        if not line.strip():
            continue
        key, sep, value = line.decode("latin-1").partition("=")
        if not sep:
            raise InputError("corrupt MetaImage header: a line without '='")
        fields[key.strip()] = value.strip()
        if key.strip() == "ElementDataFile":
            return fields
    raise InputError("corrupt MetaImage header: no ElementDataFile within 1 MiB")


def detached_data(path: Path) -> Path | None:
    """The data file an .mhd header names (None for LOCAL data); InputError for a header that
    does not read, or data in several files or outside its folder."""
    name = read_header(path)["ElementDataFile"]
    return None if name.upper() == "LOCAL" else data_file(path, name, "MetaImage")


def read_metaimage(path: Path, max_bytes: int) -> VolumeFile:
    """Read a 3-D MetaImage (a 2-D one as a volume of one plane)."""
    header = read_header(path)
    dims = [int(n) for n in header.get("DimSize", "").split()]
    if header.get("NDims") and int(header["NDims"]) != len(dims):
        raise InputError("corrupt MetaImage header: NDims and DimSize disagree")
    if len(dims) > 3 or int(header.get("ElementNumberOfChannels", "1")) != 1:
        channels = int(header.get("ElementNumberOfChannels", "1"))
        raise not_3d(tuple(reversed(dims)) + ((channels,) if channels > 1 else ()))
    element = header.get("ElementType", "")
    if element not in _TYPES:
        raise InputError(f"unsupported MetaImage element type {element!r}")
    shape = tuple(reversed(dims)) if len(dims) == 3 else (1, *reversed(dims))
    dtype = np.dtype(_TYPES[element])
    check_volume(shape, dtype, max_bytes)
    needed = math.prod(shape) * dtype.itemsize
    name = header["ElementDataFile"]
    compressed = header.get("CompressedData", "False").lower() == "true"
    if name.upper() == "LOCAL":
        source, offset = path, _data_start(path)
    else:
        source = data_file(path, name, "MetaImage")
        skip = int(header.get("HeaderSize", "0"))
        offset = max(os.stat(source).st_size - needed, 0) if skip == -1 else skip
    if not compressed:
        check_data_size(source, offset, needed)
    elif os.stat(source).st_size - offset > 2 * needed + (1 << 20):
        raise InputError(f"corrupt MetaImage: more compressed data than {needed} bytes need")
    elif "CompressedDataSize" in header:
        check_data_size(source, offset, int(header["CompressedDataSize"]))
    sitk = simpleitk()
    image = sitk.ReadImage(str(path))
    values = sitk.GetArrayFromImage(image).reshape(shape)
    return VolumeFile(np.ascontiguousarray(values), _geometry(image, header), "metaimage")


def _data_start(path: Path) -> int:
    """Where an .mha's data starts: after the ElementDataFile line."""
    with open(path, "rb") as handle:
        text = handle.read(_MAX_HEADER)
    at = text.find(b"ElementDataFile")
    end = text.find(b"\n", at)
    return end + 1 if at >= 0 and end >= 0 else len(text)


def _geometry(image: object, header: dict[str, str]) -> Geometry:
    """Spacing, origin and direction as SimpleITK gives them ((x, y, z), LPS), padded to 3-D for
    a 2-D file; the header's other keys ride along for writing."""
    spacing = list(image.GetSpacing()) + [1.0] * (3 - image.GetDimension())  # type: ignore[attr-defined]
    origin = list(image.GetOrigin()) + [0.0] * (3 - image.GetDimension())  # type: ignore[attr-defined]
    n = image.GetDimension()  # type: ignore[attr-defined]
    flat = image.GetDirection()  # type: ignore[attr-defined]
    direction = np.eye(3)
    direction[:n, :n] = np.asarray(flat, dtype=np.float64).reshape(n, n)
    stated = any(k in header for k in ("ElementSpacing", "ElementSize"))
    return Geometry(
        spacing=(float(spacing[0]), float(spacing[1]), float(spacing[2])) if stated else None,
        origin=(float(origin[0]), float(origin[1]), float(origin[2])),
        direction=tuple((float(r[0]), float(r[1]), float(r[2])) for r in direction),
        units=unit_name(header.get("ElementUnits", "mm") or "mm"),
        space="LPS",
        native=header,
    )


def encode_metaimage(labels: np.ndarray, geometry: Geometry, same_format: bool) -> Iterator[bytes]:
    """A (D, H, W) label volume as one .mha: the geometry's keys and one zlib stream."""
    depth, height, width = labels.shape
    geometry = geometry.in_space("LPS")  # ITK's world
    spacing = geometry.spacing or (1.0, 1.0, 1.0)
    matrix = np.asarray(geometry.direction, dtype=np.float64)
    data = np.ascontiguousarray(labels).reshape(-1).view(np.uint8)
    stream = bytes(imagecodecs.zlibng_encode(data, level=GZIP_LEVEL))  # type: ignore[arg-type]
    lines = [
        ("ObjectType", "Image"),
        ("NDims", "3"),
        ("BinaryData", "True"),
        ("BinaryDataByteOrderMSB", "False" if np.little_endian else "True"),
        ("CompressedData", "True"),
        ("CompressedDataSize", str(len(stream))),
        # MetaIO's TransformMatrix lists the direction matrix row by row, ITK reads it so.
        ("TransformMatrix", " ".join(repr(float(v)) for v in matrix.T.reshape(-1))),
        ("Offset", " ".join(repr(float(v)) for v in geometry.origin)),
        ("CenterOfRotation", "0 0 0"),
    ]
    native = geometry.native if same_format and isinstance(geometry.native, dict) else {}
    if "AnatomicalOrientation" in native:
        lines.append(("AnatomicalOrientation", native["AnatomicalOrientation"]))
    lines += [
        ("ElementSpacing", " ".join(repr(float(v)) for v in spacing)),
        ("DimSize", f"{width} {height} {depth}"),
        ("ElementType", _MET_TYPES[labels.dtype.str[1:]]),
        ("ElementDataFile", "LOCAL"),
    ]
    yield "".join(f"{key} = {value}\n" for key, value in lines).encode("ascii")
    yield stream
