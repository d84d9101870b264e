"""Glob patterns as gccl expands them: glob.glob's matches, except that `**` does not enter
linked folders and visits each folder once, so a link pointing back up the tree cannot make
the expansion endless."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path

#: The characters that make a name a pattern.
GLOB_CHARS = set("*?[")


def glob_base(pattern: str) -> Path:
    """The folder a glob pattern is rooted at: its leading parts without wildcards."""
    parts: list[str] = []
    for part in Path(pattern).parts[:-1]:
        if GLOB_CHARS & set(part):
            break
        parts.append(part)
    return Path(*parts) if parts else Path()


def glob_paths(pattern: str) -> list[str]:
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
            elif GLOB_CHARS & set(part):
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
