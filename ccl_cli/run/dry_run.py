"""`gccl label --dry-run`: what a run would do with its inputs, said and nothing written.

The inputs are found as a run finds them (folders scanned, globs matched, stdin read to its end)
and each goes through the run's own admission (admission.admission) against --out as it is now,
read without its lock: the record of the files gccl made there and the run record decide what
would be skipped as current (--skip-existing), what a file in the way would stop, and which
outputs of pages a file no longer has would be moved aside. No file or folder is made, not even
--out; no input is read beyond its first bytes (a name collision's other reason); the device and
a --scheduler are not contacted. The exit code is the run's where admission decides it: 2 for a
usage error (raised), 3 when nothing would be labeled, 1 when an input would fail, else 0.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import EXIT_NO_INPUTS, EXIT_OK, EXIT_SOME_FAILED, UsageError
from ..io.inputs import OutPlace, expand, passed_over_notice
from ..io.made import MadeFiles
from ..io.out_dir import OutDir
from ..io.output_paths import OutputPaths, label_file_format
from ..io.seen import Seen
from .admission import admission, lost_page_outputs
from .command import NO_IMAGES, checked_out
from .freshness import RunRecord

#: The action each admission status means, as the listing names it.
ACTIONS = {"label": "label", "skipped": "skip", "failed": "fail", "no-images": "none"}


def dry_run(
    specs: Sequence[str],
    settings: Settings,
    write: Callable[[str], None],
    notice: Callable[[str], None],
    stdin: Any = None,
) -> int:
    """List what `gccl label` would do with `specs` (module docstring): one line per input
    through `write` (a JSON object each with --json), a closing count through `notice`;
    the exit code the run would give."""
    out = checked_out(settings)
    passed_over: list[Path] = []
    items = expand(
        specs,
        settings.recursive,
        stdin,
        settings.null_separated,
        settings.relative_to,
        OutPlace(out),
        passed_over,
        settings.volume,
    )
    if passed_over:
        notice(passed_over_notice(passed_over))
    counts = dict.fromkeys(ACTIONS.values(), 0)
    with _out_as_it_is(out) as (folder, made):
        run_record = None
        if folder is not None and made is not None:
            run_record = RunRecord(folder, settings, made, time.time_ns())
        claimed = Seen()
        for item in items:
            if folder is not None and made is not None:
                lost = lost_page_outputs(item, folder, made)
                if lost:
                    notice(
                        f"{item.path} changed its pages: would keep the outputs made for those "
                        f"it no longer has as stale copies ({', '.join(map(folder.key, lost))})"
                    )
            decided = admission(item, settings, folder, made, run_record, claimed)
            action = ACTIONS[decided.status]
            counts[action] += 1
            outputs = _outputs(decided.paths, settings, item.volume) if action == "label" else []
            if settings.json:
                write(_json_line(item.path, item.page, action, decided.message, outputs))
            else:
                shown = item.display
                detail = f" -> {', '.join(outputs)}" if outputs else f": {decided.message}"
                write(f"{action:<5} {shown}{detail}")
    if counts["none"] == len(items):
        notice(NO_IMAGES)
    notice(
        f"dry run: would label {counts['label']} of {len(items)} input(s), "
        f"skip {counts['skip']}, fail {counts['fail']}; nothing written"
    )
    if counts["fail"]:
        return EXIT_SOME_FAILED
    return EXIT_NO_INPUTS if counts["none"] == len(items) else EXIT_OK


@contextmanager
def _out_as_it_is(out: Path) -> Iterator[tuple[OutDir | None, MadeFiles | None]]:
    """--out opened to read (and its record of made files), or (None, None) where it does not
    exist yet; nothing is made."""
    try:
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield None, None
        return
    except OSError as error:
        raise UsageError(f"cannot read --out {out} ({error.strerror or error})") from None
    folder = OutDir(out, fd)
    try:
        yield folder, MadeFiles(folder, as_it_is=True)
    finally:
        folder.close()


def _outputs(paths: OutputPaths | None, settings: Settings, volume: str | None) -> list[str]:
    """The files an input would write: its label image (auto's PNG; a TIFF past 65535
    labels; a volume's in its kind), statistics, and with the options its preview and
    outlines."""
    if paths is None:
        return []
    files = [paths.labels(label_file_format(settings.label_format, 0, volume)), paths.stats]
    files += [paths.preview] if settings.preview else []
    files += [paths.polygons] if settings.polygons else []
    return [str(path) for path in files]


def _json_line(path: Path, page: int | None, action: str, message: str, outputs: list[str]) -> str:
    record = {
        "path": str(path),
        "page": None if page is None else page + 1,
        "action": action,
        "message": message,
        "outputs": outputs,
    }
    return json.dumps(record)
