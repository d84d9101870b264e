"""A label volume for people: one PNG of three orthogonal maximum projections."""

from __future__ import annotations

import numpy as np

from .geometry import Geometry


def volume_preview(labels: np.ndarray, geometry: Geometry) -> bytes:
    """Not yet drawn."""
    raise NotImplementedError
