"""Shared test settings and the pixel-value generator the property tests draw from."""

from __future__ import annotations

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

settings.register_profile("gccl", deadline=None)
settings.load_profile("gccl")


def pixel_values(draw: st.DrawFn, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """Values of `dtype`: runs of close values (so tau chains form) near 0 or an
    extreme of the dtype, sprinkled with the extremes and, for floats, NaN and +-inf."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < draw(st.floats(0, 1))
    span = draw(st.integers(1, 8))
    odd = rng.random(shape) < draw(st.sampled_from([0, 0.1, 0.3]))
    if dtype.kind == "f":
        values = rng.integers(-span, span + 1, shape) * 0.5
        values[odd] = rng.choice([np.nan, np.inf, -np.inf, 1e30], int(odd.sum()))
        return values.astype(dtype)
    info = np.iinfo(dtype)
    low = draw(st.sampled_from([0, int(info.min), int(info.max) - span, -span // 2]))
    low = min(max(low, int(info.min)), int(info.max) - span)
    values = low + rng.integers(0, span + 1, shape)
    values[odd] = rng.choice([int(info.min), int(info.max)], int(odd.sum()))
    return values.astype(dtype)
