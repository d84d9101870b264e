"""One line of benchmark results, the unit the runner produces and the reports print."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, fields
from typing import Any

from .suite import Case

LEVELS = ("kernel", "end-to-end")


@dataclass
class Record:
    """One engine on one case at one level and batch size.

    Times are per call (one batch at the kernel level, one pipeline run over
    `images` files end to end), in milliseconds; gpix_per_s and images_per_s
    come from the median. components: per image (kernel), or over all files
    (end to end). speedup_vs_opencv: OpenCV's median / this median at the
    same case, level and batch (None where OpenCV has no such record).
    status: ok (measured), skipped (not run; the note says why), failed (the
    engine raised; the note has the error) or mismatch (it disagreed with the
    cross-check's reference; the note says how). emulation: how the engine stood
    in for a mode its library lacks (OpenCV's floodFill for tau), else "".
    """

    engine: str
    case: str
    family: str
    size: str
    mode: str
    tau: float | None
    connectivity: int
    level: str
    batch: int | None
    images: int = 0
    runs: int = 0
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    gpix_per_s: float | None = None
    images_per_s: float | None = None
    components: int | None = None
    speedup_vs_opencv: float | None = None
    status: str = "ok"
    note: str = ""
    emulation: str = ""

    @classmethod
    def for_case(
        cls, engine: str, case: Case, level: str, batch: int | None, emulation: str = ""
    ) -> Record:
        """An empty record of `engine` on `case` (status ok, nothing timed yet)."""
        return cls(
            engine=engine,
            emulation=emulation,
            case=case.name,
            family=case.family,
            size=case.size,
            mode=case.params.mode,
            tau=case.params.tau,
            connectivity=case.params.connectivity,
            level=level,
            batch=batch,
        )

    def set_times(self, times_ms: list[float], images: int, pixels_per_image: int) -> None:
        """Fill the timing columns from the call times of `images` images each."""
        median = statistics.median(times_ms)
        self.images = images
        self.runs = len(times_ms)
        self.median_ms, self.min_ms, self.max_ms = median, min(times_ms), max(times_ms)
        self.images_per_s = images / (median / 1000) if median > 0 else None
        self.gpix_per_s = images * pixels_per_image / (median / 1000) / 1e9 if median > 0 else None

    def as_json(self) -> dict[str, Any]:
        """The --json object (every field)."""
        return asdict(self)


#: The --csv columns, in order.
COLUMNS = tuple(f.name for f in fields(Record))
