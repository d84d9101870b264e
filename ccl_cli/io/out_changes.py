"""What every change under --out goes through at the lowest level: the check a process runs
before each (check_before_changes), the removal of a name, and the temporaries a write passes
through: their names (TEMP_PREFIX) and the removal of those whose writer is gone."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import time
from collections.abc import Callable

from .output_paths import GCCL_DIR

#: Names of temporaries: this prefix, the writer's pid, a random part. Short and of a
#: fixed length, so that a temporary fits wherever its file's name does (NAME_MAX).
TEMP_PREFIX = ".gccl-tmp-"
#: A temporary whose writer's pid is alive is left alone for this long (the pid may
#: belong to another host's worker on shared storage, or have been reused).
_TEMP_GRACE_SECONDS = 600.0
_TEMP_PATTERN = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-[0-9a-f]{8}")
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Run right before every change this process makes under --out (see check_before_changes).
_before_change: Callable[[], None] | None = None


def check_before_changes(check: Callable[[], None]) -> None:
    """Run `check` right before each file is created, recorded as made, renamed into place
    or removed under --out by this process; it may end the process, and then nothing
    changes.

    A worker process whose client died must land nothing after it: the
    client's lock is gone and a new run may be writing there.
    """
    global _before_change
    _before_change = check


def changing() -> None:
    """Run the check set by check_before_changes, if any: called right before each change."""
    if _before_change is not None:
        _before_change()


def unlink(name: str, folder: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)


def is_an_out(name: str, folder: int) -> bool:
    """Whether the folder `name` of `folder` is an --out of gccl's (holds GCCL_DIR)."""
    path = GCCL_DIR if name == "." else os.path.join(name, GCCL_DIR)
    try:
        os.stat(path, dir_fd=folder, follow_symlinks=False)
    except OSError:
        return False
    return True


def remove_temporaries(root: int) -> int:
    """Delete the temporaries below the folder `root` (a descriptor) whose writer is gone;
    returns how many (OutDir.remove_temporaries)."""
    removed = 0
    for _, folders, names, folder in os.fwalk(".", dir_fd=root, follow_symlinks=False):
        folders[:] = [name for name in folders if name != GCCL_DIR and not is_an_out(name, folder)]
        for name in names:
            writer = _TEMP_PATTERN.fullmatch(name)
            if writer and _remove_abandoned(name, folder, int(writer.group(1))):
                removed += 1
    return removed


def _remove_abandoned(name: str, folder: int, pid: int) -> bool:
    """Remove the temporary `name` of `folder` if its writer is gone; True if removed."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=folder)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its writer is at work
        if _alive(pid) and time.time() - info.st_mtime < _TEMP_GRACE_SECONDS:
            return False  # made a moment ago, its writer about to lock it
        try:
            now = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return False
        if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
            return False
        changing()
        unlink(name, folder)
        return True
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process here (True when unsure); a zombie (a killed worker
    not yet reaped) is not: it writes nothing any more."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as status:  # "pid (name) STATE ..." (Linux)
            return status.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
