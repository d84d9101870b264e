"""What made the outputs in --out: the run record, and which outputs are still current.

Every run writes gccl-run.json into --out when it starts and again when it
ends: gccl's version, the backend, and the options that decide what the
outputs hold. The record also keeps `since`, when a run with those options
first started in this folder; outputs written before it were made with
other options. --skip-existing skips an input only when its outputs are
complete, its statistics CSV (written last) is newer than `since` and
newer than the input itself. An input that fails loses the outputs an
earlier run made for it, so that no old result sits next to a failed row.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Settings
from ..contract.stats import CSV_COLUMNS
from ..io.inputs import InputItem
from ..io.label_images import LABEL_MARK
from ..io.out_dir import OutDir, atomic_write
from ..io.output_paths import LOCK_NAME, RUN_RECORD_NAME, OutputPaths


def output_options(settings: Settings) -> dict[str, Any]:
    """The settings that decide the outputs' content, as JSON values."""
    options = {
        **asdict(settings.label_params()),
        "color_to_gray": settings.color_to_gray,
        "label_format": settings.label_format,
        "tiff_compression": settings.tiff_compression,
    }
    loaded: dict[str, Any] = json.loads(json.dumps(options))
    return loaded


class RunRecord:
    """The run record of one run: read the last one, write this one's."""

    def __init__(self, out: Path, settings: Settings) -> None:
        self.path = out / RUN_RECORD_NAME
        self.options = output_options(settings)
        self.device = settings.device
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        previous = _read(self.path)
        # Times on the file system's own clock, which stamps the outputs: the lock file was
        # written as this run started. time.time_ns() is finer and may run ahead of it, so an
        # output written just after the start could otherwise look older than the run.
        self.now = (out / LOCK_NAME).stat().st_mtime_ns
        if previous is not None and previous.get("options") == self.options:
            self.since = int(previous.get("since", 0))
        else:
            self.since = self.now

    def write(self, backend: str, finished: bool) -> None:
        """Write the record (at the start and at the end of the run)."""
        record = {
            "version": __version__,
            "backend": backend,
            "device": self.device,
            "options": self.options,
            "since": self.since,
            "started": self.started,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z") if finished else None,
        }
        atomic_write(self.path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))

    def current(self, item: InputItem, paths: OutputPaths) -> bool:
        """Whether the complete outputs at `paths` were made from this input as it is now,
        with these options."""
        try:
            made = paths.stats.stat().st_mtime_ns
            changed = os.stat(item.path).st_mtime_ns
        except (OSError, ValueError):
            return False
        return made >= self.since and made > changed

    def remove_earlier(self, paths: OutputPaths) -> None:
        """Delete the outputs an earlier run made at `paths`: only a set gccl wrote (its
        statistics CSV, written last, older than this run), each file only if it holds
        gccl's mark (io/out_dir.py's OutDir.remove_marked; links are never followed)."""
        try:
            if os.lstat(paths.stats).st_mtime_ns >= self.now:
                return
        except OSError:
            return
        with OutDir(self.path.parent) as folder:
            if not folder.remove_marked(paths.stats, ",".join(CSV_COLUMNS).encode()):
                return
            for path, mark in (
                (paths.labels_png, LABEL_MARK),
                (paths.labels_tif, LABEL_MARK),
                (paths.preview, b"\x89PNG"),
                (paths.polygons, b'{"type":"FeatureCollection"'),
            ):
                folder.remove_marked(path, mark)


def _read(path: Path) -> dict[str, Any] | None:
    """The last run's record, or None where there is none (or it does not read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
