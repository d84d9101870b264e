"""Where outputs land in --out: each input's files, and the names gccl keeps there for itself.

An input mirrored at `relative` below --out (io/inputs.py decides the
mirror) writes `relative`'s folder / its stem + one suffix per kind of
output: only the input's last suffix is replaced, so `frame.depth.png`
gives `frame.depth.labels.png`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: The run's summary, a row per input, at the top of --out.
SUMMARY_NAME = "summary.csv"
#: The run record (run/freshness.py), at the top of --out.
RUN_RECORD_NAME = "gccl-run.json"
#: The lock file (io/lock.py), at the top of --out.
LOCK_NAME = ".gccl.lock"


@dataclass(frozen=True)
class OutputPaths:
    """The files one input may produce under --out: `folder` / `stem` + each kind's suffix
    (each path made when asked for: most are never needed)."""

    folder: Path
    stem: str

    @property
    def labels_png(self) -> Path:
        return self.folder / (self.stem + ".labels.png")

    @property
    def labels_tif(self) -> Path:
        return self.folder / (self.stem + ".labels.tif")

    @property
    def stats(self) -> Path:
        return self.folder / (self.stem + ".stats.csv")

    @property
    def preview(self) -> Path:
        return self.folder / (self.stem + ".preview.png")

    @property
    def polygons(self) -> Path:
        return self.folder / (self.stem + ".polygons.geojson")

    def labels(self, tiff: bool) -> Path:
        """The label image path for the chosen format."""
        return self.labels_tif if tiff else self.labels_png

    def all(self) -> tuple[Path, ...]:
        """Every file the input may produce."""
        return (self.labels_png, self.labels_tif, self.stats, self.preview, self.polygons)

    def complete(self, preview: bool, polygons: bool = False) -> bool:
        """Whether a previous run finished this input (for --skip-existing)."""
        has_labels = self.labels_png.exists() or self.labels_tif.exists()
        return (
            has_labels
            and self.stats.exists()
            and (not preview or self.preview.exists())
            and (not polygons or self.polygons.exists())
        )


def output_paths(out: Path, relative: Path) -> OutputPaths:
    """Outputs of the input at `relative`: only its last suffix is replaced."""
    return OutputPaths(out / relative.parent, relative.stem)
