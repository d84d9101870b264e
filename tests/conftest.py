"""Shared test settings, the pixel-value generator the property tests draw from, and the
one line that says what a run skipped and why."""

from __future__ import annotations

from collections import Counter
from typing import Any

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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line for every skipped test, grouped by reason ("-rs" still lists each): a run
    without a GPU skips hundreds, which would otherwise bury the failures."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons = Counter(_skip_reason(report) for report in skipped)
    said = "; ".join(f"{count} {reason}" for reason, count in reasons.most_common())
    terminalreporter.write_line(f"skipped {len(skipped)}: {said}")


def _skip_reason(report: Any) -> str:
    """Why a test was skipped, without its place."""
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return reason.removeprefix("Skipped: ")
