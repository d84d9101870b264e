"""Volume files: reading them with their geometry, writing label volumes in kind.

The interface the pipeline calls (everything else is inside):

- volume_format(path, volume_flag) -> "nifti" | "nrrd" | "metaimage" | "tiff" | "npy" | None:
  whether a file is a volume (its name; a .npy's header; a TIFF's metadata, or --volume).
- read_volume(path, max_bytes) -> VolumeFile; read_slices(paths, max_bytes) -> VolumeFile
  (a folder's 2-D images, sorted first by natural_order(paths)).
  VolumeFile: values (D, H, W) = (z, y, x), native, C-contiguous; geometry (Geometry: spacing,
  origin, direction, units, space; Geometry.with_spacing for --spacing); format.
  Both raise InputError: one line, the reason; the caller names the input, as for images
  (a header's data file or an odd slice is named in the reason).
- volume_stem(path) + label_volume_suffix(source_format, label_format): the label volume's
  name (`ct.nii.gz` -> `ct` + `.labels.nii.gz`); label_format one of LABEL_VOLUME_FORMATS or
  None (the input's own).
- encode_label_volume(labels, kept, source, label_format) -> bytes or pieces of them, for
  OutDir.write.
- physical_columns(columns, geometry) -> {name: array}: physical volume and world centroid.
- volume_preview(labels, geometry) -> PNG bytes: three orthogonal maximum projections.

Format libraries are imported at the first file of their format: nibabel (NIfTI), pynrrd
(NRRD), SimpleITK (MetaImage, an optional extra), tifffile (TIFF), numpy (.npy).
"""

from __future__ import annotations

from .detect import (
    LABEL_VOLUME_FORMATS,
    label_volume_suffix,
    natural_order,
    volume_format,
    volume_stem,
)
from .encode import encode_label_volume, label_dtype
from .geometry import Geometry, VolumeFile
from .physical import physical_columns
from .preview import volume_preview
from .read import detached_data, read_slices, read_volume

__all__ = [
    "LABEL_VOLUME_FORMATS",
    "Geometry",
    "VolumeFile",
    "detached_data",
    "encode_label_volume",
    "label_dtype",
    "label_volume_suffix",
    "natural_order",
    "physical_columns",
    "read_slices",
    "read_volume",
    "volume_format",
    "volume_preview",
    "volume_stem",
]
