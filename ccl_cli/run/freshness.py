"""What made the outputs in --out: the run record, and what each output was made from.

Every run writes gccl-run.json into --out when it starts and again when it
ends: gccl's version, the backend, and the options that decide what the
outputs hold, and `since`, when a run with those options first started in
this folder. Each output's line in the record of made files (io/made.py)
keeps `made_by`: a hash of the input it was made from (its resolved path,
inode and modification time in ns, taken before it was read, and its page)
and of those options. --skip-existing skips an input only when every output
it needs is in place, is the file gccl made, and was made by this same
input, unchanged, with these options: another input of the same name, an
input replaced by an older file, or other options never pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Settings
from ..errors import InputError, UsageError
from ..io.out_dir import OutDir
from ..io.output_paths import RUN_RECORD_NAME
from ..io.owner import Owner

#: The most bytes of an earlier run record read (a few hundred are written).
MAX_RUN_RECORD_BYTES = 1 << 20


def output_options(settings: Settings) -> dict[str, Any]:
    """The settings that decide the outputs' content, as JSON values."""
    options = {
        **asdict(settings.params),
        "color_to_gray": settings.color_to_gray,
        "label_format": settings.label_format,
        "tiff_compression": settings.tiff_compression,
    }
    # (volumes' options only where given: a run without them records what runs did before)
    if settings.volume:
        options["volume"] = True
    if settings.spacing is not None:
        options["spacing"] = list(settings.spacing)
    loaded: dict[str, Any] = json.loads(json.dumps(options))
    return loaded


def options_key(options: dict[str, Any]) -> str:
    """A hash of the output options (output_options), for made_by."""
    return _hashed(json.dumps(options, sort_keys=True))


def made_by(options: str, path: Path, info: os.stat_result, page: int | None) -> str:
    """What the record keeps of the input that made an output: a hash of `options`
    (options_key), the input's resolved path, its inode and modification time as `info` gives
    them (taken before it was read), and its page. Its size is left out: a page of a file
    whose other pages changed is the same page (a file rewritten in place with its time kept
    counts as unchanged, as for make and rsync)."""
    where = os.path.realpath(path)
    return _hashed(json.dumps([options, where, info.st_ino, info.st_mtime_ns, page]))


def _hashed(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]


class RunRecord:
    """The run record of one run: read the last one, write this one's."""

    def __init__(self, out: OutDir, settings: Settings, owner: Owner, started_ns: int) -> None:
        """started_ns: when the run started, on the clock of the file system that stamps the
        outputs (the lock's modification time: time.time_ns() is finer and may run ahead
        of it, so an output written just after the start could otherwise look older)."""
        self.out = out
        self.owner = owner
        self.path = out.root / RUN_RECORD_NAME
        self.options = output_options(settings)
        #: The options' part of each output's made_by.
        self.options_key = options_key(self.options)
        self.device = settings.device
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        previous = _read(out)
        self.now = started_ns
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
        data = (json.dumps(record, indent=2) + "\n").encode("utf-8")
        try:
            self.out.write(self.path, data, self.owner)
        except (OSError, InputError) as error:
            reason = error.strerror if isinstance(error, OSError) else str(error)
            raise UsageError(f"cannot write {self.path} ({reason})") from None


def _read(out: OutDir) -> dict[str, Any] | None:
    """The last run's record, or None where there is none (or it does not read)."""
    try:
        data = json.loads(out.read_small(RUN_RECORD_NAME, MAX_RUN_RECORD_BYTES) or b"")
    except (InputError, ValueError):
        return None
    return data if isinstance(data, dict) else None
