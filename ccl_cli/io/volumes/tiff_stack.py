"""TIFF z-stacks through tifffile: ImageJ hyperstacks and OME-TIFF (their voxel size kept), and
plain multi-page TIFFs that --volume calls a stack.

tifffile gives a stack's series as (z, y, x) with its axes named ("ZYX"; a plain file's pages
"IYX"). The voxel size: ImageJ keeps x and y in the first page's XResolution and YResolution tags
(pixels per unit), z as `spacing` and the unit in its metadata; OME in the Pixels element's
PhysicalSizeX/Y/Z (micrometres unless a PhysicalSize*Unit says otherwise). Neither has an origin
or directions: origin 0, identity axes.

Label stacks are written as ImageJ hyperstacks (uint16, ImageJ reads no 32-bit integers), or past
65535 labels as an OME-TIFF of uint32 (Fiji reads it through Bio-Formats), each page deflated at
level 1 as label images are (label_images.py), BigTIFF past 4 GiB.
"""

from __future__ import annotations

import io
import logging
import math
import os
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import InputError
from ..label_images import LABEL_MARK
from .geometry import Geometry, VolumeFile, unit_name
from .limits import check_volume, encode_threads, not_3d
from .npy_volume import native_contiguous

#: Axes of a series that hold the planes of a stack: z, or a plain file's pages.
_PLANE_AXES = "ZIQ"
#: Bytes past which a label stack is written as BigTIFF (classic TIFF offsets are 32-bit).
_BIGTIFF_BYTES = 2**32 - 2**25
#: ImageJ's names of the units gccl knows.
_IMAGEJ_UNITS = {"um": "micron", "mm": "mm", "nm": "nm", "cm": "cm", "m": "m", "in": "inch"}
_OME_UNITS = {"um": "µm", "mm": "mm", "nm": "nm", "cm": "cm", "m": "m", "in": "in"}

logging.getLogger("tifffile").setLevel(logging.CRITICAL)  # one line per file (decode/tiff.py)


def tiff_z_planes(path: Path) -> tuple[int, bool]:
    """(planes, declared): how many pages the TIFF's first series has along its plane axis,
    and whether its metadata declares a z axis of more than one plane (ImageJ `slices=`, OME
    SizeZ)."""
    import tifffile

    with tifffile.TiffFile(path) as tiff:
        series = tiff.series[0]
        sizes = dict(zip(series.axes, series.shape, strict=True))
        declared = (tiff.is_imagej or tiff.is_ome) and sizes.get("Z", 1) > 1
        planes = math.prod(n for axis, n in sizes.items() if axis in _PLANE_AXES)
        return planes, declared


def read_tiff_stack(path: Path, max_bytes: int) -> VolumeFile:
    """Read a TIFF's first series as a (z, y, x) volume; channels or time points of more than
    one are refused, axes of one element dropped."""
    import tifffile

    with tifffile.TiffFile(path) as tiff:
        series = tiff.series[0]
        axes = "".join(a for a, n in zip(series.axes, series.shape, strict=True) if n > 1)
        shape = tuple(n for n in series.shape if n > 1)
        if "S" in axes:
            raise InputError("colour TIFF stack (samples per pixel > 1); gray stacks are labeled")
        if len(shape) > 3 or (len(shape) == 3 and axes[0] not in _PLANE_AXES):
            raise not_3d(tuple(series.shape))
        shape = (1,) * (3 - len(shape)) + shape
        check_volume(shape, series.dtype, max_bytes)
        if series.axes[0] in "IQ":
            _check_pages_alike(tiff, series)
        _check_contiguous(series, path)
        values = series.asarray(maxworkers=1).reshape(shape)
        geometry = _geometry(tiff)
    return VolumeFile(native_contiguous(values), geometry, "tiff")


def _check_pages_alike(tiff: Any, series: Any) -> None:
    """Refuse a plain multi-page TIFF whose full-resolution pages are not all of the first
    series (tifffile groups pages of one shape and type): an odd page is named, never skipped."""
    taken = {page.index for page in series.pages if page is not None}
    for index, page in enumerate(tiff.pages):
        if index not in taken and not getattr(page, "is_reduced", False):
            first = series.pages[0]
            raise InputError(
                f"page {index + 1} is {_kind(page)} where page 1 is {_kind(first)}: every page "
                "of a stack must have the same shape and type"
            )


