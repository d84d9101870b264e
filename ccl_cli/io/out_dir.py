"""The opened --out folder: every file below it written whole, only inside it, never through a link.

Every file is written to a hidden temporary in its own folder, flushed to
disk and renamed into place, so a run killed at any moment (SIGKILL included)
leaves either the old file, the new file, or a temporary that a later run
removes. Nothing is written outside --out whatever the inputs are called:
every file is made relative to the opened --out folder (OutDir), each
folder on the way opened without following links, the file created new
(O_EXCL, O_NOFOLLOW), and a path that would leave --out, or a link met in
the tree, refuses that write with one line. Clean-up removes only what this
tool made: temporaries (their name says so) whose writer is gone, and label
images carrying the caller's mark.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import InputError, UsageError
from .output_paths import SUMMARY_NAME

#: Names of temporaries: this prefix, the writer's pid, a random part. Short and of a
#: fixed length, so that a temporary fits wherever its file's name does (NAME_MAX).
TEMP_PREFIX = ".gccl-tmp-"
#: A temporary whose writer's pid is alive is left alone for this long (the pid may
#: belong to another host's worker on shared storage, or have been reused).
_TEMP_GRACE_SECONDS = 600.0
_TEMP_PATTERN = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-[0-9a-f]{8}")
#: Bytes at the start of a file searched for a removal mark (see OutDir.remove_marked).
_MARK_WINDOW = 1 << 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: Run right before every change this process makes under --out (see check_before_changes).
_before_change: Callable[[], None] | None = None

#: A file's identity: (st_dev, st_ino); the same file under any name or link.
Identity = tuple[int, int]


def check_before_changes(check: Callable[[], None]) -> None:
    """Run `check` right before each file is created, renamed into place or removed under
    --out by this process; it may end the process, and then nothing changes.

    A worker process whose client died must land nothing after it: the
    client's lock is gone and a new run may be writing there.
    """
    global _before_change
    _before_change = check


def _changing() -> None:
    if _before_change is not None:
        _before_change()


class OutDir:
    """The --out folder, opened once: every file written or removed under it goes through here.

    Paths are given as `root / relative` (as output_paths makes them); each
    is checked to stay inside, and reached from the opened folder one
    component at a time without following links.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._prefix = os.path.join(str(root), "")  # root's text ending in the separator
        try:
            root.mkdir(parents=True, exist_ok=True)
            # --out itself is the user's choice and may be a link; what lies below is not.
            self.fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            raise UsageError(
                f"cannot write into --out {root} ({error.strerror or error})"
            ) from None

    def close(self) -> None:
        """Release the folder's descriptor."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> OutDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write(
        self, path: Path, data: bytes, durable: bool = True, after_ns: int | None = None
    ) -> None:
        """Write `data` to `path` so that readers only ever see the whole file.

        durable: flush it to disk before the rename (--fsync); without, a power
        cut soon after may leave an empty or an older file, never a partial one
        in a running system.
        after_ns: a time (an input's modification) the file's modification time
        must be later than: the file system's clock ticks every few milliseconds,
        so a file written soon after its input was may get the same time, which
        would make it look older than its input (run/freshness.py); it is then
        stamped 1 ns later.

        Raises InputError when `path` leaves --out, when a folder on the way
        or `path` itself is a link or not a regular file (nothing is replaced).
        """
        folder, name = self._folder(path, create=True)
        try:
            self._check_replaceable(folder, name, path)
            temp = f"{TEMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
            _changing()
            fd = os.open(temp, _NEW_FLAGS, 0o666, dir_fd=folder)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # held while written: clean-up leaves it alone
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if after_ns is not None and os.fstat(fd).st_mtime_ns <= after_ns:
                    os.utime(fd, ns=(after_ns + 1, after_ns + 1))
                if durable:
                    os.fsync(fd)
                _changing()
                os.rename(temp, name, src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                _unlink(temp, folder)
                raise
            finally:
                os.close(fd)
        finally:
            os.close(folder)

    def remove_marked(self, path: Path, mark: bytes) -> bool:
        """Remove `path` if it is a regular file whose first bytes hold `mark` (a file this
        tool wrote); True if removed. Anything else, links included, stays."""
        try:
            folder, name = self._folder(path, create=False)
        except (InputError, FileNotFoundError):
            return False
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
            )
        except OSError:
            os.close(folder)
            return False
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or mark not in os.pread(fd, _MARK_WINDOW, 0):
                return False
            return _unlink_same(name, folder, info)
        finally:
            os.close(fd)
            os.close(folder)

    def remove_temporaries(self) -> int:
        """Delete temporaries whose writer is gone (killed mid-write); returns how many.

        A temporary is its writer's while the writer holds an flock on it (the
        kernel drops it when the writer dies). Another run's live temporaries
        (a run into a sub-folder, or one sharing a folder of this tree) are
        left alone, and so is anything not named as a temporary. Links are
        not followed.
        """
        removed = 0
        for _, _, names, folder in os.fwalk(".", dir_fd=self.fd, follow_symlinks=False):
            for name in names:
                writer = _TEMP_PATTERN.fullmatch(name)
                if writer and _remove_abandoned(name, folder, int(writer.group(1))):
                    removed += 1
        return removed

    def check_summary(self, inputs: set[Identity]) -> Path:
        """The summary's path, refused (UsageError) when something there must not be replaced:
        one of the inputs, a link, a folder."""
        path = self.root / SUMMARY_NAME
        try:
            info = os.stat(SUMMARY_NAME, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return path
        if (info.st_dev, info.st_ino) in inputs:
            raise UsageError(f"{path} is one of the inputs; choose another --out")
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{path} is {kind_of(info.st_mode)}, not a file gccl wrote; move it")
        return path

    def _folder(self, path: Path, create: bool) -> tuple[int, str]:
        """A descriptor of `path`'s folder (the caller closes it) and its name there."""
        text = str(path)
        if text.startswith(self._prefix):  # the usual case, without pathlib's parsing
            parts: Sequence[str] = text[len(self._prefix) :].split(os.sep)
        else:
            try:
                relative = path.relative_to(self.root)
            except ValueError:
                raise InputError(f"{path} is outside --out {self.root}; not written") from None
            parts = () if relative.is_absolute() else relative.parts
        if not parts or any(part in ("..", ".", "") for part in parts):
            raise InputError(f"{path} would leave --out {self.root}; not written")
        fd = os.dup(self.fd)
        for index, part in enumerate(parts[:-1]):  # each step closes the folder it leaves
            fd = self._enter(fd, part, create, self.root.joinpath(*parts[: index + 1]))
        return fd, parts[-1]

    @staticmethod
    def _enter(fd: int, part: str, create: bool, shown: Path) -> int:
        """The sub-folder `part` of folder `fd` (which is closed), made when missing."""
        try:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                info = os.stat(part, dir_fd=fd, follow_symlinks=False)
                raise InputError(
                    f"{shown} is {kind_of(info.st_mode)} inside --out; gccl writes only into "
                    "real folders there"
                ) from None
            raise
        finally:
            os.close(fd)
        return inner

    @staticmethod
    def _check_replaceable(folder: int, name: str, path: Path) -> None:
        try:
            info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path} is {kind_of(info.st_mode)}; not replaced")


def kind_of(mode: int) -> str:
    """What a file that is not a regular one is, for messages."""
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _unlink(name: str, folder: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)


def _unlink_same(name: str, folder: int, info: os.stat_result) -> bool:
    """Unlink `name` if it still is the file `info` describes."""
    try:
        now = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
        return False
    _changing()
    _unlink(name, folder)
    return True


def _remove_abandoned(name: str, folder: int, pid: int) -> bool:
    """Remove the temporary `name` of `folder` if its writer is gone; True if removed."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
        )
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
        return _unlink_same(name, folder, info)
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


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` through an OutDir of its folder (see OutDir.write)."""
    with OutDir(path.parent) as folder:
        folder.write(path, data, durable)
