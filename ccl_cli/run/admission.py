"""Admission: what becomes of one input before it is read, decided without side effects
(gccl label --dry-run asks it too): labeled, and where its outputs go; else skipped, failed
or no-images, and why.

An input that is itself a file gccl made in --out is skipped (outputs are never inputs), and
one whose outputs' paths hold a link, a folder or a file gccl did not make there fails with
that reason (the write checks again, at the moment it replaces: io/out_dir.py).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..config import Settings
from ..io.decode import unreadable
from ..io.inputs import InputItem
from ..io.made import MadeFiles, in_the_way, lost_pages
from ..io.out_dir import OutDir
from ..io.output_paths import (
    GCCL_DIR,
    LABEL_ENDINGS,
    RUN_RECORD_NAME,
    SUMMARY_NAME,
    OutputPaths,
    label_file_format,
    output_paths,
)
from ..io.owner import file_identity
from ..io.seen import Seen
from .freshness import RunRecord, made_by
from .volume_files import input_stat, kind_problem


@dataclass(frozen=True)
class Admission:
    """What becomes of one input before it is read (admission).

    status: "label", or its record's final status: no-images, skipped, failed.
    paths: its outputs (where it writes, or may have written before).
    clears: whether a failure of the input moves its earlier outputs aside.
    current: skipped because its outputs are current (--skip-existing).
    """

    status: str
    message: str = ""
    paths: OutputPaths | None = None
    clears: bool = False
    current: bool = False


def admission(
    item: InputItem,
    settings: Settings,
    out: OutDir | None,
    made: MadeFiles | None,
    run_record: RunRecord | None,
    claimed: Seen,
) -> Admission:
    """Whether `item` is labeled, and where its outputs go; else what becomes of it and why
    (the module docstring). `claimed`: the label images the inputs before it claimed. `out`,
    `made`, `run_record`: --out as it is (None where it does not exist yet: nothing there is
    in the way, nothing is current). Decides only: gccl label --dry-run asks it too."""
    assert settings.out is not None
    if item.empty or item.duplicate:
        message = item.empty or f"listed again (labeled once, as {item.duplicate})"
        return Admission("no-images" if item.empty else "skipped", message)
    paths = output_paths(settings.out, item.relative, settings.keep_extension)
    reserved = reserved_name(item.relative)
    if reserved:
        return Admission("failed", reserved)
    if item.problem:
        # an unreadable folder has no outputs, nor has a line that names no file
        named = bool(item.relative.name) and not os.path.isdir(item.path)
        clears = named and paths.labels_png not in claimed
        return Admission("failed", item.problem, paths, clears)
    try:
        source = input_stat(item)
    except OSError:
        source = None  # (reading it says why)
    if source is not None and made is not None and made.is_made(source):
        return Admission(
            "skipped", f"a file gccl made in --out {settings.out}: outputs are never inputs"
        )
    first = claimed.first(paths.labels_png, claim(item))
    if first is not None and first != claim(item):
        return Admission("failed", collision(item, first))
    kind = kind_problem(item.volume, settings.params, settings.label_format)
    if kind:
        return Admission("failed", kind, paths, clears=True)
    if out is not None and made is not None:
        problem = in_the_way(out, made, written(paths, settings, item.volume))
        if problem:
            return Admission("failed", problem, paths, clears=True)
        if (
            (settings.skip_existing or item.resume)
            and source is not None
            and run_record is not None
            and outputs_current(paths, settings, out, made, run_record, item, source)
        ):
            why = "--skip-existing" if settings.skip_existing else "made before this watch began"
            message = f"outputs are current ({why})"
            return Admission("skipped", message, paths, clears=True, current=True)
    return Admission("label", "", paths, clears=True)


def lost_page_outputs(item: InputItem, out: OutDir, made: MadeFiles) -> list[Path]:
    """The outputs gccl made for pages `item`'s file no longer has (io/made.lost_pages), asked
    at its first input (its first page, or the file of one image). Decides only: gccl label
    --dry-run asks it too."""
    if item.page not in (None, 0) or item.empty or item.duplicate or not item.relative.name:
        return []
    return lost_pages(out, made, item.source[0], item.pages)


def claim(item: InputItem) -> str:
    """What a run keeps of the input that claims an output: its folder and how it is shown."""
    return f"{os.path.dirname(os.path.abspath(item.path))}\0{item.display}"


def collision(item: InputItem, claim: str) -> str:
    """Why `item` is not labeled, its outputs being those of the input of `claim` (claim):
    what is wrong with the file itself where something is (a format gccl does not read hides
    behind no collision), else the collision and the hint that applies."""
    problem = unreadable(item.path)
    if problem:
        return problem
    folder, _, first = claim.partition("\0")
    if folder == os.path.dirname(os.path.abspath(item.path)):
        hint = (
            "outputs are named after the file without its last suffix: --keep-extension "
            "keeps it in their names"
        )
    else:  # named files from two folders, each at the top of --out
        hint = "--relative-to keeps their folders apart"
    return f"its outputs would overwrite those of {first} ({hint})"


def outputs_current(
    paths: OutputPaths,
    settings: Settings,
    out: OutDir,
    made: MadeFiles,
    run_record: RunRecord,
    item: InputItem,
    source: os.stat_result,
) -> bool:
    """Whether every output of `item` at `paths` (a label image of any format) is in place,
    the file gccl made there, and made by this input as it is now (`source`: not another
    input of its name, not an earlier version) with these options (--skip-existing)."""
    expected = made_by(run_record.options_key, item.path, source, item.page)

    def made_by_it(path: Path) -> bool:
        info = made_here(out, made, path)
        facts = None if info is None else made.facts(out.key(path), file_identity(info))
        return facts is not None and facts.made_by == expected

    if not made_by_it(paths.stats):
        return False
    if not any(made_by_it(paths.labels(kind)) for kind in LABEL_ENDINGS):
        return False
    extras = [*([paths.preview] if settings.preview else [])]
    extras += [paths.polygons] if settings.polygons else []
    return all(made_by_it(path) for path in extras)


def written(paths: OutputPaths, settings: Settings, volume: str | None) -> list[Path]:
    """The files an input writes, as admission checks them: its label image (a 16-bit PNG
    unless --label-format says otherwise: auto's TIFF for more labels is checked as it is
    written; a volume's in its kind), its statistics, and with the options its preview and
    outlines."""
    labels = paths.labels(label_file_format(settings.label_format, 0, volume))
    return [
        labels,
        paths.stats,
        *([paths.preview] if settings.preview else []),
        *([paths.polygons] if settings.polygons else []),
    ]


def made_here(out: OutDir, made: MadeFiles, path: Path) -> os.stat_result | None:
    """What is at `path` when it is a file gccl made there, else None."""
    info = out.lstat(path)
    if info is None or not stat.S_ISREG(info.st_mode):
        return None
    return info if made.ours(out.key(path), file_identity(info)) else None


def reserved_name(relative: Path) -> str:
    """Why outputs mirrored at `relative` may not be written: their folder would take the
    name of a file or folder gccl keeps in --out ("" when it would not)."""
    if len(relative.parts) > 1 and relative.parts[0] in (SUMMARY_NAME, RUN_RECORD_NAME, GCCL_DIR):
        return f"its outputs would go into a folder named {relative.parts[0]} in --out"
    return ""
