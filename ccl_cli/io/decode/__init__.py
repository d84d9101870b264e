"""Input images decoded to displayed intensity: a 2-D array of one of
`params.SUPPORTED_DTYPES`, whatever the storage (1-bit images as bool with ink False,
MinIsWhite flipped, gray palettes looked up). Every problem with an input is one
`InputError` line; a traceback would mean a bug here.

- read.py: the entry (read_image, image_pages, is_image_path, may_hold_pages, unreadable):
  the file opened, the format recognised by its magic bytes, colour reduced.
- png.py, tiff.py (with tiff_layout.py, the page directories read as far as sizing a
  decode needs), npy.py, camera.py (JPEG, BMP, WebP): one module per format family.
- pixels.py: palettes, --color-to-gray, the dtypes gccl labels.
- checks.py: memory limits before each allocation, library failures as one line.
"""

from .read import (
    IMAGE_SUFFIXES,
    image_pages,
    is_image_path,
    may_hold_pages,
    read_image,
    unreadable,
)

__all__ = [
    "IMAGE_SUFFIXES",
    "image_pages",
    "is_image_path",
    "may_hold_pages",
    "read_image",
    "unreadable",
]
