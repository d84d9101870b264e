"""Independent references for the stages before labeling: scipy.ndimage and OpenCV for
the morphology, brute-force loops for the smoothing (written from the README's rules)."""

from __future__ import annotations

import math
from fractions import Fraction

import cv2
import numpy as np
import scipy.ndimage as ndi

#: generate_binary_structure's (rank, connectivity) for each of gccl's connectivities.
STRUCTURES = {4: (2, 1), 8: (2, 2), 6: (3, 1), 18: (3, 2), 26: (3, 3)}
#: Each option as erosions and dilations, in order.
PRIMITIVES = {
    "erode": ("erode",),
    "dilate": ("dilate",),
    "open": ("erode", "dilate"),
    "close": ("dilate", "erode"),
}


def scipy_mask(mask: np.ndarray, steps: list[tuple[str, int]], connectivity: int) -> np.ndarray:
    """The morphology steps by scipy.ndimage, with the border that never changes the
    result: foreground for an erosion (border_value=1), background for a dilation."""
    structure = ndi.generate_binary_structure(*STRUCTURES[connectivity])
    for name, n in steps:
        if not n:  # scipy's iterations=0 means "until nothing changes"; ours means off
            continue
        for op in PRIMITIVES[name]:
            if op == "erode":
                mask = ndi.binary_erosion(mask, structure, iterations=n, border_value=1)
            else:
                mask = ndi.binary_dilation(mask, structure, iterations=n, border_value=0)
    return mask


CV2_OPS = {"open": cv2.MORPH_OPEN, "close": cv2.MORPH_CLOSE}


def opencv_mask(mask: np.ndarray, steps: list[tuple[str, int]], connectivity: int) -> np.ndarray:
    """The morphology steps by cv2.erode/dilate/morphologyEx with their default border
    (borderType BORDER_CONSTANT with morphologyDefaultBorderValue)."""
    shape = cv2.MORPH_CROSS if connectivity == 4 else cv2.MORPH_RECT
    kernel = cv2.getStructuringElement(shape, (3, 3))
    image = mask.astype(np.uint8)
    for name, n in steps:
        if not n:  # OpenCV's iterations=0 is one iteration; ours means off
            continue
        if name == "erode":
            image = cv2.erode(image, kernel, iterations=n)
        elif name == "dilate":
            image = cv2.dilate(image, kernel, iterations=n)
        else:
            image = cv2.morphologyEx(image, CV2_OPS[name], kernel, iterations=n)
    return image.astype(bool)


def oracle_smooth(
    values: np.ndarray, mask: np.ndarray, kind: str, radius: int, at: np.ndarray | None = None
) -> list[list]:
    """V' per pixel (None off the mask, or off `at` where given) by plain loops over the window.

    Integers: floor(S / W + 1/2) in exact fractions. Floats: the documented order,
    rows i = -R..R each summed over j = -R..R (multiply, then add), in Python floats
    (IEEE float64), then S / W rounded to the input dtype.
    """
    if kind == "box":
        w = [1] * (2 * radius + 1)
    else:
        w = [math.comb(2 * radius, radius + k) for k in range(-radius, radius + 1)]
    height, width = values.shape
    floating = values.dtype.kind == "f"
    out: list[list] = []
    for y in range(height):
        row: list = []
        for x in range(width):
            if not (mask if at is None else at)[y, x]:
                row.append(None)
                continue
            total: float | int = 0.0 if floating else 0
            weight = 0
            for i in range(-radius, radius + 1):
                line: float | int = 0.0 if floating else 0
                for j in range(-radius, radius + 1):
                    yy, xx = y + i, x + j
                    inside = 0 <= yy < height and 0 <= xx < width and mask[yy, xx]
                    v = (
                        (float(values[yy, xx]) if floating else int(values[yy, xx]))
                        if inside
                        else 0
                    )
                    line = line + w[j + radius] * v
                    weight += w[i + radius] * w[j + radius] * inside
                total = total + w[i + radius] * line
            if floating:
                row.append(float(values.dtype.type(total / weight)))
            else:
                row.append(math.floor(Fraction(int(total), weight) + Fraction(1, 2)))
        out.append(row)
    return out


def oracle_fill(
    values: np.ndarray, readings: np.ndarray, final: np.ndarray, radius: int
) -> np.ndarray:
    """Tau mode's pixels added by morphology (in `final`, not in `readings`) filled with the
    box mean of the readings within `radius`; every other pixel keeps its value."""
    added = final & ~readings
    means = oracle_smooth(values, readings, "box", radius, at=added)
    filled = values.copy()
    for y, x in zip(*np.nonzero(added), strict=True):
        filled[y, x] = means[y][x]
    return filled
