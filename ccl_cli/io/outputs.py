"""Where outputs go and how they are written: whole or not at all, one run at a time.

Every file is written to a hidden temporary name in its own folder, flushed to
disk and renamed into place, so a run killed at any moment (SIGKILL included)
leaves either the old file, the new file, or a temporary that the next run
removes. A lock file in --out keeps two runs from writing into it at once;
the lock is an flock, which the kernel drops when its holder dies, so a
crashed run's successor takes over without manual clean-up. The lock file
itself stays (removing it would let a third run lock a fresh file while a
second still holds the old one).
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
import socket
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..errors import OutputBusy, UsageError

LOCK_NAME = ".gccl.lock"
SUMMARY_NAME = "summary.csv"
SUMMARY_COLUMNS = (
    "path",
    "width",
    "height",
    "dtype",
    "components",
    "kept",
    "status",
    "message",
    "seconds",
)
_TEMP_MARK = ".gccl-tmp-"


@dataclass(frozen=True)
class OutputPaths:
    """The files one input may produce under --out."""

    labels_png: Path
    labels_tif: Path
    stats: Path
    preview: Path
    polygons: Path

    def labels(self, tiff: bool) -> Path:
        """The label image path for the chosen format."""
        return self.labels_tif if tiff else self.labels_png

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
    stem = out / relative.parent / relative.stem
    return OutputPaths(
        labels_png=stem.with_name(stem.name + ".labels.png"),
        labels_tif=stem.with_name(stem.name + ".labels.tif"),
        stats=stem.with_name(stem.name + ".stats.csv"),
        preview=stem.with_name(stem.name + ".preview.png"),
        polygons=stem.with_name(stem.name + ".polygons.geojson"),
    )


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` so that readers only ever see the whole file.

    durable: flush it to disk before the rename (--fsync); without, a power cut
    soon after may leave an empty or an older file, never a partial one in a
    running system.
    """
    if not path.parent.is_dir():  # a stat: mkdir would lock the parent folder every time
        path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}{_TEMP_MARK}{uuid.uuid4().hex[:12]}")
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def remove_stale_temporaries(out: Path) -> int:
    """Delete temporaries a killed run left under `out`; returns how many."""
    removed = 0
    for temp in out.rglob(f".*{_TEMP_MARK}*"):
        if temp.is_file():
            temp.unlink(missing_ok=True)
            removed += 1
    return removed


class OutputLock:
    """An exclusive hold on an --out folder for the life of a run."""

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK_NAME
        self._handle: IO[str] | None = None

    def __enter__(self) -> OutputLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+", encoding="utf-8")
        except OSError as error:
            raise UsageError(
                f"cannot write into --out {self.path.parent} ({error.strerror or error})"
            ) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise OutputBusy(
                f"{self.path.parent} is in use by a running gccl ({holder}); "
                "wait for it to finish or choose another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(
            f"pid {os.getpid()} on {socket.gethostname()} since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def summary_csv(rows: Iterable[Sequence[object]]) -> bytes:
    """The summary.csv bytes: a header and one row per input."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SUMMARY_COLUMNS)
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")
