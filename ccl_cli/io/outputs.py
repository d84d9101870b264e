"""Where outputs go and how they are written: whole, only inside --out, one run at a time.

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

A lock file in --out keeps two runs from writing into it at once; the lock
is an flock, which the kernel drops when its holder dies, so a crashed run's
successor takes over without manual clean-up. The lock file itself stays
(removing it would let a third run lock a fresh file while a second still
holds the old one).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import os
import re
import secrets
import socket
import stat
import time
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, OutputBusy, UsageError
from .seen import Seen

LOCK_NAME = ".gccl.lock"
SUMMARY_NAME = "summary.csv"
SUMMARY_COLUMNS = (
    "path",
    "page",
    "width",
    "height",
    "dtype",
    "components",
    "kept",
    "status",
    "message",
    "seconds",
)
#: Names of temporaries: this prefix, the writer's pid, a random part. Short and of a
#: fixed length, so that a temporary fits wherever its file's name does (NAME_MAX).
TEMP_PREFIX = ".gccl-tmp-"
#: A temporary whose writer's pid is alive is left alone for this long (the pid may
#: belong to another host's worker on shared storage, or have been reused).
_TEMP_GRACE_SECONDS = 600.0
_TEMP_PATTERN = re.compile(re.escape(TEMP_PREFIX) + r"(\d+)-[0-9a-f]{8}")
#: Bytes at the start of a file searched for a removal mark (see OutDir.remove_marked).
_MARK_WINDOW = 1 << 16
_LOCK_MARK = "pid "
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: Run right before every change this process makes under --out (see check_before_changes).
_before_change: Callable[[], None] | None = None

#: A file's identity: (st_dev, st_ino); the same file under any name or link.
Identity = tuple[int, int]


@dataclass(frozen=True)
class OutputPaths:
    """The files one input may produce under --out: `folder` / `stem` + each kind's suffix
    (each path made when asked for: most are never needed)."""

    folder: Path
    stem: str

    @property
    def labels_png(self) -> Path:
        return self.folder / (self.stem + ".labels.png")

    @property
    def labels_tif(self) -> Path:
        return self.folder / (self.stem + ".labels.tif")

    @property
    def stats(self) -> Path:
        return self.folder / (self.stem + ".stats.csv")

    @property
    def preview(self) -> Path:
        return self.folder / (self.stem + ".preview.png")

    @property
    def polygons(self) -> Path:
        return self.folder / (self.stem + ".polygons.geojson")

    def labels(self, tiff: bool) -> Path:
        """The label image path for the chosen format."""
        return self.labels_tif if tiff else self.labels_png

    def all(self) -> tuple[Path, ...]:
        """Every file the input may produce."""
        return (self.labels_png, self.labels_tif, self.stats, self.preview, self.polygons)

    def complete(self, preview: bool, polygons: bool = False) -> bool:
        """Whether a previous run finished this input (for --skip-existing)."""
        has_labels = self.labels_png.exists() or self.labels_tif.exists()
        return (
            has_labels
            and self.stats.exists()
            and (not preview or self.preview.exists())
            and (not polygons or self.polygons.exists())
        )

    def first_of(self, identities: Container[Identity], names: Container[str] = ()) -> Path | None:
        """The first of these files that is one of `identities` (a run's inputs), if any;
        with `names`, only files of those names are looked at."""
        for path in self.all():
            if names and path.name not in names:
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) in identities:
                return path
        return None


def output_paths(out: Path, relative: Path) -> OutputPaths:
    """Outputs of the input at `relative`: only its last suffix is replaced."""
    return OutputPaths(out / relative.parent, relative.stem)


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


def identities(paths: Iterable[Path]) -> set[Identity]:
    """The identities of `paths` and of what their links point to (missing ones left out)."""
    found: set[Identity] = set()
    for path in paths:
        for follow in (False, True):
            try:
                info = os.stat(path, follow_symlinks=follow)
            except (OSError, ValueError):
                continue
            found.add((info.st_dev, info.st_ino))
    return found


class RunInputs:
    """A run's inputs by identity, to refuse outputs that would replace one of them.

    fixed: every input is known at the start (a list found then). Each output
    folder is then listed once and only the names there whose inode is an
    input's are stat'ed: an entry made later is a new file (one of this run's
    outputs), never one of the inputs. Inputs that arrive over time may be
    files made after such a listing, so then every output path is stat'ed,
    and their identities are kept on disk (seen.py), as many as arrive.
    """

    def __init__(self, paths: Iterable[Path], fixed: bool) -> None:
        self.identities = identities(paths)
        self.fixed = fixed
        self._inodes = {inode for _, inode in self.identities}
        self._listed: dict[Path, set[str] | None] = {}
        self._arrived = Seen(on_disk=not fixed)

    def add(self, path: Path) -> None:
        """An input that arrived (one of a fixed list is known already)."""
        if not self.fixed:
            for identity in identities([path]):
                self._arrived.first(identity)

    def first_among(self, outputs: OutputPaths) -> Path | None:
        """The first of `outputs` that is one of the inputs, if any."""
        if not self.fixed:
            return outputs.first_of(self._arrived)
        folder = outputs.folder
        if folder not in self._listed:
            self._listed[folder] = self._names_of_inputs(folder)
        names = self._listed[folder]
        if names is None:
            return outputs.first_of(self.identities)
        return outputs.first_of(self.identities, names) if names else None

    def _names_of_inputs(self, folder: Path) -> set[str] | None:
        """The names in `folder` whose inode is an input's; None when it cannot be listed."""
        try:
            with os.scandir(folder) as entries:
                return {entry.name for entry in entries if entry.inode() in self._inodes}
        except FileNotFoundError:
            return set()
        except OSError:
            return None


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
            raise UsageError(f"{path} is {_kind(info.st_mode)}, not a file gccl wrote; move it")
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
                    f"{shown} is {_kind(info.st_mode)} inside --out; gccl writes only into "
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
            raise InputError(f"{path} is {_kind(info.st_mode)}; not replaced")


def _kind(mode: int) -> str:
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


class OutputLock:
    """An exclusive hold on an --out folder for the life of a run.

    The lock file is opened without following a link and must be a regular
    file holding nothing but a gccl lock line: a link planted there, or a
    file of the user's by that name, is refused rather than overwritten.
    """

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK_NAME
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        out = self.path.parent
        with OutDir(out) as folder:
            try:
                fd = os.open(
                    LOCK_NAME,
                    os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                    0o666,
                    dir_fd=folder.fd,
                )
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise UsageError(
                        f"{self.path} is a link; remove it (gccl never follows it)"
                    ) from None
                raise UsageError(
                    f"cannot write into --out {out} ({error.strerror or error})"
                ) from None
        try:
            self._take(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def _take(self, fd: int) -> None:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{self.path} is {_kind(info.st_mode)}; remove it")
        content = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        if content and not content.startswith(_LOCK_MARK):
            raise UsageError(f"{self.path} is not a gccl lock file; move it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = content.strip() or "another process"
            raise OutputBusy(
                f"{self.path.parent} is in use by a running gccl ({holder}); "
                "wait for it to finish or choose another --out"
            ) from None
        line = (
            f"{_LOCK_MARK}{os.getpid()} on {socket.gethostname()} since "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        os.ftruncate(fd, 0)
        os.pwrite(fd, line.encode("utf-8"), 0)

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def summary_csv(rows: Iterable[Sequence[object]]) -> bytes:
    """The summary.csv bytes: a header and one row per input."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(SUMMARY_COLUMNS)
    writer.writerows(rows)
    return buffer.getvalue().encode("utf-8")
