"""Where outputs land in --out: each input's files, and the names gccl keeps there for itself.

An input mirrored at `relative` below --out (io/inputs.py decides the
mirror) writes `relative`'s folder / its stem + one suffix per kind of
output: only the input's last suffix is replaced, so `frame.depth.png`
gives `frame.depth.labels.png` (with --keep-extension none is:
`frame.depth.png.labels.png`); a volume format's ending counts as one suffix (`ct.nii.gz`
gives `ct.labels.nii.gz`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .volumes.detect import LABEL_VOLUME_FORMATS, label_format_for, volume_stem

#: The run's summary, a row per input, at the top of --out.
SUMMARY_NAME = "summary.csv"
#: The run record (run/freshness.py), at the top of --out.
RUN_RECORD_NAME = "gccl-run.json"
#: gccl's own folder at the top of --out: the lock and the record of the files gccl made
#: there. A folder that holds one is an --out.
GCCL_DIR = ".gccl"
#: The lock file (io/lock.py), in GCCL_DIR.
LOCK_NAME = "lock"
#: The record of made files (io/made.py), in GCCL_DIR: this file, and one segment per writer
#: (RECORD_NAME + "-" + the writer's part) until a run merges them into it.
RECORD_NAME = "made"
#: What an output's name gets when a failure moves it aside: x.labels.png -> x.labels.stale.png.
STALE_MARK = ".stale"
#: The label image and label volume formats (--label-format, past auto's choice) and their
#: files' endings (tiff and npy hold either; the volume formats' are io/volumes').
LABEL_ENDINGS = {
    "png": ".labels.png",
    **{name: ".labels" + ending for name, ending in LABEL_VOLUME_FORMATS.items()},
}
#: --label-format's formats that hold 2-D images only, and those that hold volumes only.
IMAGE_ONLY_FORMATS = ("png",)
VOLUME_ONLY_FORMATS = ("nifti", "nrrd", "metaimage")
#: The most labels a 16-bit PNG label image holds (auto writes a TIFF past it).
PNG_LABEL_LIMIT = 65535
#: How the images gccl writes beside an input's stem end (label images, previews).
OUTPUT_IMAGE_ENDINGS = (*LABEL_ENDINGS.values(), ".preview.png")


def is_output_image(name: str) -> bool:
    """Whether a file name is that of an image gccl writes (a folder scan passes over those
    in an earlier run's --out: io/inputs.py)."""
    return name.endswith(OUTPUT_IMAGE_ENDINGS)


@dataclass(frozen=True)
class OutputPaths:
    """The files one input may produce under --out: `folder` / `stem` + each kind's suffix
    (each path made when asked for: most are never needed)."""

    folder: Path
    stem: str

    @property
    def labels_png(self) -> Path:
        return self.labels("png")

    @property
    def labels_tif(self) -> Path:
        return self.labels("tiff")

    @property
    def labels_npy(self) -> Path:
        return self.labels("npy")

    @property
    def stats(self) -> Path:
        return self.folder / (self.stem + ".stats.csv")

    @property
    def preview(self) -> Path:
        return self.folder / (self.stem + ".preview.png")

    @property
    def polygons(self) -> Path:
        return self.folder / (self.stem + ".polygons.geojson")

    def labels(self, file_format: str) -> Path:
        """The label image path of a format of LABEL_ENDINGS."""
        return self.folder / (self.stem + LABEL_ENDINGS[file_format])

    def all(self) -> tuple[Path, ...]:
        """Every file the input may produce."""
        labels = tuple(self.labels(kind) for kind in LABEL_ENDINGS)
        return (*labels, self.stats, self.preview, self.polygons)


def stale_name(path: Path) -> str:
    """The name `path`'s file takes when a failure of its input moves it aside (its last
    suffix kept, so that it opens as before): x.labels.png -> x.labels.stale.png."""
    return path.stem + STALE_MARK + path.suffix


def output_paths(out: Path, relative: Path, keep_extension: bool = False) -> OutputPaths:
    """Outputs of the input at `relative`: only its last suffix is replaced (a volume
    format's ending counts as one: `ct.nii.gz` gives `ct.labels.nii.gz`), or with
    `keep_extension` none is (x.jpg gives x.jpg.labels.png)."""
    stem = relative.name if keep_extension else volume_stem(relative)
    return OutputPaths(out / relative.parent, stem)


def label_file_format(label_format: str, kept: int, volume: str | None = None) -> str:
    """The format of an input's label file (a key of LABEL_ENDINGS). An image's: --label-format's,
    auto being a PNG up to PNG_LABEL_LIMIT labels and a TIFF past it. A volume's (`volume`, its
    format: InputItem.volume): --label-format's, auto (or an image-only format, which admission
    refuses first) the input's own (io/volumes)."""
    if volume is not None:
        forced = label_format not in ("auto", *IMAGE_ONLY_FORMATS)
        return label_format_for(volume, label_format if forced else None)
    if label_format != "auto":
        return label_format
    return "tiff" if kept > PNG_LABEL_LIMIT else "png"
