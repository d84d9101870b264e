"""Images the --polygons tests (CPU and GPU) trace: the nasty cases as values to label."""

from __future__ import annotations

import numpy as np
from shapes import NASTY, checkerboard, rings, spiral


def _u_with_pinch() -> np.ndarray:
    """A U whose tips touch diagonally: one 4-connected part around a hole that meets the
    outside at one corner (exterior and hole touch at a point)."""
    return np.array([[0, 1, 1], [1, 0, 1], [1, 1, 1]], np.uint8)


def _hole_with_island() -> np.ndarray:
    """A frame whose hole holds an island touching the frame's inner corner diagonally
    (8-connected: one component of two polygons)."""
    image = np.zeros((7, 7), np.uint8)
    image[1:6, 1:6] = 1
    image[2:5, 2:5] = 0
    image[3, 3] = 1
    image[2, 2] = 1  # touches the island diagonally, frame by edge
    return image


def _two_holes_touching() -> np.ndarray:
    """Two holes of one part meeting at a point."""
    image = np.ones((6, 6), np.uint8)
    image[1:3, 1:3] = 0
    image[3:5, 3:5] = 0
    return image


def _touching_labels() -> np.ndarray:
    """Different values side by side (tau 0 labels each value apart)."""
    return np.array([[1, 1, 2, 2, 0], [1, 3, 3, 2, 0], [4, 3, 0, 2, 5], [4, 4, 4, 5, 5]], np.uint8)


POLYGON_CASES: dict[str, np.ndarray] = {
    **{name: mask.astype(np.uint8) for name, mask in NASTY.items()},
    "checker 1xN": checkerboard(1, 9).astype(np.uint8),
    "U pinch": _u_with_pinch(),
    "hole with island": _hole_with_island(),
    "holes touching": _two_holes_touching(),
    "touching labels": _touching_labels(),
    "rings 20": rings(20)[0].astype(np.uint8),
    "spiral 24 and inverse": np.where(spiral(24), 1, 2).astype(np.uint8),
    "random values": np.random.default_rng(3).integers(0, 4, (23, 31)).astype(np.uint8),
}
