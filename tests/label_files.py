"""Reading the label images gccl writes, for the tests: with Pillow and tifffile,
not with gccl's own decoder (ccl_cli.io.decode), so a test does not check the
package against itself.

Imported by name (`from label_files import read_label_image`), like oracles.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile
from PIL import Image


def read_label_image(path: Path | str) -> np.ndarray:
    """A label image gccl wrote (16-bit PNG or 32-bit TIFF, one page) as uint32."""
    path = Path(path)
    if path.suffix.lower() in (".tif", ".tiff"):
        array = tifffile.imread(path)
    else:
        with Image.open(path) as image:
            assert image.mode in ("I;16", "I"), f"{path}: a {image.mode} PNG, not 16-bit labels"
            array = np.asarray(image)
    assert array.ndim == 2, f"{path}: shape {array.shape}"
    assert array.dtype.kind in "ui" and array.min(initial=0) >= 0, f"{path}: {array.dtype}"
    return array.astype(np.uint32)