def _kind(page: Any) -> str:
    """A page's size and type as messages give them: 8x6 uint8."""
    return f"{page.imagewidth}x{page.imagelength} {page.dtype}"


def _check_contiguous(series: Any, path: Path) -> None:
    """Refuse an uncompressed stack stored in one run (ImageJ's files past 4 GiB) whose file
    ends before the data its first page declares for all planes."""
    offset = getattr(series, "dataoffset", None)
    if offset is not None:
        needed = offset + series.size * series.dtype.itemsize
        size = os.stat(path).st_size
        if size < needed:
            raise InputError(f"truncated TIFF stack: {size} of {needed} bytes")


def _geometry(tiff: Any) -> Geometry:
    """The voxel size ImageJ or OME metadata states (module doc), else none."""
    if tiff.is_ome and tiff.ome_metadata:
        found = _ome_spacing(tiff.ome_metadata)
        if found is not None:
            return Geometry(spacing=found[0], units=found[1], native=("ome", found))
    meta = tiff.imagej_metadata if tiff.is_imagej else None
    if meta and meta.get("unit") not in (None, "", "pixel"):
        page = tiff.pages[0]
        x = _pixel_size(page.tags.get("XResolution"))
        y = _pixel_size(page.tags.get("YResolution"))
        z = float(meta.get("spacing", 1.0))
        if x and y and z > 0:
            units = unit_name(str(meta["unit"]).replace("\\u00B5", "µ"))
            return Geometry(spacing=(x, y, z), units=units, native=("imagej", meta))
    return Geometry()


def _pixel_size(tag: Any) -> float | None:
    """The size of one pixel from a resolution tag (pixels per unit, a fraction), or None."""
    if tag is None:
        return None
    value = tag.value
    numerator, denominator = value if isinstance(value, tuple) else (value, 1)
    return float(denominator) / float(numerator) if numerator else None


def _ome_spacing(xml: str) -> tuple[tuple[float, float, float], str] | None:
    """(PhysicalSizeX, Y, Z) of the first image's Pixels and their unit, or None when absent."""
    root = ElementTree.fromstring(xml)
    pixels = next((e for e in root.iter() if e.tag.endswith("}Pixels") or e.tag == "Pixels"), None)
    if pixels is None:
        return None
    sizes, units = [], set()
    for axis in "XYZ":
        value = pixels.get(f"PhysicalSize{axis}")
        if value is None:
            return None
        sizes.append(float(value))
        units.add(pixels.get(f"PhysicalSize{axis}Unit", "µm"))
    if len(units) != 1 or min(sizes) <= 0:
        return None
    return (sizes[0], sizes[1], sizes[2]), unit_name(units.pop())


def encode_tiff_stack(labels: np.ndarray, geometry: Geometry) -> bytes:
    """A (D, H, W) label volume as a TIFF stack with the voxel size (module doc)."""
    import tifffile

    buffer = io.BytesIO()
    options: dict[str, Any] = {
        "photometric": "minisblack",
        "compression": "zlib",
        "compressionargs": {"level": 1},
        "software": LABEL_MARK.decode(),
        "bigtiff": labels.nbytes > _BIGTIFF_BYTES,
        # Pages deflated on several threads at once (the codec releases the GIL).
        "maxworkers": encode_threads(),
    }
    spacing = geometry.spacing
    if labels.dtype == np.uint16:
        metadata: dict[str, Any] = {"axes": "ZYX"}
        if spacing is not None:
            options["resolution"] = (1 / spacing[0], 1 / spacing[1])
            metadata["spacing"] = spacing[2]
            metadata["unit"] = _IMAGEJ_UNITS.get(geometry.units, geometry.units or "pixel")
        if labels.shape[2] == 1:  # (tifffile would take a last axis of 1 for samples)
            labels, metadata["axes"] = labels[..., np.newaxis], "ZYXS"
        tifffile.imwrite(buffer, labels, imagej=True, metadata=metadata, **options)
    else:
        metadata = {"axes": "ZYX"}
        if spacing is not None:
            for axis, size in zip("XYZ", spacing, strict=True):
                metadata[f"PhysicalSize{axis}"] = size
                if geometry.units:
                    metadata[f"PhysicalSize{axis}Unit"] = _OME_UNITS.get(
                        geometry.units, geometry.units
                    )
        tifffile.imwrite(buffer, labels, ome=True, metadata=metadata, **options)
    return buffer.getvalue()
