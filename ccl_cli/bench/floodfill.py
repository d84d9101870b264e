"""Tau mode the OpenCV way: region growing with cv2.floodFill, one region per call.

OpenCV has no grayscale connected-components labeling; a user who needs one
grows regions with floodFill. Its floating range (a pixel joins when it is
within tau of a neighbour already in the region) is exactly tau mode's
chaining join, so the result must equal gccl's. One Python-level call per
component makes it slow on large or noisy images, hence the size cap.
"""

from __future__ import annotations

import numpy as np

from ..contract.params import LabelParams, foreground_mask


def flood_fill_labels(values: np.ndarray, params: LabelParams) -> tuple[int, np.ndarray]:
    """(components, int32 labels in raster order) of one (H, W) image in tau mode.

    Regions grow from each pixel not yet labeled, in raster order; the
    floodFill mask starts with the background set, so no region crosses it.
    Values are labeled as uint8 or float32 (floodFill's types; exact for
    8- and 16-bit images).
    """
    import cv2

    assert params.tau is not None
    height, width = values.shape
    image = values if values.dtype == np.uint8 else values.astype(np.float32)
    mask = np.zeros((height + 2, width + 2), np.uint8)
    inner = mask[1:-1, 1:-1]
    inner[...] = ~foreground_mask(values, params)
    labels = np.zeros((height, width), np.int32)
    flags = params.connectivity | cv2.FLOODFILL_MASK_ONLY | (2 << 8)
    count = 0
    for y in range(height):
        for x in np.flatnonzero(inner[y] == 0):
            if inner[y, x]:  # grown over by a region started earlier in this row
                continue
            _, _, _, (left, top, w, h) = cv2.floodFill(
                image, mask, (int(x), int(y)), 0, params.tau, params.tau, flags
            )
            count += 1
            region = inner[top : top + h, left : left + w]
            grown = region == 2
            labels[top : top + h, left : left + w][grown] = count
            region[grown] = 1
    return count, labels
