"""Finding the inputs of a run: files, folders, glob patterns and `-` for stdin.

Each input keeps the path it is read from and the relative path its outputs
mirror under --out (a file found as <dir>/a/b/img.png under the folder <dir>
gets outputs in OUT/a/b/; a file named directly gets them in OUT/). A
relative path never leaves --out: one that would climb out of its folder
(`..` after a wildcard) is cut to the file's name. `**` in a pattern does
not enter linked folders and visits each folder once, so a link pointing
back up the tree cannot make the expansion endless.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..errors import UsageError
from .images import is_image_path

_GLOB_CHARS = set("*?[")


@dataclass(frozen=True)
class InputItem:
    """One input: where to read it, where its outputs go, or why it cannot be had."""

    path: Path
    relative: Path
    problem: str | None = None

    @property
    def display(self) -> str:
        """The path as the user gave or the scan found it (for messages and the summary)."""
        return str(self.path)


def expand(specs: Iterable[str], recursive: bool, stdin: TextIO | None = None) -> list[InputItem]:
    """The inputs named by the command-line arguments, in a stable order."""
    items: list[InputItem] = []
    for spec in specs:
        if spec == "-":
            lines = (stdin or sys.stdin).read().splitlines()
            items.extend(
                item
                for line in lines
                if line.strip()
                for item in _expand_one(line.strip(), recursive)
            )
        else:
            items.extend(_expand_one(spec, recursive))
    return items


def _expand_one(spec: str, recursive: bool) -> Iterator[InputItem]:
    path = Path(spec)
    if path.is_dir():
        yield from _scan(path, recursive)
    elif path.exists() or path.is_symlink():
        yield InputItem(path, Path(path.name))
    elif _GLOB_CHARS & set(spec):
        matches = sorted(set(_glob(spec)))
        if not matches:
            yield InputItem(path, Path(path.name), "the pattern matches no file")
        base = _glob_base(spec)
        for match in matches:
            found = Path(match)
            if found.is_dir():
                yield from _scan(found, recursive)
            else:
                yield InputItem(found, _relative_to(found, base))
    else:
        yield InputItem(path, Path(path.name), "no such file or directory")


def _scan(folder: Path, recursive: bool) -> Iterator[InputItem]:
    candidates = folder.rglob("*") if recursive else folder.iterdir()
    for path in sorted(candidates):
        hidden = any(part.startswith(".") for part in path.relative_to(folder).parts)
        if not hidden and is_image_path(path) and path.is_file():
            yield InputItem(path, path.relative_to(folder))


def _glob_base(pattern: str) -> Path:
    """The folder a glob pattern is rooted at: its leading parts without wildcards."""
    parts: list[str] = []
    for part in Path(pattern).parts[:-1]:
        if _GLOB_CHARS & set(part):
            break
        parts.append(part)
    return Path(*parts) if parts else Path()


def _relative_to(path: Path, base: Path) -> Path:
    """Where `path` mirrors under --out: below `base`, `..` folded; else just its name."""
    try:
        relative = Path(os.path.normpath(path.relative_to(base)))
    except ValueError:
        return Path(path.name)
    if relative.is_absolute() or ".." in relative.parts:
        return Path(path.name)
    return relative


def _glob(pattern: str) -> list[str]:
    """The paths `pattern` matches, as glob.glob(pattern, recursive=True) finds them, except
    that `**` does not descend into linked folders nor visit a folder twice."""
    parts = [part for part in pattern.split("/") if part]
    current = ["/" if pattern.startswith("/") else ""]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1 and not pattern.endswith("/")  # "dir/" names folders
        found: list[str] = []
        for base in current:
            if part == "**":
                found.extend(_walk(base, files=last))
            elif _GLOB_CHARS & set(part):
                found.extend(_matching(base, part, folders_only=not last))
            else:
                candidate = os.path.join(base, part)
                if os.path.lexists(candidate) if last else os.path.isdir(candidate):
                    found.append(candidate)
        current = found
    return [path for path in current if path]


def _matching(folder: str, part: str, folders_only: bool) -> Iterator[str]:
    """The entries of `folder` whose names match the wildcard `part` (hidden ones only when
    `part` starts with a dot, as in glob)."""
    try:
        entries = list(os.scandir(folder or "."))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(".") and not part.startswith("."):
            continue
        if fnmatch.fnmatchcase(entry.name, part):
            try:
                if folders_only and not entry.is_dir():
                    continue
            except OSError:
                continue
            yield os.path.join(folder, entry.name)


def _walk(base: str, files: bool) -> Iterator[str]:
    """`base` and every folder below it (and every file with `files`), hidden ones left out.

    Linked folders are not entered, and a folder reached twice (a bind mount
    of its own parent) is visited once.
    """
    seen: set[tuple[int, int]] = set()
    stack = [base]
    while stack:
        folder = stack.pop()
        try:
            info = os.stat(folder or ".")
            entries = list(os.scandir(folder or "."))
        except OSError:
            continue
        if (info.st_dev, info.st_ino) in seen:
            continue
        seen.add((info.st_dev, info.st_ino))
        yield folder
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = os.path.join(folder, entry.name)
            try:
                is_folder = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_folder:
                stack.append(path)
            elif files:
                yield path


def scanned_folders(specs: Iterable[str]) -> list[Path]:
    """The folders among the arguments (where outputs must not land)."""
    return [Path(spec) for spec in specs if spec != "-" and Path(spec).is_dir()]


def check_out_location(out: Path, specs: Iterable[str], recursive: bool) -> None:
    """Refuse an --out that is a scanned input folder, or inside one scanned recursively."""
    out_resolved = out.resolve()
    for folder in scanned_folders(specs):
        folder_resolved = folder.resolve()
        if out_resolved == folder_resolved:
            raise UsageError(f"--out {out} is the input folder {folder}; choose another folder")
        if recursive and folder_resolved in out_resolved.parents:
            raise UsageError(
                f"--out {out} is inside the input folder {folder} that --recursive scans; "
                "its outputs would be read back as inputs"
            )
